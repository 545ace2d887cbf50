package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

// tsBatch is a client batch (base offset 0) whose records have the given
// timestamps.
func tsBatch(t *testing.T, base int64, deltas ...int64) []byte {
	t.Helper()
	var recs []kbatch.Record
	for i, d := range deltas {
		recs = append(recs, kbatch.Record{OffsetDelta: int32(i), TimestampDelta: d, Value: []byte("v")})
	}
	return kbatchtest.Encode(t, kbatch.NewBatch(base, recs...))
}

func deleteRecordsReq(topic string, part int32, offset int64) *kmsg.DeleteRecordsRequest {
	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.Version = 2
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = part, offset
	rt.Partitions = append(rt.Partitions, rp)
	dr.Topics = append(dr.Topics, rt)
	return dr
}

func TestListOffsetsAndDeleteRecords(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "lo", 1, nil)
	createTopic(t, b, "compacted", 1, map[string]*string{"cleanup.policy": sp("compact")})
	base := int64(1_800_000_000_000)
	createTopic(t, b, "ts", 1, map[string]*string{"message.timestamp.before.max.ms": sp("9223372036854775807"), "message.timestamp.after.max.ms": sp("9223372036854775807")})
	// Offsets 0,1 (ts base, base+10), 2 (base+5), 3,4 (base+10, base+1).
	for _, set := range [][]byte{tsBatch(t, base, 0, 10), tsBatch(t, base, 5), tsBatch(t, base, 10, 1)} {
		if r := produceOne(t, b, 9, "ts", 0, set); r.ErrorCode != 0 {
			t.Fatalf("produce: %+v", r)
		}
	}
	type want struct {
		off, ts int64
		epoch   int32
		code    int16
	}
	for _, c := range []struct {
		version int16
		ts      int64
		want    want
	}{
		{9, -2, want{0, -1, 0, 0}},
		{9, -1, want{5, -1, 0, 0}},
		{9, -3, want{1, base + 10, 0, 0}}, // first record with the max timestamp
		{6, -3, want{-1, -1, -1, kerr.UnsupportedVersion.Code}},
		{9, -4, want{0, -1, 0, 0}},
		{9, -5, want{-1, -1, -1, 0}},
		{9, base + 3, want{1, base + 10, 0, 0}},
		{9, base + 6, want{1, base + 10, 0, 0}},
		{9, base + 11, want{-1, -1, -1, 0}},
		{1, base, want{0, base, -1, 0}},
	} {
		p := listOffsetsPart(t, b, c.version, "ts", 0, c.ts, 0)
		got := want{p.Offset, p.Timestamp, p.LeaderEpoch, p.ErrorCode}
		if c.version < 4 {
			got.epoch = -1
		}
		if got != c.want {
			t.Errorf("ListOffsets v%d ts %d: got %+v, want %+v", c.version, c.ts, got, c.want)
		}
	}
	if p := listOffsetsPart(t, b, 9, "nope", 0, -1, 0); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %+v", p)
	}

	// DeleteRecords advances the log start offset.
	dr := rawRequest[*kmsg.DeleteRecordsResponse](t, b, deleteRecordsReq("ts", 0, 2)).Topics[0].Partitions[0]
	if dr.ErrorCode != 0 || dr.LowWatermark != 2 {
		t.Fatalf("DeleteRecords: %+v", dr)
	}
	if off := listOffsetT(t, b, "ts", 0, -2); off != 2 {
		t.Fatalf("earliest after DeleteRecords: %d", off)
	}
	if f := fetchAll(t, b, "ts", 1, 0); f.ErrorCode != kerr.OffsetOutOfRange.Code || f.LogStartOffset != -1 {
		t.Fatalf("fetch below the log start: %+v", f)
	}
	if p := listOffsetsPart(t, b, 9, "ts", 0, base, 0); p.Offset != 2 || p.Timestamp != base+5 {
		t.Fatalf("timestamp lookup below the log start: %+v", p)
	}
	for _, c := range []struct {
		topic string
		off   int64
		code  int16
		low   int64
	}{
		{"ts", 9, kerr.OffsetOutOfRange.Code, -1},
		{"ts", -1, 0, 5},
		{"compacted", 0, kerr.PolicyViolation.Code, -1},
		{"nope", 0, kerr.UnknownTopicOrPartition.Code, -1},
	} {
		p := rawRequest[*kmsg.DeleteRecordsResponse](t, b, deleteRecordsReq(c.topic, 0, c.off)).Topics[0].Partitions[0]
		if p.ErrorCode != c.code || p.LowWatermark != c.low {
			t.Errorf("DeleteRecords %s to %d: %+v", c.topic, c.off, p)
		}
	}

	// DescribeLogDirs lists the partitions with their sizes.
	dl := kmsg.NewPtrDescribeLogDirsRequest()
	dl.Version = 4
	ld := rawRequest[*kmsg.DescribeLogDirsResponse](t, b, dl)
	if len(ld.Dirs) != 1 || ld.Dirs[0].ErrorCode != 0 || ld.Dirs[0].TotalBytes <= 0 {
		t.Fatalf("DescribeLogDirs: %+v", ld)
	}
	sizes := map[string]int64{}
	for _, dt := range ld.Dirs[0].Topics {
		for _, p := range dt.Partitions {
			sizes[dt.Topic] += p.Size
		}
	}
	if len(sizes) != 3 || sizes["lo"] != 0 || sizes["ts"] <= 0 {
		t.Fatalf("DescribeLogDirs sizes %v", sizes)
	}
}

