package broker

// DeleteRecords (key 21), versions 0-2.
//
// Behaviour: advances each partition's log start offset to the requested
// offset (-1: the high watermark); segments entirely below it are deleted
// and the epoch cache and producer state follow (storage.Log.DeleteRecords).
// The response's LowWatermark is the new log start offset. Per partition:
// an offset above the high watermark (or below -1) is OFFSET_OUT_OF_RANGE;
// a topic whose cleanup.policy does not include delete is POLICY_VIOLATION
// (as Kafka refuses it on compacted topics); unknown partitions are
// UNKNOWN_TOPIC_OR_PARTITION. In cluster mode only the leader deletes
// (NOT_LEADER_OR_FOLLOWER elsewhere), up to the replicated high watermark;
// the followers take the new log start with their next fetch, and the
// answer waits until the low watermark (the least log start of the
// leader and its live followers) reaches the requested offset, answering
// it as LowWatermark, or REQUEST_TIMED_OUT after TimeoutMillis, as Kafka
// does (replica_logstart.go). Mirror DeleteRecords do not wait.
//
// Authorization (with the authorizer on, authorize.go): DELETE on the
// topic; the mirror log-start forward and the writer registration WRITE
// and the mirror permission instead (a refused topic registers nothing).
//
// Deviations from Apache Kafka: mirror topics (mirror.mode=push) refuse
// DeleteRecords from clients with POLICY_VIOLATION: their log start is the
// source's to move. A pusher forwards it with a v2 request carrying the
// request-level tag wireext.MirrorTag (a wireext.MirrorProduce value,
// docs/mirroring.md), accepted on mirror topics
// only and whatever their cleanup.policy (the log start follows the
// source's); the same tag on an ordinary topic is POLICY_VIOLATION. Its
// writer is admitted like a mirror produce's (mirror_writer.go:
// PRODUCER_FENCED for an older or other writer, INVALID_PRODUCER_EPOCH for
// an epoch never assigned; POLICY_VIOLATION once a mirror stop began).
// With WriterEpoch -1 it is a writer registration: the broker assigns the
// request's mirror partitions one new writer epoch, persists it, and
// answers it in each partition's tag wireext.MirrorTag
// (wireext.MirrorWriterEpoch); the offset is then applied as that writer's
// (0, the pusher's, moves nothing). A mirror DeleteRecords' partition may
// carry wireext.MirrorStartEpoch (tag wireext.MirrorTag, feature version
// 3): the source's leader epoch at the forwarded offset, recorded in the
// leader-epoch cache when it agrees with the stored batches
// (mirror_start_epoch.go); one that does not is POLICY_VIOLATION and
// moves nothing. In cluster mode such a forward is answered once the
// mirror record holds the epoch for the other replicas
// (mirror_start_epoch_cluster.go). After the stop the topic is ordinary and clients'
// DeleteRecords are accepted.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/authz"
	"github.com/verbatim-kafka/verbatim/wireext"
)

func init() { register(kmsg.DeleteRecords.Int16(), 0, 2, handleDeleteRecords) }

