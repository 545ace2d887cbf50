package broker

// Internal topics: __consumer_offsets and __transaction_state.
//
// The group and transaction coordinators keep their state in these two
// topics as Kafka does, with Kafka's record schemas (kmsg's
// OffsetCommitKey/Value, GroupMetadataKey/Value, TxnMetadataKey/Value), so
// a dump of the topics reads as a Kafka one. They are ordinary partition
// logs created on first use (FindCoordinator or the first write) with
// cleanup.policy=compact; on start the coordinators replay them (in
// cluster mode, each partition when this broker is elected its leader:
// coordinators_cluster.go).
//
// Keys map to partitions as Kafka maps them: abs(Java String.hashCode) mod
// the partition count (coordlog.PartitionForKey).

import (
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/coordlog"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/storage"
)

const (
	offsetsTopic  = coordlog.OffsetsTopic
	txnStateTopic = coordlog.TxnStateTopic
)

// isInternalTopic reports whether name is one of the coordinators' topics.
func isInternalTopic(name string) bool { return coordlog.IsInternalTopic(name) }

// internalPartitionCount is the partition count keys of an internal topic
// are spread over: the existing topic's (as Kafka reads it from the
// metadata; CreatePartitions refuses internal topics, so it never
// changes), else the count it will be created with.
func (s *Server) internalPartitionCount(name string) int32 {
	if t := s.cluster.topic(name); t != nil {
		if n := len(t.Partitions()); n > 0 {
			return int32(n)
		}
	}
	if name == txnStateTopic {
		return coordlog.TxnStateTopicPartitions
	}
	return coordlog.OffsetsTopicPartitions
}

// internalTopic returns the named internal topic, creating it on first use.
func (s *Server) internalTopic(name string) (*Topic, error) {
	if t := s.cluster.topic(name); t != nil {
		return t, nil
	}
	n := int32(coordlog.OffsetsTopicPartitions)
	if name == txnStateTopic {
		n = coordlog.TxnStateTopicPartitions
	}
	segBytes := "104857600"
	if name == offsetsTopic && s.cfg.OffsetsTopicSegmentBytes > 0 {
		segBytes = strconv.Itoa(int(s.cfg.OffsetsTopicSegmentBytes))
	}
	cfg, err := newTopicConfig(map[string]string{"cleanup.policy": "compact", "segment.bytes": segBytes})
	if err != nil {
		return nil, err
	}
	t, err := s.cluster.createTopic(name, n, cfg, false)
	if err != nil {
		if t := s.cluster.topic(name); t != nil { // created concurrently
			return t, nil
		}
		return nil, err
	}
	s.log.Info("created internal topic", "topic", name, "partitions", n)
	return t, nil
}

// internalLog returns the log of partition p of an internal topic.
func (s *Server) internalLog(name string, p int32) (*Partition, *storage.Log, error) {
	t, err := s.internalTopic(name)
	if err != nil {
		return nil, nil, kafkaErr(kerr.CoordinatorNotAvailable, fmt.Sprintf("internal topic %s: %v", name, err))
	}
	part := t.Partition(p)
	if part == nil {
		return nil, nil, kafkaErr(kerr.CoordinatorNotAvailable, fmt.Sprintf("internal topic %s has no partition %d", name, p))
	}
	l, err := partitionLog(part)
	if err != nil {
		return nil, nil, kafkaErr(kerr.CoordinatorNotAvailable, err.Error())
	}
	return part, l, nil
}

// appendInternal writes recs as one batch to partition p of topic name and
// returns the offset of the first record once it is replicated (cluster
// mode: acks=all, and only while this broker leads the partition).
func (s *Server) appendInternal(name string, p int32, recs []coordlog.Record, how coordlog.Batch, now time.Time) (int64, error) {
	part, l, err := s.internalLog(name, p)
	if err != nil {
		return -1, err
	}
	if _, err := s.leaderCheck(part, -1); err != nil {
		return -1, err // cluster mode: the partition moved (NOT_COORDINATOR)
	}
	records := make([]kbatch.Record, len(recs))
	for i, r := range recs {
		records[i] = kbatch.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
	}
	b := kbatch.NewBatch(now.UnixMilli(), records...)
	b.ProducerID, b.ProducerEpoch, b.BaseSequence = -1, -1, -1
	if how.Transactional {
		b.ProducerID, b.ProducerEpoch = how.ProducerID, how.ProducerEpoch
		b.Attributes |= kbatch.TransactionalBit
	}
	set, err := kbatch.Encode(b)
	if err != nil {
		return -1, err
	}
	var ar storage.AppendResult
	if how.Transactional {
		ar, err = l.AppendCoordinator(set, part.LeaderEpoch(), now.UnixMilli(), 1)
	} else {
		ar, err = l.AppendLeader(set, part.LeaderEpoch(), now.UnixMilli())
	}
	if err != nil {
		return -1, err
	}
	part.notifyAppend()
	if err := s.awaitReplicated(part, ar.LastOffset+1); err != nil {
		return -1, err
	}
	return ar.FirstOffset, nil
}

