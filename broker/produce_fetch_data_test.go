package broker

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

func createTopic(t *testing.T, b *testBroker, name string, parts int32, configs map[string]*string) kadm.CreateTopicResponse {
	t.Helper()
	resp, err := b.admin().CreateTopic(ctxT(t), parts, 1, configs, name)
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic %s: %v %v", name, err, resp.Err)
	}
	if m := configs["mirror.mode"]; m != nil && *m == "push" {
		registerTestWriter(t, b, name, parts)
	}
	return resp
}

// consumeN reads n records from topic partition 0 from offset.
func consumeN(t *testing.T, b *testBroker, topic string, parts int32, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	offs := map[int32]kgo.Offset{}
	for i := int32(0); i < parts; i++ {
		offs[i] = kgo.NewOffset().AtStart()
	}
	cl := b.client(append([]kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}), kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
	var out []*kgo.Record
	ctx := ctxT(t)
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records: %v", len(out), n, ctx.Err())
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

func TestProduceConsumeEveryCodec(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	codecs := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			topic := "codec-" + name
			createTopic(t, b, topic, 1, nil)
			cl := b.client(kgo.ProducerBatchCompression(codec), kgo.DefaultProduceTopic(topic))
			var want []*kgo.Record
			for i := 0; i < 50; i++ {
				want = append(want, &kgo.Record{Key: []byte(fmt.Sprint("k", i)), Value: bytes.Repeat([]byte{byte(i)}, 100+i),
					Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(name)}}})
			}
			if err := cl.ProduceSync(ctxT(t), want...).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			got := consumeN(t, b, topic, 1, len(want))
			for i, r := range got {
				if r.Offset != int64(i) || !bytes.Equal(r.Key, want[i].Key) || !bytes.Equal(r.Value, want[i].Value) ||
					len(r.Headers) != 1 || string(r.Headers[0].Value) != name {
					t.Fatalf("record %d: got offset %d key %q headers %v", i, r.Offset, r.Key, r.Headers)
				}
			}
		})
	}
}

// rawRoundTrip sends req at its own version on a new raw connection and
// decodes the response.
func rawRoundTrip(addr string, req kmsg.Request) (kmsg.Response, error) {
	return rawRoundTripFrom(addr, "", req)
}

// rawRoundTripFrom is rawRoundTrip from the local IP from ("": any).
func rawRoundTripFrom(addr, from string, req kmsg.Request) (kmsg.Response, error) {
	d := net.Dialer{}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := nc.Write(appendRequestFrame(nil, req, 7, "raw")); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		return nil, err
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(nc, frame); err != nil {
		return nil, err
	}
	body := frame[4:]
	if req.IsFlexible() {
		body = body[1:] // empty response header tags
	}
	resp := req.ResponseKind()
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decoding %T: %w", resp, err)
	}
	return resp, nil
}

func rawRequest[R kmsg.Response](t *testing.T, b *testBroker, req kmsg.Request) R {
	t.Helper()
	resp, err := rawRoundTrip(b.addr, req)
	if err != nil {
		t.Fatalf("%T v%d: %v", req, req.GetVersion(), err)
	}
	return resp.(R)
}

