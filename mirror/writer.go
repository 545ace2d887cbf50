package mirror

// The pusher's identity towards the destination and the topic ids it
// keeps (docs/protocol.md "Writer epoch" and "Mirror topic id").
//
// Fencing: the destination assigns writer epochs. At its start the pusher
// registers all its partitions at once, one mirror DeleteRecords (to
// offset 0, which moves no log start) per destination leader with writer
// epoch RegisterEpoch and its WriterID; the destination answers one new
// epoch for them all, above any the partitions had, and from then on
// admits only that (epoch, id) on them. A pusher registered later thus
// fences an earlier one on every partition they share: the earlier one's
// next write is PRODUCER_FENCED and it stops with exit code 1. Each worker
// then claims its partition with the assigned epoch (a check that it is
// still the writer); a partition that appears later (--follow) or whose
// registration failed transiently is registered by its worker alone.

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/client"
)

// newWriterID is the start time in Unix nanoseconds followed by 8 random
// bytes.
func newWriterID(now time.Time) [16]byte {
	var id [16]byte
	binary.BigEndian.PutUint64(id[:8], uint64(now.UnixNano()))
	_, _ = rand.Read(id[8:]) // crypto/rand.Read never fails (Go 1.24+)
	return id
}

// checkDestFeatures refuses a destination that does not assign writer
// epochs and notes what else it supports.
func (p *Pusher) checkDestFeatures(dc *client.Conn) error {
	if v := dc.FeatureMaxVersion(mirrorFeature); v < assignedFeatureVers {
		return Usage("destination %s offers %s version %d, but this pusher needs version %d: writer epochs assigned by the destination (docs/protocol.md \"Writer epoch\"); upgrade the destination Verbatim", p.o.Dest, mirrorFeature, v, assignedFeatureVers)
	}
	p.pinIDs = dc.HasFeature(topicIDFeature)
	if p.o.CreateTopics && !p.pinIDs {
		p.log.Warn("the destination cannot take the source's topic ids (no feature "+topicIDFeature+"): topics it creates get new ids", "dest", p.o.Dest)
	}
	return nil
}

// register registers this pusher on parts, one request per destination
// leader, and records the epochs assigned. A partition refused for good
// ends the push (fenced: exit 1 as any fenced write; refused: exit 1);
// one whose leader or answer failed transiently is left to its worker.
func (p *Pusher) register(ctx context.Context, parts []tp) error {
	byLeader := map[string]map[string][]int32{}
	conns := map[string]*client.Conn{}
	for _, t := range parts {
		cn, _, err := p.dst.Leader(ctx, t.topic, t.partition)
		if err != nil {
			continue // the worker registers, with its retries
		}
		a := cn.Addr()
		conns[a] = cn
		if byLeader[a] == nil {
			byLeader[a] = map[string][]int32{}
		}
		byLeader[a][t.topic] = append(byLeader[a][t.topic], t.partition)
	}
	got := map[tp]int32{}
	var failed error
	for a, ps := range byLeader {
		answers, err := mirrorDeleteRecords(ctx, conns[a], Writer{Epoch: RegisterEpoch, ID: p.o.WriterID}, ps, 0)
		if err != nil {
			p.log.Debug("registration failed; the partitions' workers register", "dest", a, "err", err)
			continue
		}
		for t, ans := range answers {
			var ke *kerr.Error
			switch {
			case ans.err == nil && ans.epoch >= 0:
				got[t] = ans.epoch
			case ans.err == nil:
				failed = Usage("%s/%d: the destination assigned no writer epoch to the registration (it lacks %s version %d)", t.topic, t.partition, mirrorFeature, assignedFeatureVers)
			case errors.Is(ans.err, kerr.ProducerFenced):
				failed = &Error{Code: ExitRefused, Err: fencedError(fmt.Sprintf("%s/%d: PRODUCER_FENCED: another `verbatim mirror push` took over this partition on the destination (it registered while this one did); this pusher stops", t.topic, t.partition))}
			case errors.As(ans.err, &ke) && !transient(ans.err):
				failed = writerRefusal(t.topic, t.partition, ans.err)
			}
		}
	}
	p.mu.Lock()
	for t, e := range got {
		p.epochs[t] = e
	}
	p.mu.Unlock()
	if p.registered != nil {
		p.registered(got, failed)
	}
	if len(got) > 0 {
		p.log.Info("registered as the mirror writer", "partitions", len(got), "writer_id", client.FormatTopicID(p.o.WriterID))
	}
	return failed
}

// writerRefusal is the exit-1 error of a registration the destination
// refused, with the reason that fits its code.
func writerRefusal(topic string, partition int32, err error) error {
	why := "a mirror DeleteRecords is accepted only on a mirror.mode=push topic whose mirror was not stopped"
	if errors.Is(err, kerr.ClusterAuthorizationFailed) || errors.Is(err, kerr.TopicAuthorizationFailed) {
		why = "the destination principal needs WRITE on the topic and CLUSTER_ACTION on the cluster, the mirror permission (docs/security.md)"
	}
	return Refusal("%s/%d: the destination refused this pusher as the partition's writer: %v (%s)", topic, partition, err, why)
}

// checkTopicID logs, once per topic, a destination topic whose id is not
// the source's (created before topic ids were kept, or by hand).
func (p *Pusher) checkTopicID(name string, src, dst [16]byte) {
	if src == dst || src == ([16]byte{}) {
		return
	}
	p.mu.Lock()
	warned := p.idWarned[name]
	p.idWarned[name] = true
	p.mu.Unlock()
	if !warned {
		p.log.Warn("the destination topic's id differs from the source's (it was not created by mirror push --create-topics with topic ids); the data is mirrored all the same", "topic", name, "source_id", client.FormatTopicID(src), "dest_id", client.FormatTopicID(dst))
	}
}
