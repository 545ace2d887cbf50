package broker

// The source's leader epoch at a mirror's log start (wireext.MirrorStartEpoch
// in a mirror DeleteRecords' partitions, feature verbatim.mirror.produce
// version 3): the pusher forwards the epoch the source's ListOffsets
// EARLIEST answers with the log start it forwards, and the partition's
// leader-epoch cache takes it when it agrees with the stored batches
// (storage.Log.DeleteRecordsWithEpoch), so a mirror whose source
// compacted its first batches away answers EARLIEST (and
// OffsetForLeaderEpoch for that epoch) as the source. It is admitted as
// the log-start forward is: the mirror permission, the partition's
// registered writer (21_delete_records.go).

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/storage"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// checkStartEpochTags decodes every partition's MirrorStartEpoch of a
// mirror DeleteRecords before anything is applied: a malformed one makes
// the request malformed (the connection closes, as for the request-level
// value).
func checkStartEpochTags(req *kmsg.DeleteRecordsRequest) error {
	var err error
	for i := range req.Topics {
		for j := range req.Topics[i].Partitions {
			rp := &req.Topics[i].Partitions[j]
			rp.UnknownTags.Each(func(tag uint32, v []byte) {
				var m wireext.MirrorStartEpoch
				if tag == wireext.MirrorTag && err == nil {
					if e := m.ReadFrom(v); e != nil {
						err = fmt.Errorf("DeleteRecords %s/%d: %w", req.Topics[i].Topic, rp.Partition, e)
					}
				}
			})
		}
	}
	return err
}

// startEpochOf is the source's leader epoch a mirror DeleteRecords
// partition carries, -1 when it carries none (or the request is not a
// mirror one: the tag is then an unknown one, ignored as Kafka ignores
// them). The value was checked by checkStartEpochTags.
func startEpochOf(rp *kmsg.DeleteRecordsRequestTopicPartition, mirror bool) int32 {
	epoch := int32(-1)
	if !mirror {
		return epoch
	}
	rp.UnknownTags.Each(func(tag uint32, v []byte) {
		var m wireext.MirrorStartEpoch
		if tag == wireext.MirrorTag && m.ReadFrom(v) == nil {
			epoch = m.LeaderEpoch
		}
	})
	return epoch
}

// moveLogStart advances l's log start to offset and, with startEpoch >= 0,
// records the source's leader epoch there; an epoch that contradicts the
// stored batches moves nothing (storage.ErrEpochInconsistent,
// POLICY_VIOLATION).
func moveLogStart(l *storage.Log, offset int64, startEpoch int32) error {
	if startEpoch < 0 {
		_, err := l.DeleteRecords(offset)
		return err
	}
	_, err := l.DeleteRecordsWithEpoch(offset, startEpoch)
	return err
}