// writeTxnMarker appends a COMMIT or ABORT marker for producer pid to p
// and returns once it is replicated (cluster mode: Kafka writes markers
// with acks=all, and only the partition's leader takes them).
func (s *Server) writeTxnMarker(p *Partition, pid int64, epoch int16, commit bool, coordinatorEpoch int32, now time.Time) error {
	if _, err := s.leaderCheck(p, -1); err != nil {
		return err
	}
	l, err := partitionLog(p)
	if err != nil {
		return err
	}
	typ := kbatch.ControlAbort
	if commit {
		typ = kbatch.ControlCommit
	}
	b := kbatch.NewBatch(now.UnixMilli(), kbatch.Record{Key: kbatch.ControlKey(typ), Value: kbatch.EndTxnMarkerValue(coordinatorEpoch)})
	b.ProducerID, b.ProducerEpoch, b.BaseSequence = pid, epoch, -1
	b.Attributes |= kbatch.TransactionalBit | kbatch.ControlBit
	set, err := kbatch.Encode(b)
	if err != nil {
		return err
	}
	ar, err := l.AppendCoordinator(set, p.LeaderEpoch(), now.UnixMilli(), 1)
	if err != nil {
		return err
	}
	p.notifyAppend()
	return s.awaitReplicated(p, ar.LastOffset+1)
}

// replayInternal calls fn for every record of partition p of an internal
// topic, in offset order. Records that do not decode are reported to fn
// like any other (fn decides); a batch whose records do not decode is
// skipped with a warning, as Kafka skips what it cannot read on load.
func (s *Server) replayInternal(l *storage.Log, fn func(e coordlog.Entry)) error {
	off := l.LogStartOffset()
	end := l.LogEndOffset()
	var buf []byte
	for off < end {
		sl, err := l.Read(off, 1<<20)
		if err != nil {
			return err
		}
		if sl.Size == 0 {
			break
		}
		buf, err = sl.Bytes(buf[:0])
		if err != nil {
			return err
		}
		if len(buf) == 0 {
			return fmt.Errorf("replaying %s: batch at %d larger than the read", l.Dir(), off)
		}
		for rest := buf; len(rest) > 0; {
			var b []byte
			b, rest, err = kbatch.Next(rest)
			if err != nil {
				break
			}
			h, err := kbatch.ParseHeader(b)
			if err != nil {
				return fmt.Errorf("replaying %s at %d: %w", l.Dir(), off, err)
			}
			off = h.NextOffset()
			if h.IsControl() {
				ctl, err := storage.ParseControlBatch(b)
				if err != nil || !ctl.Present || (ctl.Type != kbatch.ControlCommit && ctl.Type != kbatch.ControlAbort) {
					continue
				}
				fn(coordlog.Entry{Offset: h.BaseOffset, ProducerID: h.ProducerID, Control: true, Commit: ctl.Type == kbatch.ControlCommit, Timestamp: h.MaxTimestamp})
				continue
			}
			if err := replayBatch(b, &h, fn); err != nil {
				s.logFault(slog.LevelError, "replay", "skipping an undecodable batch of an internal topic", l.Config().Topic, l.Config().Partition, clientInfo{},
					"offset", h.BaseOffset, "err", err.Error())
			}
		}
	}
	return nil
}

// maxReplayRecordBytes bounds one decompressed record of an internal
// topic (a group's metadata with its members' assignments is the largest).
const maxReplayRecordBytes = 64 << 20

// replayBatch streams the records of batch b (header h) to fn, all or
// none: a first pass walks them without handing any out, so a batch
// with an undecodable record is skipped whole, as before streaming.
// Internal batches are written uncompressed, so the second pass is cheap.
func replayBatch(b []byte, h *kbatch.Header, fn func(e coordlog.Entry)) error {
	if err := walkRecords(b, nil); err != nil {
		return err
	}
	return walkRecords(b, func(r *kbatch.Record) {
		fn(coordlog.Entry{
			Offset: h.BaseOffset + int64(r.OffsetDelta), Timestamp: h.BaseTimestamp + r.TimestampDelta,
			ProducerID: h.ProducerID, Transactional: h.IsTransactional(), Key: r.Key, Value: r.Value,
		})
	})
}

// walkRecords streams b's records to fn (nil: only checks they decode).
func walkRecords(b []byte, fn func(*kbatch.Record)) error {
	rr, err := kbatch.NewRecordReader(b, kbatch.Limits{MaxRecordBytes: maxReplayRecordBytes, Keep: fn != nil})
	if err != nil {
		return err
	}
	defer rr.Close()
	for {
		if _, err := rr.Next(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if fn == nil {
			continue
		}
		r, err := rr.Record()
		if err != nil {
			return err
		}
		fn(&r)
	}
}