func handleDeleteRecords(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	deadline := time.Now().Add(time.Duration(max(req.TimeoutMillis, 0)) * time.Millisecond)
	var pending []pendingDelete // cluster mode: waiting for the low watermark
	mirror := false
	var mreq wireext.MirrorProduce
	var tagErr error
	req.UnknownTags.Each(func(tag uint32, v []byte) {
		if tag == wireext.MirrorTag {
			mirror, tagErr = true, mreq.ReadFrom(v)
		}
	})
	if tagErr != nil {
		return nil, tagErr
	}
	if mirror {
		if err := checkStartEpochTags(req); err != nil {
			return nil, err
		}
	}
	// A log-start forward and a writer registration need the mirror
	// permission (CLUSTER_ACTION on CLUSTER) and WRITE on the topic; a
	// client's DeleteRecords DELETE on the topic, as Kafka checks it.
	var refusal error
	if mirror && !s.mirrorPermitted(r) {
		refusal = errMirrorPermission(r, mirrorDeleteRecordsWhat)
	}
	topicOp := authz.OpDelete
	if mirror {
		topicOp = authz.OpWrite
	}
	writer := writerOf(&mreq)
	// Each topic is looked up once: in cluster mode a topic can arrive
	// while the request is served, and a registration must answer for
	// the partitions it registered, not for ones that appeared after it.
	topics := make([]*Topic, len(req.Topics))
	for i := range req.Topics {
		topics[i] = s.cluster.topic(req.Topics[i].Topic)
	}
	var regErrs map[*Partition]error
	if mirror && mreq.WriterEpoch == wireext.RegisterWriterEpoch {
		// A refused topic takes no part in the registration.
		allowed := func(topic string) bool {
			return refusal == nil && s.authorized(r, topicOp, authz.ResourceTopic, topic)
		}
		writer.Epoch, regErrs = s.registerDeleteRecords(req, topics, writer.ID, allowed)
	}
	for ti, rt := range req.Topics {
		ot := kmsg.NewDeleteRecordsResponseTopic()
		ot.Topic = rt.Topic
		t := topics[ti]
		denied := refusal == nil && !s.authorized(r, topicOp, authz.ResourceTopic, rt.Topic)
		for _, rp := range rt.Partitions {
			op := kmsg.NewDeleteRecordsResponseTopicPartition()
			op.Partition, op.LowWatermark = rp.Partition, -1
			p := t.Partition(rp.Partition)
			switch {
			case refusal != nil:
				op.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				s.logDataFailure("delete records", rt.Topic, rp.Partition, op.ErrorCode, refusal, clientOf(r), "offset", rp.Offset)
			case denied:
				op.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case p == nil:
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
			if op.ErrorCode != 0 {
				ot.Partitions = append(ot.Partitions, op)
				continue
			}
			err := regErrs[p]
			if err == nil {
				_, err = s.leaderCheck(p, -1) // cluster mode: the leader deletes
			}
			if err == nil {
				err = s.checkMirrorDelete(p, mirror, writer)
			}
			var low, requested int64
			if err == nil {
				startEpoch := startEpochOf(&rp, mirror)
				requested, low, err = deleteRecordsTo(p, rp.Offset, mirror, startEpoch, "")
				if err == nil && startEpoch >= 0 {
					err = s.recordSourceStart(p, requested, startEpoch) // cluster mode: for every replica
				}
			}
			if err == nil && !mirror {
				var wait *leaderState
				if low, wait = replicatedDelete(p, requested, low); wait != nil {
					op.ErrorCode = kerr.RequestTimedOut.Code // until it completes, as Kafka's
					pending = append(pending, pendingDelete{ti: len(resp.Topics), pi: len(ot.Partitions), ls: wait, requested: requested})
				}
			}
			if err != nil {
				op.ErrorCode, _ = dataErrorToKafka(err)
				s.logDataFailure("delete records", p.Topic.Name, p.Index, op.ErrorCode, err, clientOf(r), "offset", rp.Offset)
			} else {
				op.LowWatermark = low
				if regErrs != nil {
					op.UnknownTags.Set(wireext.MirrorTag, (&wireext.MirrorWriterEpoch{WriterEpoch: writer.Epoch}).AppendTo(nil))
				}
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
		if mirror && mreq.WriterEpoch == wireext.RegisterWriterEpoch {
			s.auditRegistration(r, &ot, writer)
		}
	}
	if len(pending) > 0 {
		return Defer(&delayedDeleteRecords{s: s, client: clientOf(r), resp: resp, pending: pending, deadline: deadline}), nil
	}
	return resp, nil
}

// registerDeleteRecords registers the writer of a registration (a mirror
// DeleteRecords with writer epoch -1) on the request's partitions of
// mirror topics the principal may write (allowed), in one assignment
// (mirror_writer.go): the epoch, and the refusal of each partition that
// could not take part (a non-nil map). topics[i] is req.Topics[i]'s topic
// (nil: unknown), as the handler answers for it.
func (s *Server) registerDeleteRecords(req *kmsg.DeleteRecordsRequest, topics []*Topic, id writerID, allowed func(topic string) bool) (int32, map[*Partition]error) {
	var ps []*Partition
	for i, rt := range req.Topics {
		t := topics[i]
		if t == nil || !t.Config().MirrorPush || !allowed(rt.Topic) {
			continue
		}
		for _, rp := range rt.Partitions {
			if p := t.Partition(rp.Partition); p != nil {
				ps = append(ps, p)
			}
		}
	}
	epoch, errs := s.registerMirrorWriters(ps, id)
	out := make(map[*Partition]error, len(ps))
	for i, p := range ps {
		if errs[i] != nil {
			out[p] = errs[i]
		}
	}
	return epoch, out
}

func deleteRecords(p *Partition, offset int64, mirror bool) (int64, error) {
	return deleteRecordsAt(p, offset, mirror, -1, "")
}

// deleteRecordsAt is deleteRecords whose mirror log-start forward may
// carry the source's leader epoch at offset (startEpoch >= 0,
// mirror_start_epoch.go), by a cluster link (link != "", its forward to
// its pull-mode topic: link_data.go) or by a wire client (link "").
func deleteRecordsAt(p *Partition, offset int64, mirror bool, startEpoch int32, link string) (int64, error) {
	_, low, err := deleteRecordsTo(p, offset, mirror, startEpoch, link)
	return low, err
}

// deleteRecordsTo is deleteRecordsAt also returning the offset the log
// start was moved to (-1 resolved to the high watermark): what a
// replicated DeleteRecords waits for its low watermark to reach.
func deleteRecordsTo(p *Partition, offset int64, mirror bool, startEpoch int32, link string) (requested, low int64, err error) {
	h, err := partitionHandle(p)
	if err != nil {
		return -1, -1, err
	}
	l := h.log
	cfg := p.Topic.Config()
	switch {
	case cfg.Mirror && !mirror:
		return -1, -1, kafkaErr(kerr.PolicyViolation, fmt.Sprintf("topic %s is a mirror topic (mirror.mode=%s): its records cannot be deleted by clients", p.Topic.Name, mirrorModeOf(cfg)))
	case cfg.MirrorPull && mirror && link != cfg.MirrorLink:
		return -1, -1, errPullTopic(p.Topic.Name, cfg)
	case cfg.MirrorPush && link != "":
		return -1, -1, kafkaErr(kerr.PolicyViolation, fmt.Sprintf("topic %s is a push mirror topic: cluster link %s does not write it", p.Topic.Name, link))
	case !cfg.Mirror && mirror:
		return -1, -1, kafkaErr(kerr.PolicyViolation, fmt.Sprintf("topic %s is not a mirror topic: mirror DeleteRecords need mirror.mode=push", p.Topic.Name))
	}
	if !cfg.CleanupPolicyDelete && !mirror {
		return -1, -1, kafkaErr(kerr.PolicyViolation, fmt.Sprintf("Records of partition %s can not be deleted while the partition's cleanup policy is compact", p.Dir()))
	}
	hw := l.HighWatermark()
	if h.replicated {
		hw = highWatermark(h) // cluster mode: the replicated high watermark
	}
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return -1, -1, kafkaErr(kerr.OffsetOutOfRange, fmt.Sprintf("cannot delete records of %s up to %d: the high watermark is %d", p.Dir(), offset, hw))
	}
	before := l.LogStartOffset()
	if err := moveLogStart(l, offset, startEpoch); err != nil {
		return -1, -1, err
	}
	low = l.LogStartOffset()
	if h.replicated && low > before {
		// The followers' long polls answer at once with the new log
		// start (replica_logstart.go).
		p.wakeWaiters()
	}
	return offset, low, nil
}

// mirrorDeleteRecordsWhat names the mirror DeleteRecords in a refusal; the
// tag's number comes from wireext, its one owner.
var mirrorDeleteRecordsWhat = "a mirror log-start forward or writer registration (DeleteRecords with tag " +
	strconv.Itoa(wireext.MirrorTag) + ")"