func TestProduceAcksZeroAndInvalidAcks(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "acks", 1, nil)
	cl := b.client(kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic("acks"))
	for i := 0; i < 10; i++ {
		if err := cl.ProduceSync(ctxT(t), &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	got := consumeN(t, b, "acks", 1, 10)
	if len(got) != 10 || got[9].Offset != 9 {
		t.Fatalf("got %d records", len(got))
	}
	// acks=2 is refused per partition.
	req := produceRequest(7, "acks", 0, encodeBatch(t, 0, -1, -1, []byte("x")))
	req.Acks = 2
	resp := rawRequest[*kmsg.ProduceResponse](t, b, req)
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != kerr.InvalidRequiredAcks.Code {
		t.Fatalf("acks=2: error %d", c)
	}
}

func TestFetchLongPollWakesOnAppend(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "poll", 1, nil)
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.MaxWaitMillis = 20000
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "poll"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	done := make(chan *kmsg.FetchResponse, 1)
	errc := make(chan error, 1)
	go func() {
		r, err := rawRoundTrip(b.addr, req)
		if err != nil {
			errc <- err
			return
		}
		done <- r.(*kmsg.FetchResponse)
	}()
	select {
	case r := <-done:
		t.Fatalf("fetch answered before any append: %+v", r)
	case err := <-errc:
		t.Fatal(err)
	case <-time.After(300 * time.Millisecond):
	}
	pc := b.client(kgo.DefaultProduceTopic("poll"))
	if err := pc.ProduceSync(ctxT(t), &kgo.Record{Value: []byte("wake")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		p := r.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.HighWatermark != 1 || len(p.RecordBatches) == 0 {
			t.Fatalf("woken fetch: err %d hw %d %d bytes", p.ErrorCode, p.HighWatermark, len(p.RecordBatches))
		}
	case err := <-errc:
		t.Fatal(err)
	case <-time.After(15 * time.Second):
		t.Fatal("fetch not woken by the append")
	}
}

func TestProduceFetchErrors(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "errs", 2, nil)
	// Unknown topic and partition, per partition.
	req := produceRequest(9, "nope", 0, encodeBatch(t, 0, -1, -1, []byte("a")))
	addProducePartition(req, "errs", 7, encodeBatch(t, 0, -1, -1, []byte("b")))
	addProducePartition(req, "errs", 1, encodeBatch(t, 0, -1, -1, []byte("c")))
	resp := rawRequest[*kmsg.ProduceResponse](t, b, req)
	codes := map[string]int16{}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			codes[fmt.Sprint(tp.Topic, p.Partition)] = p.ErrorCode
		}
	}
	if codes["nope0"] != kerr.UnknownTopicOrPartition.Code || codes["errs7"] != kerr.UnknownTopicOrPartition.Code || codes["errs1"] != 0 {
		t.Fatalf("codes %v", codes)
	}

	// Bad CRC: CORRUPT_MESSAGE, nothing appended.
	bad := encodeBatch(t, 0, -1, -1, []byte("crc"))
	bad[len(bad)-1] ^= 0xff
	if c := produceOne(t, b, 9, "errs", 0, bad).ErrorCode; c != kerr.CorruptMessage.Code {
		t.Fatalf("bad crc: %d", c)
	}
	// Non-zero base offset: INVALID_RECORD.
	nz := encodeBatch(t, 5, -1, -1, []byte("nz"))
	pr := produceOne(t, b, 9, "errs", 0, nz)
	if pr.ErrorCode != kerr.InvalidRecord.Code || pr.ErrorMessage == nil {
		t.Fatalf("non-zero base offset: %d %v", pr.ErrorCode, pr.ErrorMessage)
	}
	if hw := listOffsetT(t, b, "errs", 0, -1); hw != 0 {
		t.Fatalf("log end after refused batches: %d", hw)
	}

	// Fetch: out of range offset, unknown topic id (v13), fenced epoch.
	f := fetchReq(12, "errs", 0, 5)
	fr := rawRequest[*kmsg.FetchResponse](t, b, f)
	if c := fr.Topics[0].Partitions[0].ErrorCode; c != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch out of range: %d", c)
	}
	f = fetchReq(13, "", 0, 0)
	f.Topics[0].TopicID = [16]byte{1, 2, 3}
	fr = rawRequest[*kmsg.FetchResponse](t, b, f)
	if c := fr.Topics[0].Partitions[0].ErrorCode; c != kerr.UnknownTopicID.Code {
		t.Fatalf("fetch unknown topic id: %d", c)
	}
	f = fetchReq(12, "errs", 0, 0)
	f.Topics[0].Partitions[0].CurrentLeaderEpoch = 3
	fr = rawRequest[*kmsg.FetchResponse](t, b, f)
	if c := fr.Topics[0].Partitions[0].ErrorCode; c != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("fetch future epoch: %d", c)
	}
}

