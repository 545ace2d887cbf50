package main

import (
	"strconv"

	"github.com/verbatim-kafka/verbatim/policies/sdk"
)

var policy = sdk.Policy{Name: "producer-ids", Judge: judge}

func init() { sdk.Register(policy) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// check returns why batch i is refused, or "". Without a producer id (-1)
// Kafka ignores the epoch and sequence, and clients fill them in
// differently (franz-go writes sequence 0, the Java client -1), so only the
// id itself is checked then.
func check(in sdk.Input, i int) string {
	pid, attrs := in.ProducerID(i), in.Attributes(i)
	control := attrs&0x20 != 0
	switch {
	case pid < -1:
		return "producer id " + itoa(pid) + " is negative (only -1, no producer, is valid)"
	case pid == -1 && attrs&0x10 != 0:
		return "transactional batch without a producer id"
	case pid == -1:
		return ""
	}
	epoch, seq := in.ProducerEpoch(i), in.BaseSequence(i)
	switch {
	case epoch < 0:
		return "producer id " + itoa(pid) + " with epoch " + itoa(int64(epoch))
	case !control && seq < 0:
		return "idempotent batch of producer " + itoa(pid) + " with sequence " + itoa(int64(seq))
	case control && seq != -1:
		return "control batch with sequence " + itoa(int64(seq)) + " (Kafka writes -1)"
	}
	return ""
}

// lastEpoch is the latest epoch per producer within one call; reused.
var lastEpoch = map[int64]int16{}

func judge(in sdk.Input, v *sdk.Verdicts) {
	clear(lastEpoch)
	for i, n := 0, in.NumBatches(); i < n; i++ {
		if why := check(in, i); why != "" {
			v.Reject(i, sdk.InvalidRecord, why)
			continue
		}
		pid, epoch := in.ProducerID(i), in.ProducerEpoch(i)
		if pid < 0 {
			continue
		}
		// A producer's epoch never goes back along a log: Kafka fences
		// older epochs.
		if prev, ok := lastEpoch[pid]; ok && epoch < prev {
			v.Reject(i, sdk.InvalidProducerEpoch, "producer "+itoa(pid)+" epoch "+itoa(int64(epoch))+" after epoch "+itoa(int64(prev)))
			continue
		}
		lastEpoch[pid] = epoch
	}
}

func main() {}
