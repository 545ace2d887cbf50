package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/mirror"
)

// registration is a writer registration (a mirror DeleteRecords with
// writer epoch -1, docs/protocol.md "Writer epoch") by id of partitions
// parts of topic, to offset 0, as the pusher sends it.
func registration(topic string, id writerID, parts ...int32) *kmsg.DeleteRecordsRequest {
	return mirror.DeleteRecordsRequest(mirror.Writer{Epoch: mirror.RegisterEpoch, ID: id}, map[string][]int32{topic: parts}, 0)
}

// assignedEpoch reads the writer epoch a registration's partition answer
// carries (-1: none).
func assignedEpoch(t *testing.T, p kmsg.DeleteRecordsResponseTopicPartition) int32 {
	t.Helper()
	e, err := mirror.AssignedEpoch(&p)
	if err != nil {
		t.Fatalf("partition %d: %v", p.Partition, err)
	}
	return e
}

// registerAs registers id on partitions parts of topic and returns the
// epoch assigned (every partition must be answered with it).
func registerAs(t *testing.T, b *testBroker, topic string, id writerID, parts ...int32) int32 {
	t.Helper()
	resp := rawRequest[*kmsg.DeleteRecordsResponse](t, b, registration(topic, id, parts...))
	epoch := int32(-1)
	for i, p := range resp.Topics[0].Partitions {
		e := assignedEpoch(t, p)
		if p.ErrorCode != 0 || e < 0 || (i > 0 && e != epoch) {
			t.Fatalf("registering %s/%d: %v, epoch %d (first %d)", topic, p.Partition, kerr.ErrorForCode(p.ErrorCode), e, epoch)
		}
		epoch = e
	}
	return epoch
}

// registerTestWriter registers the writer the test helpers' mirror
// produces use (mirrorProduce: epoch testWriterEpoch, the zero id) on
// every partition of a mirror topic created fresh. It calls the server
// directly: no connection of its own lingers in tests that count them
// (the wire is registerAs').
func registerTestWriter(t *testing.T, b *testBroker, topic string, parts int32) {
	t.Helper()
	tp := b.srv.cluster.topic(topic)
	ps := tp.Partitions()
	if int32(len(ps)) != parts {
		t.Fatalf("%s has %d partitions, want %d", topic, len(ps), parts)
	}
	e, errs := b.srv.registerMirrorWriters(ps, writerID{})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("registering on %s/%d: %v", topic, i, err)
		}
	}
	if e != testWriterEpoch {
		t.Fatalf("the first registration on %s got epoch %d, want %d", topic, e, testWriterEpoch)
	}
}

// testWriterEpoch is the first epoch a partition assigns.
const testWriterEpoch = 0
