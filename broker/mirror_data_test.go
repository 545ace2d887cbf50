package broker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// srcBatch is a batch as a source cluster stored it.
type srcBatch struct {
	base        int64
	epoch       int32
	records     int
	pid         int64
	txn         bool
	control     int16 // -1: data batch; 0 ABORT, 1 COMMIT
	timestampMs int64
}

func (sb srcBatch) encode(t *testing.T) []byte {
	t.Helper()
	var recs []kbatch.Record
	if sb.control >= 0 {
		key := binary.BigEndian.AppendUint16(nil, 0)
		key = binary.BigEndian.AppendUint16(key, uint16(sb.control))
		val := binary.BigEndian.AppendUint16(nil, 0)
		val = binary.BigEndian.AppendUint32(val, 7)
		recs = append(recs, kbatch.Record{Key: key, Value: val})
	} else {
		for i := 0; i < sb.records; i++ {
			recs = append(recs, kbatch.Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Key: []byte{byte(i)}, Value: []byte("v")})
		}
	}
	bt := kbatch.NewBatch(sb.timestampMs, recs...)
	bt.BaseOffset, bt.LeaderEpoch = sb.base, sb.epoch
	if sb.pid >= 0 {
		bt.ProducerID, bt.ProducerEpoch, bt.BaseSequence = sb.pid, 0, 0
		if sb.control >= 0 {
			bt.BaseSequence = -1
		}
	}
	if sb.txn {
		bt.Attributes |= kbatch.TransactionalBit
	}
	if sb.control >= 0 {
		bt.Attributes |= kbatch.ControlBit | kbatch.TransactionalBit
	}
	return kbatchtest.Encode(t, bt)
}

func data(base int64, epoch int32, n int) srcBatch {
	return srcBatch{base: base, epoch: epoch, records: n, pid: -1, control: -1, timestampMs: 1_700_000_000_000 + base}
}

// mirrorProduce builds a mirror produce (docs/protocol.md) of one
// partition by the test writer (registerTestWriter: createTopic registers
// it on mirror topics).
func mirrorProduce(version int16, topic string, part int32, set []byte, expected int64, currentEpoch int32) *kmsg.ProduceRequest {
	req := produceRequest(version, topic, part, set)
	req.UnknownTags.Set(wireext.MirrorTag, (&wireext.MirrorProduce{WriterEpoch: testWriterEpoch}).AppendTo(nil))
	pv := wireext.MirrorPartition{ExpectedLogEndOffset: expected, CurrentLeaderEpoch: currentEpoch}
	req.Topics[0].Partitions[0].UnknownTags.Set(wireext.MirrorTag, pv.AppendTo(nil))
	return req
}

func mirrorOne(t *testing.T, b *testBroker, topic string, set []byte, expected int64, epoch int32) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	return rawRequest[*kmsg.ProduceResponse](t, b, mirrorProduce(11, topic, 0, set, expected, epoch)).Topics[0].Partitions[0]
}

func concat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

func fetchAll(t *testing.T, b *testBroker, topic string, from int64, isolation int8) kmsg.FetchResponseTopicPartition {
	t.Helper()
	f := fetchReq(12, topic, 0, from)
	f.IsolationLevel = isolation
	return rawRequest[*kmsg.FetchResponse](t, b, f).Topics[0].Partitions[0]
}

