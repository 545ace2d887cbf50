package mirror

// The pusher's identity towards the destination and the topic ids it
// keeps (docs/protocol.md "Writer epoch" and "Mirror topic id").
//
// Fencing: each partition of a mirror topic remembers its newest writer,
// ordered by (WriterEpoch, WriterID). Every worker first registers ("claims")
// its partition with a mirror DeleteRecords to offset 0, which moves no
// log start but makes this pusher the partition's newest writer or fences
// it at once. After two pushers claimed a partition, exactly one of them
// can write it; the other's next write is PRODUCER_FENCED and it stops
// with exit code 1.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/wireext"
)

// topicIDFeature is the destination feature for the CreateTopics topic-id
// tag; mirrorFeature version 1 adds the WriterID.
const (
	topicIDFeature      = wireext.FeatureMirrorTopicID
	writerIDFeatureVers = wireext.FeatureMirrorProduceWriterID
)

// newWriterID is the start time in Unix nanoseconds followed by 8 random
// bytes.
func newWriterID(now time.Time) [16]byte {
	var id [16]byte
	binary.BigEndian.PutUint64(id[:8], uint64(now.UnixNano()))
	_, _ = rand.Read(id[8:]) // crypto/rand.Read never fails (Go 1.24+)
	return id
}

// writerTag is the request-level MirrorProduce value: version 0, the
// writer epoch, and the WriterID in the struct's tagged field 0.
func writerTag(epoch int32, id [16]byte) []byte {
	return (&wireext.MirrorProduce{WriterEpoch: epoch, WriterID: id}).AppendTo(nil)
}

// topicIDTag is the CreateTopics topic entry's MirrorTopicID value.
func topicIDTag(id [16]byte) []byte {
	return (&wireext.MirrorTopicID{TopicID: id}).AppendTo(nil)
}

// FormatTopicID renders a topic id as Kafka prints it.
func FormatTopicID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// checkDestFeatures notes what the destination supports and warns about
// what an older Verbatim lacks.
func (p *Pusher) checkDestFeatures(dc *Conn) {
	if dc.FeatureMaxVersion(mirrorFeature) < writerIDFeatureVers {
		p.log.Warn("the destination does not know writer ids ("+mirrorFeature+" < 1): a pusher started in the same second as this one would not be fenced by it", "dest", p.o.Dest)
	}
	p.pinIDs = dc.HasFeature(topicIDFeature)
	if p.o.CreateTopics && !p.pinIDs {
		p.log.Warn("the destination cannot take the source's topic ids (no feature "+topicIDFeature+"): topics it creates get new ids", "dest", p.o.Dest)
	}
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
		p.log.Warn("the destination topic's id differs from the source's (it was not created by mirror push --create-topics with topic ids); the data is mirrored all the same", "topic", name, "source_id", FormatTopicID(src), "dest_id", FormatTopicID(dst))
	}
}

// claim registers this pusher as the partition's writer before it writes
// anything: a mirror DeleteRecords to offset 0 (the log start never
// moves back, so nothing is deleted).
func (w *worker) claim(ctx context.Context) error {
	err := w.retry(ctx, "registering as the partition's writer", func() error {
		err := w.deleteRecords(ctx, 0)
		var ke *kerr.Error
		switch {
		case errors.Is(err, kerr.ProducerFenced):
			return w.fenced("")
		case errors.As(err, &ke) && !transient(err):
			return Refusal("%s: the destination refused this pusher as the partition's writer: %v (a mirror DeleteRecords is accepted only on a mirror.mode=push topic whose mirror was not stopped)", w.name(), err)
		}
		return err
	})
	if w.p.claimed != nil {
		w.p.claimed(w.tp.topic, w.tp.partition, err)
	}
	return err
}

// fenced is the error that stops a pusher another one took over from.
func (w *worker) fenced(msg string) error {
	if msg != "" {
		msg = " (" + msg + ")"
	}
	return &Error{Code: ExitRefused, Err: fencedError(fmt.Sprintf("%s: PRODUCER_FENCED: another `verbatim mirror push` took over this partition on the destination%s; this pusher (writer epoch %d, writer id %x) stops",
		w.name(), msg, w.p.o.WriterEpoch, w.p.o.WriterID[:]))}
}

// fencedError reads as its own message and is kerr.ProducerFenced for
// errors.Is (kerr's text speaks of transactional ids).
type fencedError string

func (e fencedError) Error() string { return string(e) }
func (e fencedError) Unwrap() error { return kerr.ProducerFenced }