func TestFetchSessions(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "s", 2, nil)
	fetch := func(id, epoch int32, parts ...int32) *kmsg.FetchResponse {
		req := kmsg.NewPtrFetchRequest()
		req.Version = 12
		req.ReplicaID = -1
		req.MaxBytes = 1 << 20
		req.SessionID, req.SessionEpoch = id, epoch
		if len(parts) > 0 {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = "s"
			for _, p := range parts {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.PartitionMaxBytes = p, 1<<20
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		return rawRequest[*kmsg.FetchResponse](t, b, req)
	}
	count := func(r *kmsg.FetchResponse) int {
		n := 0
		for _, tp := range r.Topics {
			n += len(tp.Partitions)
		}
		return n
	}
	full := fetch(0, 0, 0, 1)
	if full.ErrorCode != 0 || full.SessionID == 0 || count(full) != 2 {
		t.Fatalf("session creation: err %d id %d partitions %d", full.ErrorCode, full.SessionID, count(full))
	}
	id := full.SessionID
	// Nothing changed: the incremental response lists no partition.
	if r := fetch(id, 1); r.ErrorCode != 0 || r.SessionID != id || count(r) != 0 {
		t.Fatalf("empty incremental fetch: err %d partitions %d", r.ErrorCode, count(r))
	}
	if r := produceOne(t, b, 9, "s", 1, encodeBatch(t, 0, -1, -1, []byte("x"))); r.ErrorCode != 0 {
		t.Fatal(r.ErrorCode)
	}
	r := fetch(id, 2)
	if count(r) != 1 || r.Topics[0].Partitions[0].Partition != 1 || len(r.Topics[0].Partitions[0].RecordBatches) == 0 {
		t.Fatalf("incremental fetch after an append: %+v", r.Topics)
	}
	if r := fetch(id, 2); r.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("reused epoch: %d", r.ErrorCode)
	}
	if r := fetch(id+100, 1); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown session: %d", r.ErrorCode)
	}
	// Closing the session and fetching sessionless.
	if r := fetch(id, -1, 0); r.ErrorCode != 0 || r.SessionID != 0 || count(r) != 1 {
		t.Fatalf("close session: %+v", r)
	}
	if r := fetch(id, 3); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("closed session still known: %d", r.ErrorCode)
	}

	// kgo consumes across several partitions with sessions as records
	// keep arriving.
	cl := b.client(kgo.DefaultProduceTopic("s"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < 20; i++ {
		if err := cl.ProduceSync(ctxT(t), &kgo.Record{Partition: int32(i % 2), Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if got := consumeN(t, b, "s", 2, 21); len(got) != 21 {
		t.Fatalf("consumed %d", len(got))
	}
}

func TestRestartKeepsDataEpochsAndConfigs(t *testing.T) {
	dir := t.TempDir()
	flushAlways := func(c *Config) { c.Flush = "always" }
	b := startBroker(t, dir, flushAlways)
	createTopic(t, b, "keep", 2, map[string]*string{"retention.ms": sp("123456789")})
	createTopic(t, b, "mk", 1, map[string]*string{"mirror.mode": sp("push")})
	cl := b.client(kgo.DefaultProduceTopic("keep"), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < 100; i++ {
		if err := cl.ProduceSync(ctxT(t), &kgo.Record{Partition: int32(i % 2), Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if r := mirrorOne(t, b, "mk", data(10, 7, 2).encode(t), 0, -1); r.ErrorCode != 0 {
		t.Fatalf("mirror: %+v", r)
	}
	b.stop()

	b = startBroker(t, dir, flushAlways)
	if e := b.srv.Topic("mk").Partition(0).LeaderEpoch(); e != 17 {
		t.Fatalf("leader epoch after restart: %d, want 17", e)
	}
	if hw := listOffsetT(t, b, "mk", 0, -1); hw != 12 {
		t.Fatalf("mirror log end after restart: %d", hw)
	}
	for p := int32(0); p < 2; p++ {
		if hw := listOffsetT(t, b, "keep", p, -1); hw != 50 {
			t.Fatalf("partition %d log end after restart: %d", p, hw)
		}
	}
	got := consumeN(t, b, "keep", 2, 100)
	seen := map[int32]int64{}
	for _, r := range got {
		if r.Offset != seen[r.Partition] {
			t.Fatalf("partition %d: offset %d, want %d", r.Partition, r.Offset, seen[r.Partition])
		}
		seen[r.Partition]++
	}
	rc, err := b.admin().DescribeTopicConfigs(ctxT(t), "keep")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range rc[0].Configs {
		if c.Key == "retention.ms" && c.Value != nil && *c.Value == "123456789" {
			found = true
		}
	}
	if !found {
		t.Fatal("retention.ms override lost across the restart")
	}
	// New appends continue after the recovered log end.
	if r := produceOne(t, b, 9, "keep", 0, encodeBatch(t, 0, -1, -1, []byte("after"))); r.ErrorCode != 0 || r.BaseOffset != 50 {
		t.Fatalf("append after restart: %+v", r)
	}
}

// Partitions added later get logs; a deleted and re-created topic starts
// empty; produces to a deleted topic fail without touching the new one.
func TestTopicLifecycleWithData(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "life", 1, nil)
	if r := produceOne(t, b, 9, "life", 0, encodeBatch(t, 0, -1, -1, []byte("a"), []byte("b"))); r.ErrorCode != 0 {
		t.Fatal(r.ErrorCode)
	}
	adm := b.admin()
	if _, err := adm.CreatePartitions(ctxT(t), 3, "life"); err != nil {
		t.Fatal(err)
	}
	if r := produceOne(t, b, 9, "life", 2, encodeBatch(t, 0, -1, -1, []byte("c"))); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("produce to an added partition: %+v", r)
	}
	old := b.srv.Topic("life").Partition(0)
	if _, err := adm.DeleteTopics(ctxT(t), "life"); err != nil {
		t.Fatal(err)
	}
	if _, err := partitionLog(old); err == nil {
		t.Fatal("deleted partition still has a usable log")
	}
	createTopic(t, b, "life", 1, nil)
	if hw := listOffsetT(t, b, "life", 0, -1); hw != 0 {
		t.Fatalf("re-created topic log end %d, want 0", hw)
	}
	if r := produceOne(t, b, 9, "life", 0, encodeBatch(t, 0, -1, -1, []byte("new"))); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("produce to the re-created topic: %+v", r)
	}
}
