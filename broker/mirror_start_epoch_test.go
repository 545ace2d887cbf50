package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/mirror"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// startEpochForward is the test writer's log-start forward of m/0 to
// offset carrying the source's leader epoch there (wireext.MirrorStartEpoch).
func startEpochForward(writerEpoch int32, offset int64, epoch int32) *kmsg.DeleteRecordsRequest {
	req := mirror.DeleteRecordsRequest(mirror.Writer{Epoch: writerEpoch}, map[string][]int32{"m": {0}}, offset)
	req.Topics[0].Partitions[0].UnknownTags.Set(wireext.MirrorTag, (&wireext.MirrorStartEpoch{LeaderEpoch: epoch}).AppendTo(nil))
	return req
}

func earliestAnswer(t *testing.T, b *testBroker) (int64, int32) {
	t.Helper()
	p := listOffsetsPart(t, b, 9, "m", 0, -2, 0)
	if p.ErrorCode != 0 {
		t.Fatalf("ListOffsets EARLIEST: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	return p.Offset, p.LeaderEpoch
}

// TestMirrorStartEpoch: a mirror whose first source batches were
// compacted away (the copy starts at offset 5) answers ListOffsets
// EARLIEST with -1 until the pusher forwards the source's epoch at its
// log start; then with that epoch, also after a restart. A forward that
// contradicts the stored batches, one from a writer that is not the
// registered one, and a client's DeleteRecords carrying the value change
// nothing; a malformed value closes the connection.
func TestMirrorStartEpoch(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir, nil)
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push"), "cleanup.policy": sp("compact")})
	if r := mirrorOne(t, b, "m", concat(data(5, 0, 2).encode(t), data(8, 1, 2).encode(t)), 0, -1); r.ErrorCode != 0 {
		t.Fatalf("mirror produce: %+v", r)
	}
	if off, e := earliestAnswer(t, b); off != 0 || e != -1 {
		t.Fatalf("EARLIEST before the forward: offset %d epoch %d", off, e)
	}
	forward := func(req *kmsg.DeleteRecordsRequest) kmsg.DeleteRecordsResponseTopicPartition {
		return rawRequest[*kmsg.DeleteRecordsResponse](t, b, req).Topics[0].Partitions[0]
	}
	unchanged := func(what string) {
		t.Helper()
		if off, e := earliestAnswer(t, b); off != 0 || e != -1 {
			t.Fatalf("%s changed EARLIEST: offset %d epoch %d", what, off, e)
		}
	}
	// An epoch above the first stored batch's contradicts it.
	if p := forward(startEpochForward(testWriterEpoch, 0, 1)); p.ErrorCode != kerr.PolicyViolation.Code {
		t.Fatalf("inconsistent epoch: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	unchanged("an inconsistent epoch")
	// A writer epoch never assigned is refused as for any forward.
	if p := forward(startEpochForward(testWriterEpoch+5, 0, 0)); p.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("unassigned writer: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	unchanged("an unassigned writer")
	// Without the request-level mirror tag it is a client's DeleteRecords.
	client := kmsg.NewPtrDeleteRecordsRequest()
	client.Version = 2
	client.Topics = startEpochForward(testWriterEpoch, 0, 0).Topics
	if p := forward(client); p.ErrorCode != kerr.PolicyViolation.Code {
		t.Fatalf("client DeleteRecords: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	unchanged("a client's DeleteRecords")
	// Malformed: the connection closes.
	bad := startEpochForward(testWriterEpoch, 0, 0)
	bad.Topics[0].Partitions[0].UnknownTags.Set(wireext.MirrorTag, []byte{0, 0, 0})
	rc := dialRaw(t, b.addr)
	rc.write(appendRequestFrame(nil, bad, 1, "t"))
	rc.expectClosed()
	unchanged("a malformed value")

	if p := forward(startEpochForward(testWriterEpoch, 0, 0)); p.ErrorCode != 0 || p.LowWatermark != 0 {
		t.Fatalf("forward: %v low %d", kerr.ErrorForCode(p.ErrorCode), p.LowWatermark)
	}
	if off, e := earliestAnswer(t, b); off != 0 || e != 0 {
		t.Fatalf("EARLIEST after the forward: offset %d epoch %d", off, e)
	}
	if e, end := epochEnd(t, b, "m", 0); e != 0 || end != 8 {
		t.Fatalf("OffsetForLeaderEpoch(0) = %d, %d", e, end)
	}
	// Repeating it changes nothing; a forward moving the log start too.
	if p := forward(startEpochForward(testWriterEpoch, 0, 0)); p.ErrorCode != 0 {
		t.Fatalf("repeated forward: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	if p := forward(startEpochForward(testWriterEpoch, 3, 0)); p.ErrorCode != 0 || p.LowWatermark != 3 {
		t.Fatalf("forward to 3: %v low %d", kerr.ErrorForCode(p.ErrorCode), p.LowWatermark)
	}
	b.stop()
	b = startBroker(t, dir, nil)
	if off, e := earliestAnswer(t, b); off != 3 || e != 0 {
		t.Fatalf("EARLIEST after a restart: offset %d epoch %d", off, e)
	}
}
