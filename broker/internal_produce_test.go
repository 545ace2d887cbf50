package broker

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Clients cannot append to the coordinators' topics: Kafka refuses with
// INVALID_TOPIC_EXCEPTION ("Cannot append to internal topic ..."), and
// nothing reaches the log.
func TestProduceToInternalTopicsRefused(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	for _, typ := range []int8{0, 1} { // creates both internal topics
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = typ
		req.CoordinatorKeys = []string{"k"}
		resp, err := req.RequestWith(ctxT(t), b.client())
		if err != nil || resp.Coordinators[0].ErrorCode != 0 {
			t.Fatalf("find coordinator %d: %v %+v", typ, err, resp)
		}
	}
	for _, topic := range []string{offsetsTopic, txnStateTopic} {
		if b.srv.cluster.topic(topic) == nil {
			t.Fatalf("%s not created by FindCoordinator", topic)
		}
		before := listOffsetT(t, b, topic, 0, -1)
		for _, v := range []int16{3, 9} {
			r := produceOne(t, b, v, topic, 0, encodeBatch(t, 0, -1, -1, []byte("x")))
			if r.ErrorCode != kerr.InvalidTopicException.Code {
				t.Fatalf("produce v%d to %s: error %d, want INVALID_TOPIC_EXCEPTION", v, topic, r.ErrorCode)
			}
			if v >= 8 && (r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "Cannot append to internal topic "+topic)) {
				t.Fatalf("produce v%d to %s: message %v", v, topic, r.ErrorMessage)
			}
		}
		if after := listOffsetT(t, b, topic, 0, -1); after != before {
			t.Fatalf("%s/0 log end moved %d -> %d", topic, before, after)
		}
	}
}