func TestIdempotentProducerDuplicatesAndSequenceErrors(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "idem", 1, nil)
	cl := b.client()
	ctx := ctxT(t)
	ipr, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl)
	if err != nil || ipr.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %d", err, ipr.ErrorCode)
	}
	pid := ipr.ProducerID
	first := produceOne(t, b, 9, "idem", 0, encodeBatch(t, 0, pid, 0, []byte("a"), []byte("b")))
	second := produceOne(t, b, 9, "idem", 0, encodeBatch(t, 0, pid, 2, []byte("c")))
	if first.ErrorCode != 0 || second.ErrorCode != 0 || first.BaseOffset != 0 || second.BaseOffset != 2 {
		t.Fatalf("appends: %+v %+v", first, second)
	}
	// A retry of the first batch is acknowledged with its original offset.
	dup := produceOne(t, b, 9, "idem", 0, encodeBatch(t, 0, pid, 0, []byte("a"), []byte("b")))
	if dup.ErrorCode != 0 || dup.BaseOffset != 0 {
		t.Fatalf("duplicate: %+v", dup)
	}
	// A gap in sequences is OUT_OF_ORDER_SEQUENCE_NUMBER.
	gap := produceOne(t, b, 9, "idem", 0, encodeBatch(t, 0, pid, 7, []byte("x")))
	if gap.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("sequence gap: %+v", gap)
	}
	if hw := listOffsetT(t, b, "idem", 0, -1); hw != 3 {
		t.Fatalf("log end %d, want 3 (nothing duplicated)", hw)
	}
	// The kgo idempotent producer works end to end.
	pc := b.client(kgo.DefaultProduceTopic("idem"))
	if err := pc.ProduceSync(ctx, &kgo.Record{Value: []byte("kgo")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// librdkafka refuses a null record set ("invalid MessageSetSize -1"):
// an empty fetch must carry an empty one, as Kafka sends.
func TestFetchEmptyRecordSetIsNotNull(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "empty", 1, nil)
	for _, v := range []int16{4, 11, 12, 17} {
		f := fetchReq(v, "empty", 0, 0)
		if v >= 13 {
			f.Topics[0].TopicID = b.srv.Topic("empty").ID
		}
		p := rawRequest[*kmsg.FetchResponse](t, b, f).Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.RecordBatches == nil || p.HighWatermark != 0 {
			t.Fatalf("v%d: err %d, records nil %v, hw %d", v, p.ErrorCode, p.RecordBatches == nil, p.HighWatermark)
		}
	}
}

// Normal-mode rules from the topic config, answered per partition as
// Kafka answers them.
func TestProduceTopicRules(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "small", 1, map[string]*string{"max.message.bytes": sp("200")})
	createTopic(t, b, "lat", 1, map[string]*string{"message.timestamp.type": sp("LogAppendTime")})
	createTopic(t, b, "cmp", 1, map[string]*string{"cleanup.policy": sp("compact")})
	createTopic(t, b, "recent", 1, map[string]*string{"message.timestamp.after.max.ms": sp("1000")})

	if r := produceOne(t, b, 9, "small", 0, encodeBatch(t, 0, -1, -1, make([]byte, 500))); r.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("max.message.bytes: %+v", r)
	}
	r := produceOne(t, b, 9, "lat", 0, encodeBatch(t, 0, -1, -1, []byte("x")))
	if r.ErrorCode != 0 || r.LogAppendTime <= 0 {
		t.Fatalf("LogAppendTime topic: %+v", r)
	}
	f := fetchAll(t, b, "lat", 0, 0)
	if len(f.RecordBatches) < 61 || f.RecordBatches[22]&0x08 == 0 {
		t.Fatal("stored batch does not carry the LogAppendTime attribute")
	}
	// A null key on a compacted topic: INVALID_RECORD with the record's
	// index in the per-record errors.
	nokey := kbatchtest.Encode(t, kbatch.NewBatch(time.Now().UnixMilli(), kbatch.Record{Key: []byte("k"), Value: []byte("v")}, kbatch.Record{OffsetDelta: 1, Value: []byte("v")}))
	r = produceOne(t, b, 9, "cmp", 0, nokey)
	if r.ErrorCode != kerr.InvalidRecord.Code || len(r.ErrorRecords) != 1 || r.ErrorRecords[0].RelativeOffset != 1 {
		t.Fatalf("compacted topic without key: %+v", r)
	}
	// A timestamp too far in the future.
	future := kbatchtest.Encode(t, kbatch.NewBatch(time.Now().UnixMilli()+3_600_000, kbatch.Record{Value: []byte("v")}))
	if r := produceOne(t, b, 9, "recent", 0, future); r.ErrorCode != kerr.InvalidTimestamp.Code {
		t.Fatalf("future timestamp: %+v", r)
	}
	// Clients may not write control batches.
	ctl := srcBatch{base: 0, epoch: -1, pid: 5, control: 1, timestampMs: time.Now().UnixMilli()}.encode(t)
	if r := produceOne(t, b, 9, "recent", 0, ctl); r.ErrorCode != kerr.InvalidRecord.Code {
		t.Fatalf("client control batch: %+v", r)
	}
	// Produce v3 (the oldest served) still works; v2 closes the connection.
	if r := produceOne(t, b, 3, "lat", 0, encodeBatch(t, 0, -1, -1, []byte("v3"))); r.ErrorCode != 0 || r.BaseOffset != 1 {
		t.Fatalf("produce v3: %+v", r)
	}
	if _, err := rawRoundTrip(b.addr, produceRequest(2, "lat", 0, encodeBatch(t, 0, -1, -1, []byte("v2")))); err == nil {
		t.Fatal("produce v2 was answered")
	}
}