func TestMirrorProduce(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push")})
	createTopic(t, b, "plain", 1, nil)

	b1, b2, b3 := data(0, 2, 3).encode(t), data(5, 2, 1).encode(t), data(6, 4, 1).encode(t)
	// Batches keep their offsets (gap 3-4 preserved) and epochs.
	if r := mirrorOne(t, b, "m", concat(b1, b2), 0, -1); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("first mirror produce: %+v", r)
	}
	// The partition epoch was raised ahead of the stored epoch 2.
	if e := b.srv.Topic("m").Partition(0).LeaderEpoch(); e != 12 {
		t.Fatalf("leader epoch after mirroring epoch 2: %d, want 12", e)
	}
	if r := mirrorOne(t, b, "m", b3, 6, 12); r.ErrorCode != 0 || r.BaseOffset != 6 {
		t.Fatalf("second mirror produce: %+v", r)
	}
	got := fetchAll(t, b, "m", 0, 0)
	if !bytes.Equal(got.RecordBatches, concat(b1, b2, b3)) || got.HighWatermark != 7 {
		t.Fatalf("fetch returned %d bytes, hw %d; want the pushed batches byte for byte", len(got.RecordBatches), got.HighWatermark)
	}
	// Offset 3 is in the gap: the fetch starts at the next batch.
	if g := fetchAll(t, b, "m", 3, 0); !bytes.Equal(g.RecordBatches, concat(b2, b3)) {
		t.Fatalf("fetch from the gap returned %d bytes", len(g.RecordBatches))
	}

	// An identical retry is acknowledged with its original offsets.
	if r := mirrorOne(t, b, "m", concat(b1, b2), 0, 12); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("identical retry: %+v", r)
	}
	// Expected log end mismatch.
	r := mirrorOne(t, b, "m", data(7, 4, 1).encode(t), 5, 12)
	if r.ErrorCode != kerr.OffsetOutOfRange.Code || r.ErrorMessage == nil || *r.ErrorMessage != "mirror: expected log end 5, log end is 7" {
		t.Fatalf("expected-log-end mismatch: %+v", r)
	}
	// A different batch at a stored offset.
	other := data(0, 2, 2).encode(t)
	if r := mirrorOne(t, b, "m", other, 7, 12); r.ErrorCode != kerr.InvalidRecord.Code {
		t.Fatalf("different batch below the log end: %+v", r)
	}
	// Leader-epoch fencing.
	if r := mirrorOne(t, b, "m", data(7, 4, 1).encode(t), 7, 5); r.ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("stale epoch: %+v", r)
	}
	if r := mirrorOne(t, b, "m", data(7, 4, 1).encode(t), 7, 40); r.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("future epoch: %+v", r)
	}
	// Missing ExpectedLogEndOffset.
	if r := mirrorOne(t, b, "m", data(7, 4, 1).encode(t), -1, 12); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("no expected log end: %+v", r)
	}
	// A mirror produce to an ordinary topic.
	if r := rawRequest[*kmsg.ProduceResponse](t, b, mirrorProduce(11, "plain", 0, data(0, 0, 1).encode(t), 0, -1)).Topics[0].Partitions[0]; r.ErrorCode != kerr.PolicyViolation.Code {
		t.Fatalf("mirror produce to an ordinary topic: %+v", r)
	}
	// An ordinary produce to the mirror topic, raw and from kgo: refused,
	// non-retriable (kgo fails at once), nothing appended.
	if r := produceOne(t, b, 9, "m", 0, encodeBatch(t, 0, -1, -1, []byte("x"))); r.ErrorCode != kerr.PolicyViolation.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "mirror") {
		t.Fatalf("ordinary produce to a mirror topic: %+v", r)
	}
	cl := b.client(kgo.DefaultProduceTopic("m"), kgo.RecordRetries(5))
	start := time.Now()
	if err := cl.ProduceSync(ctxT(t), &kgo.Record{Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("kgo produce to a mirror topic: %v", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("kgo retried the refused produce")
	}
	if hw := listOffsetT(t, b, "m", 0, -1); hw != 7 {
		t.Fatalf("log end %d after refused produces, want 7", hw)
	}

	// OffsetForLeaderEpoch answers from the mirrored batches' epochs.
	for _, c := range []struct {
		ask, epoch int32
		end        int64
	}{{2, 2, 6}, {3, 2, 6}, {4, 4, 7}, {11, 4, 7}, {12, 12, 7}, {13, -1, -1}} {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.Version = 4
		req.ReplicaID = -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "m"
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.LeaderEpoch = 12, c.ask
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		p := rawRequest[*kmsg.OffsetForLeaderEpochResponse](t, b, req).Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.LeaderEpoch != c.epoch || p.EndOffset != c.end {
			t.Fatalf("OffsetForLeaderEpoch(%d): %+v, want epoch %d end %d", c.ask, p, c.epoch, c.end)
		}
	}

	// DeleteRecords is refused on a mirror topic.
	dr := deleteRecordsReq("m", 0, 5)
	if p := rawRequest[*kmsg.DeleteRecordsResponse](t, b, dr).Topics[0].Partitions[0]; p.ErrorCode != kerr.PolicyViolation.Code {
		t.Fatalf("DeleteRecords on a mirror topic: %+v", p)
	}
}

func TestReadCommittedAbortedTransactions(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "tx", 1, map[string]*string{"mirror.mode": sp("push")})
	batches := []srcBatch{
		data(0, 0, 2),
		{base: 2, epoch: 0, records: 2, pid: 100, txn: true, control: -1, timestampMs: 1_700_000_000_002},
		{base: 4, epoch: 0, pid: 100, control: 0, timestampMs: 1_700_000_000_004}, // abort
		{base: 5, epoch: 0, records: 1, pid: 101, txn: true, control: -1, timestampMs: 1_700_000_000_005},
		{base: 6, epoch: 0, pid: 101, control: 1, timestampMs: 1_700_000_000_006},                         // commit
		{base: 7, epoch: 0, records: 1, pid: 102, txn: true, control: -1, timestampMs: 1_700_000_000_007}, // open
	}
	var set [][]byte
	for _, sb := range batches {
		set = append(set, sb.encode(t))
	}
	if r := mirrorOne(t, b, "tx", concat(set...), 0, -1); r.ErrorCode != 0 {
		t.Fatalf("mirror produce: %+v", r)
	}
	rc := fetchAll(t, b, "tx", 0, 1)
	if rc.ErrorCode != 0 || rc.HighWatermark != 8 || rc.LastStableOffset != 7 {
		t.Fatalf("read_committed: err %d hw %d lso %d", rc.ErrorCode, rc.HighWatermark, rc.LastStableOffset)
	}
	if !bytes.Equal(rc.RecordBatches, concat(set[:5]...)) {
		t.Fatalf("read_committed returned %d bytes; want the batches below the LSO", len(rc.RecordBatches))
	}
	if len(rc.AbortedTransactions) != 1 || rc.AbortedTransactions[0].ProducerID != 100 || rc.AbortedTransactions[0].FirstOffset != 2 {
		t.Fatalf("aborted transactions %+v", rc.AbortedTransactions)
	}
	ru := fetchAll(t, b, "tx", 0, 0)
	if !bytes.Equal(ru.RecordBatches, concat(set...)) {
		t.Fatalf("read_uncommitted returned %d bytes", len(ru.RecordBatches))
	}
	if p := listOffsetsPart(t, b, 9, "tx", 0, -1, 1); p.Offset != 7 {
		t.Fatalf("latest read_committed %d, want the LSO 7", p.Offset)
	}
	if p := listOffsetsPart(t, b, 9, "tx", 0, -1, 0); p.Offset != 8 {
		t.Fatalf("latest read_uncommitted %d, want 8", p.Offset)
	}
	// kgo's read_committed consumer sees the committed records only:
	// 0,1 (plain) and 5 (committed); 2,3 were aborted, 7 is open.
	recs := consumeN(t, b, "tx", 1, 3, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	var offs []int64
	for _, r := range recs {
		offs = append(offs, r.Offset)
	}
	if len(offs) != 3 || offs[0] != 0 || offs[1] != 1 || offs[2] != 5 {
		t.Fatalf("read_committed consumer offsets %v, want [0 1 5]", offs)
	}
}

// rawApiVersions sends one ApiVersions request of version v on a new raw
// connection and returns the decoded answer.
func rawApiVersions(t *testing.T, b *testBroker, v int16) *kmsg.ApiVersionsResponse {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = v
	req.ClientSoftwareName, req.ClientSoftwareVersion = "t", "1"
	rc := dialRaw(t, b.addr)
	rc.write(appendRequestFrame(nil, req, 1, "t"))
	_, body, err := rc.read()
	if err != nil {
		t.Fatal(err)
	}
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestApiVersionsAdvertisesMirrorProduce(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	for _, v := range []int16{2, 3, 4} {
		resp := rawApiVersions(t, b, v)
		found := false
		for _, f := range resp.SupportedFeatures {
			found = found || f.Name == "verbatim.mirror.produce" && f.MinVersion == 2 && f.MaxVersion == 3
		}
		if found != (v >= 3) {
			t.Fatalf("v%d: verbatim.mirror.produce listed = %v", v, found)
		}
		for _, k := range resp.ApiKeys {
			if k.ApiKey == 0 && (k.MinVersion != 0 || k.MaxVersion != 13) || k.ApiKey == 1 && (k.MinVersion != 4 || k.MaxVersion != 17) {
				t.Fatalf("v%d: %+v", v, k)
			}
		}
	}
}

// The mirror topic's default policies judge mirror produces: an epoch
// rewind is refused (epoch-monotonic, invariant I3 in docs/mirroring.md) and nothing is appended.
func TestMirrorProduceJudgedByPolicies(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "mp", 1, map[string]*string{"mirror.mode": sp("push")})
	if r := mirrorOne(t, b, "mp", data(0, 4, 2).encode(t), 0, -1); r.ErrorCode != 0 {
		t.Fatalf("first append: %+v", r)
	}
	r := mirrorOne(t, b, "mp", data(2, 1, 1).encode(t), 2, 14)
	if r.ErrorCode != kerr.PolicyViolation.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "epoch-monotonic") {
		t.Fatalf("epoch rewind: %+v", r)
	}
	if hw := listOffsetT(t, b, "mp", 0, -1); hw != 2 {
		t.Fatalf("log end %d after a refused rewind, want 2", hw)
	}
	// An identical retry of the stored batch is not judged again.
	if r := mirrorOne(t, b, "mp", data(0, 4, 2).encode(t), 0, 14); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("identical retry: %+v", r)
	}
}
