// Command producer-ids is the built-in policy that checks producer fields
// for shapes Kafka never writes: producer ids below -1, transactional
// batches without a producer id, a producer id with a negative epoch,
// idempotent data without a sequence, control batches with one, and a
// producer's epoch going backwards within one request.
package main

import (
	"strconv"

	"github.com/verbatim-kafka/verbatim/policies/sdk"
)

var policy = sdk.Policy{Name: "producer-ids", Judge: judge}

func init() { sdk.Register(policy) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// check returns why a header is refused, or "". Without a producer id
// (-1) Kafka ignores the epoch and sequence, and clients fill them in
// differently (franz-go writes sequence 0, the Java client -1), so only the
// id itself is checked then.
func check(h *sdk.Header) string {
	control := h.Attributes&0x20 != 0
	switch {
	case h.ProducerID < -1:
		return "producer id " + itoa(h.ProducerID) + " is negative (only -1, no producer, is valid)"
	case h.ProducerID == -1 && h.Attributes&0x10 != 0:
		return "transactional batch without a producer id"
	case h.ProducerID == -1:
		return ""
	case h.ProducerEpoch < 0:
		return "producer id " + itoa(h.ProducerID) + " with epoch " + itoa(int64(h.ProducerEpoch))
	case !control && h.BaseSequence < 0:
		return "idempotent batch of producer " + itoa(h.ProducerID) + " with sequence " + itoa(int64(h.BaseSequence))
	case control && h.BaseSequence != -1:
		return "control batch with sequence " + itoa(int64(h.BaseSequence)) + " (Kafka writes -1)"
	}
	return ""
}

// lastEpoch is the latest epoch per producer within one call; reused.
var lastEpoch = map[int64]int16{}

func judge(in sdk.Input, v *sdk.Verdicts) {
	clear(lastEpoch)
	for i, n := 0, in.NumBatches(); i < n; i++ {
		h := in.Batch(i).Header
		if why := check(&h); why != "" {
			v.Reject(i, sdk.InvalidRecord, why)
			continue
		}
		if h.ProducerID < 0 {
			continue
		}
		// A producer's epoch never goes back along a log: Kafka fences
		// older epochs.
		if prev, ok := lastEpoch[h.ProducerID]; ok && h.ProducerEpoch < prev {
			v.Reject(i, sdk.InvalidProducerEpoch, "producer "+itoa(h.ProducerID)+" epoch "+itoa(int64(h.ProducerEpoch))+" after epoch "+itoa(int64(prev)))
			continue
		}
		lastEpoch[h.ProducerID] = h.ProducerEpoch
	}
}

func main() {}