// Under --flush always consumers read up to the durable offset, and a
// long poll is woken once an acks=1 append becomes durable.
func TestFlushAlwaysFetchSeesDurableData(t *testing.T) {
	b := startBroker(t, t.TempDir(), func(c *Config) { c.Flush = "always" })
	createTopic(t, b, "dur", 1, nil)
	req := fetchReq(12, "dur", 0, 0)
	req.MaxWaitMillis, req.MinBytes = 25000, 1
	done := make(chan *kmsg.FetchResponse, 1)
	errc := make(chan error, 1)
	go func() {
		r, err := rawRoundTrip(b.addr, req)
		if err != nil {
			errc <- err
			return
		}
		done <- r.(*kmsg.FetchResponse)
	}()
	time.Sleep(200 * time.Millisecond) // let the fetch start waiting
	pr := produceRequest(9, "dur", 0, encodeBatch(t, 0, -1, -1, []byte("x")))
	pr.Acks = 1
	if r := rawRequest[*kmsg.ProduceResponse](t, b, pr).Topics[0].Partitions[0]; r.ErrorCode != 0 {
		t.Fatalf("produce: %+v", r)
	}
	select {
	case r := <-done:
		p := r.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.HighWatermark != 1 || len(p.RecordBatches) == 0 {
			t.Fatalf("fetch: err %d hw %d %d bytes", p.ErrorCode, p.HighWatermark, len(p.RecordBatches))
		}
		l, _ := partitionLog(b.srv.Topic("dur").Partition(0))
		if l.DurableOffset() < 1 {
			t.Fatal("a record was served before it was durable")
		}
	case err := <-errc:
		t.Fatalf("fetch was not woken by the durable append: %v", err)
	}
}

// fetch.max.bytes caps a response whatever MaxBytes the request asks for,
// over all partitions (the first batch still whole, KIP-74), as Kafka's
// ReplicaManager does with min(request max bytes, fetch.max.bytes).
func TestFetchMaxBytesCapsTheRequest(t *testing.T) {
	b := startBroker(t, t.TempDir(), func(c *Config) { c.FetchMaxBytes = 4096 })
	createTopic(t, b, "capped", 2, nil)
	batch := encodeBatch(t, 0, -1, -1, make([]byte, 3000))
	for range 3 {
		for part := int32(0); part < 2; part++ {
			if r := produceOne(t, b, 9, "capped", part, batch); r.ErrorCode != 0 {
				t.Fatalf("produce: %+v", r)
			}
		}
	}
	f := fetchReq(11, "capped", 0, 0)
	f.MaxBytes = 64 << 20
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.PartitionMaxBytes = 1, 1<<20
	f.Topics[0].Partitions = append(f.Topics[0].Partitions, rp)
	resp := rawRequest[*kmsg.FetchResponse](t, b, f)
	total := 0
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("partition %d: error %d", p.Partition, p.ErrorCode)
		}
		total += len(p.RecordBatches)
	}
	if first := len(resp.Topics[0].Partitions[0].RecordBatches); first != len(batch) {
		t.Fatalf("first partition carries %d bytes, want the first batch whole (%d)", first, len(batch))
	}
	if total > 4096 {
		t.Fatalf("response carries %d record bytes over fetch.max.bytes 4096 (request asked for 64 MiB)", total)
	}
	// Without the cap the same request returns every batch of both.
	b2 := startBroker(t, t.TempDir(), nil)
	createTopic(t, b2, "capped", 2, nil)
	for range 3 {
		for part := int32(0); part < 2; part++ {
			produceOne(t, b2, 9, "capped", part, batch)
		}
	}
	total = 0
	for _, p := range rawRequest[*kmsg.FetchResponse](t, b2, f).Topics[0].Partitions {
		total += len(p.RecordBatches)
	}
	if total != 6*len(batch) {
		t.Fatalf("uncapped fetch returned %d bytes, want %d", total, 6*len(batch))
	}
}
