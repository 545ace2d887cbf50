package mirror

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/internal/testkit"
)

func sameLogs(t *testing.T, src, dst, topic string, parts int32) {
	t.Helper()
	for p := int32(0); p < parts; p++ {
		s, d := rawLog(t, src, topic, p), rawLog(t, dst, topic, p)
		if len(s) == 0 || !bytes.Equal(s, d) {
			t.Fatalf("%s/%d: source %d bytes, destination %d bytes, equal %v", topic, p, len(s), len(d), bytes.Equal(s, d))
		}
	}
}

func TestPushPlain(t *testing.T) {
	src := testkit.StartSource(t, kfake.SeedTopics(2, "t"))
	sa := src.ListenAddrs()[0]
	dst := testkit.StartDest(t, t.TempDir())
	produceN(t, testkit.Client(t, sa, kgo.ProducerBatchCompression(kgo.ZstdCompression())), "t", 500, true)
	stats, err := Push(testkit.Ctx(t), Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}, CreateTopics: true})
	if err != nil {
		t.Fatalf("push: %v (exit %d)", err, ExitCode(err))
	}
	var total int64
	for _, s := range stats {
		if s.End != s.Target || s.Start != 0 {
			t.Fatalf("stats %+v", s)
		}
		total += s.End
	}
	if total != 500 {
		t.Fatalf("copied %d offsets, want 500", total)
	}
	sameLogs(t, sa, dst.Addr, "t", 2)
	// The destination topic is a mirror with the source's cluster id.
	cfg := describeConfigs(t, dst.Addr, "t")
	if cfg["mirror.mode"] != "push" || cfg["mirror.source.cluster.id"] == "" {
		t.Fatalf("destination configs %v", cfg)
	}
	// A second push has nothing to do and changes nothing.
	stats, err = Push(testkit.Ctx(t), Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stats {
		if s.Batches != 0 || s.Start != s.Target {
			t.Fatalf("second push copied: %+v", s)
		}
	}
	sameLogs(t, sa, dst.Addr, "t", 2)
}

func describeConfigs(t *testing.T, addr, topic string) map[string]string {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	req.Resources = append(req.Resources, rr)
	resp, err := testkit.Client(t, addr).Request(testkit.Ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range resp.(*kmsg.DescribeConfigsResponse).Resources[0].Configs {
		if c.Value != nil {
			out[c.Name] = *c.Value
		}
	}
	return out
}

// TestPushResumeAndEpochs: a push interrupted part way (context cancelled,
// as a killed process), more data at new leader epochs, then a push that
// resumes from the destination's log end: the logs are identical.
func TestPushResumeAndEpochs(t *testing.T) {
	src := testkit.StartSource(t, kfake.SeedTopics(1, "t"), kfake.NumBrokers(2))
	sa := src.ListenAddrs()[0]
	dst := testkit.StartDest(t, t.TempDir())
	cl := testkit.Client(t, sa)
	produceBatches(t, cl, "t", 200, 10)
	// Small fetches so the copy takes many round trips; stop it early.
	ctx, cancel := context.WithCancel(testkit.Ctx(t))
	o := Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}, CreateTopics: true, FetchBytes: 2048}
	p, err := NewPusher(o)
	if err != nil {
		t.Fatal(err)
	}
	defer p.src.Close()
	defer p.dst.Close()
	// Cancel from inside the produce loop once 3 batches are acknowledged:
	// the loop sends nothing after a cancel, so the push stops exactly
	// there however fast or slow the machine is.
	var stopAt int64 = -1
	p.chunkDone = func(s PartitionStats) {
		if s.Batches >= 3 && stopAt < 0 {
			stopAt = s.End
			cancel()
		}
	}
	stats, err := p.Run(ctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted push: %v", err)
	}
	if len(stats) != 1 || stats[0].End == 0 || stats[0].End >= 2000 || stats[0].End != stopAt {
		t.Fatalf("interrupted push reached %+v (cancelled at log end %d); want part of the log, ending where it was cancelled", stats, stopAt)
	}
	// New leader epochs on the source, with data in each.
	for i := 0; i < 2; i++ {
		src.ShufflePartitionLeaders()
		produceBatches(t, cl, "t", 5, 10)
	}
	stats, err = Push(testkit.Ctx(t), Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}})
	if err != nil {
		t.Fatalf("resumed push: %v", err)
	}
	if stats[0].Start == 0 || stats[0].End != 2100 {
		t.Fatalf("resumed push: %+v", stats[0])
	}
	sameLogs(t, sa, dst.Addr, "t", 1)
}

// TestPushFollow tails the source until cancelled.
func TestPushFollow(t *testing.T) {
	_, sa, dst := startPushPair(t)
	cl := testkit.Client(t, sa)
	produceN(t, cl, "t", 10, false)
	p, stop := followInBackground(t, Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}, CreateTopics: true, Follow: true})
	waitEnd := func(want int64) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if s := p.stats(); len(s) == 1 && s[0].End == want {
				return
			}
		}
		t.Fatalf("follow did not reach %d: %+v", want, p.stats())
	}
	waitEnd(10)
	produceN(t, cl, "t", 15, false)
	waitEnd(25)
	stop()
	sameLogs(t, sa, dst.Addr, "t", 1)
}

// TestPushDivergence: the destination holds offsets the source no longer
// has in that epoch (as after an unclean election): exit 1, precise
// message, nothing written.
func TestPushDivergence(t *testing.T) {
	a := testkit.StartSource(t, kfake.SeedTopics(1, "t"))
	dst := testkit.StartDest(t, t.TempDir())
	produceN(t, testkit.Client(t, a.ListenAddrs()[0]), "t", 100, false)
	if _, err := Push(testkit.Ctx(t), Options{Source: a.ListenAddrs()[0], Dest: dst.Addr, Topics: []string{"t"}, CreateTopics: true}); err != nil {
		t.Fatal(err)
	}
	before := rawLog(t, dst.Addr, "t", 0)
	// The "same" source after losing its tail: epoch 0 ends at 40.
	b := testkit.StartSource(t, kfake.SeedTopics(1, "t"))
	cl := testkit.Client(t, b.ListenAddrs()[0])
	produceN(t, cl, "t", 40, false)
	b.ShufflePartitionLeaders()
	produceN(t, cl, "t", 100, false)
	_, err := Push(testkit.Ctx(t), Options{Source: b.ListenAddrs()[0], Dest: dst.Addr, Topics: []string{"t"}})
	if ExitCode(err) != ExitRefused || !errors.Is(err, ErrDivergence) {
		t.Fatalf("push onto a diverged source: %v (exit %d), want divergence (exit 1)", err, ExitCode(err))
	}
	for _, want := range []string{"t/0", "up to 100", "epoch 0", "offset 40"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	if after := rawLog(t, dst.Addr, "t", 0); !bytes.Equal(before, after) {
		t.Fatal("the destination changed after a refused push")
	}
}

// TestPushSmallFetchAndLargeBatch: a batch far larger than the fetch size
// is copied whole.
func TestPushSmallFetchAndLargeBatch(t *testing.T) {
	_, sa, dst := startPushPair(t)
	cl := testkit.Client(t, sa)
	produceN(t, cl, "t", 5, false)
	if err := cl.ProduceSync(testkit.Ctx(t), &kgo.Record{Topic: "t", Value: bytes.Repeat([]byte("x"), 300<<10)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	produceN(t, cl, "t", 5, false)
	if _, err := Push(testkit.Ctx(t), Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}, CreateTopics: true, FetchBytes: 1024}); err != nil {
		t.Fatal(err)
	}
	sameLogs(t, sa, dst.Addr, "t", 1)
}

func TestPushUsageAndRefusals(t *testing.T) {
	_, sa, dst := startPushPair(t)
	for _, tc := range []struct {
		name string
		o    Options
		code int
		msg  string
	}{
		{"no topics", Options{Source: sa, Dest: dst.Addr}, ExitUsage, "--topics"},
		{"bad address", Options{Source: "nohostport", Dest: dst.Addr, Topics: []string{"t"}}, ExitUsage, "--source"},
		{"missing source topic", Options{Source: sa, Dest: dst.Addr, Topics: []string{"nope"}, CreateTopics: true}, ExitUsage, "source topic nope does not exist"},
		{"missing destination topic", Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}}, ExitUsage, "--create-topics"},
		{"destination is not Verbatim", Options{Source: sa, Dest: sa, Topics: []string{"t"}}, ExitUsage, "mirror produce"},
		{"connection refused", Options{Source: "127.0.0.1:1", Dest: dst.Addr, Topics: []string{"t"}, RetryFor: time.Second}, ExitUsage, "source"},
	} {
		_, err := Push(testkit.Ctx(t), tc.o)
		if ExitCode(err) != tc.code || err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v (exit %d), want exit %d mentioning %q", tc.name, err, ExitCode(err), tc.code, tc.msg)
		}
	}
	// An ordinary destination topic refuses mirror produces: exit 1.
	cl := testkit.Client(t, dst.Addr)
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "t", 1, -1
	req.Topics = append(req.Topics, rt)
	if _, err := cl.Request(testkit.Ctx(t), req); err != nil {
		t.Fatal(err)
	}
	produceN(t, testkit.Client(t, sa), "t", 3, false)
	_, err := Push(testkit.Ctx(t), Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}})
	if ExitCode(err) != ExitRefused || !strings.Contains(err.Error(), "POLICY_VIOLATION") {
		t.Fatalf("push into an ordinary topic: %v (exit %d)", err, ExitCode(err))
	}
}

func TestSplit(t *testing.T) {
	var set []byte
	for i := 0; i < 3; i++ {
		set = append(set, batchAt(t, int64(i*2), 2)...)
	}
	full := len(set)
	bs, span, partial, err := Split(set, 0)
	if err != nil || partial || len(bs) != 3 || len(span) != full {
		t.Fatalf("whole set: %d batches, %d bytes, partial %v, %v", len(bs), len(span), partial, err)
	}
	// A cut in the last batch drops it and says so.
	bs, span, partial, err = Split(set[:full-5], 0)
	if err != nil || !partial || len(bs) != 2 || len(span) != len(bs[0])+len(bs[1]) {
		t.Fatalf("cut set: %d batches, %d bytes, partial %v, %v", len(bs), len(span), partial, err)
	}
	// Batches that end before from are skipped.
	bs, span, _, _ = Split(set, 3)
	if len(bs) != 2 || &span[0] != &set[len(bs[0])] {
		t.Fatalf("from 3: %d batches", len(bs))
	}
	// Message format v1: a clear error.
	old := append([]byte(nil), set...)
	old[16] = 1
	if _, _, _, err := Split(old, 0); !errors.Is(err, ErrOldMagic) || !strings.Contains(err.Error(), "offset 0") {
		t.Fatalf("magic 1: %v", err)
	}
}

func batchAt(t testing.TB, base int64, n int) []byte {
	t.Helper()
	return newTestBatch(base, n)
}

func ExampleStopResult_String() {
	fmt.Println(StopResult{Topic: "t", Partition: 0, LastMirroredOffset: 99, LastMirroredEpoch: 4, NewEpoch: 15, AbortedTransactions: 1, Barrier: true})
	// Output: t/0: last mirrored offset 99 (epoch 4), new leader epoch 15, 1 transactions aborted, barrier true
}

// TestTwoPushers: two pushers on one topic at once. Each produce states
// the log end it expects, so whichever loses a race is refused (exit 1)
// or acknowledged as an identical retry; the destination never gets a
// gap or a duplicate.
func TestTwoPushers(t *testing.T) {
	_, sa, dst := startPushPair(t)
	produceBatches(t, testkit.Client(t, sa), "t", 300, 3)
	if _, err := Push(testkit.Ctx(t), Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}, CreateTopics: true, FetchBytes: 1024}); err != nil {
		t.Fatal(err)
	}
	produceBatches(t, testkit.Client(t, sa), "t", 300, 3)
	errs := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() {
			_, err := Push(testkit.Ctx(t), Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}, FetchBytes: 1024})
			errs <- err
		}()
	}
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil && ExitCode(err) != ExitRefused {
			t.Fatalf("pusher %d: %v (exit %d), want success or refusal", i, err, ExitCode(err))
		} else if err != nil {
			t.Logf("pusher refused: %v", err)
		}
	}
	// Whatever the race did, one more push completes the copy exactly.
	if _, err := Push(testkit.Ctx(t), Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	sameLogs(t, sa, dst.Addr, "t", 1)
}

// TestPushFollowNewPartitions: partitions added on the source while
// following are created on the destination and copied.
func TestPushFollowNewPartitions(t *testing.T) {
	_, sa, dst := startPushPair(t)
	cl := testkit.Client(t, sa, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceN(t, cl, "t", 5, false)
	p, stop := followInBackground(t, Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}, CreateTopics: true, Follow: true, MetadataEvery: 50 * time.Millisecond})
	if _, err := kadmClient(t, sa).UpdatePartitions(testkit.Ctx(t), 3, "t"); err != nil {
		t.Fatal(err)
	}
	fresh := testkit.Client(t, sa, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := fresh.ProduceSync(testkit.Ctx(t), &kgo.Record{Topic: "t", Partition: 2, Value: []byte("new partition")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		s := p.stats()
		if len(s) == 3 && s[2].End == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("new partition not copied: %+v", s)
		}
	}
	stop()
	sameLogs(t, sa, dst.Addr, "t", 1)
	if s, d := rawLog(t, sa, "t", 2), rawLog(t, dst.Addr, "t", 2); !bytes.Equal(s, d) || len(s) == 0 {
		t.Fatal("partition 2 differs")
	}
}

// TestPushOldMessageFormat: message format v1 data on the source is a
// clear refusal naming the offset, with nothing written.
func TestPushOldMessageFormat(t *testing.T) {
	src, sa, dst := startPushPair(t)
	produceN(t, testkit.Client(t, sa), "t", 1, false)
	// The source answers fetches with a message format v1 message set,
	// as a topic written by a pre-0.11 producer would hold.
	v1 := binary.BigEndian.AppendUint64(nil, 0)           // offset
	v1 = binary.BigEndian.AppendUint32(v1, 4+1+1+8+4+4+2) // size
	v1 = binary.BigEndian.AppendUint32(v1, 0)             // crc (not checked here)
	v1 = append(v1, 1, 0)                                 // magic 1, attributes
	v1 = binary.BigEndian.AppendUint64(v1, 1_700_000_000_000)
	v1 = binary.BigEndian.AppendUint32(v1, 0xffffffff) // null key
	v1 = binary.BigEndian.AppendUint32(v1, 2)
	v1 = append(v1, 'v', '1')
	src.ControlKey(kmsg.Fetch.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		src.KeepControl()
		req := kreq.(*kmsg.FetchRequest)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = req.Topics[0].Topic
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.HighWatermark, rp.LastStableOffset, rp.RecordBatches = 1, 1, v1
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	_, err := Push(testkit.Ctx(t), Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}, CreateTopics: true})
	if ExitCode(err) != ExitRefused || !errors.Is(err, ErrOldMagic) || !strings.Contains(err.Error(), "offset 0") {
		t.Fatalf("push of v1 data: %v (exit %d)", err, ExitCode(err))
	}
	if d := rawLog(t, dst.Addr, "t", 0); len(d) != 0 {
		t.Fatalf("destination holds %d bytes", len(d))
	}
}

// TestPushGrowsFetchForCutFirstBatch: a source that cuts the first batch
// at the fetch size (as brokers serving old formats or strict limits do)
// gets asked again with a larger size until the batch is whole.
func TestPushGrowsFetchForCutFirstBatch(t *testing.T) {
	src, sa, dst := startPushPair(t)
	if err := testkit.Client(t, sa, kgo.ProducerBatchCompression(kgo.NoCompression())).ProduceSync(testkit.Ctx(t), &kgo.Record{Topic: "t", Value: bytes.Repeat([]byte("y"), 40<<10)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	full := rawLog(t, sa, "t", 0)
	cut := 0
	src.ControlKey(kmsg.Fetch.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		src.KeepControl()
		req := kreq.(*kmsg.FetchRequest)
		max := int(req.Topics[0].Partitions[0].PartitionMaxBytes)
		if max >= len(full) || req.Topics[0].Partitions[0].FetchOffset != 0 {
			return nil, nil, false
		}
		cut++
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = req.Topics[0].Topic
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.HighWatermark, rp.LastStableOffset, rp.RecordBatches = 1, 1, full[:max]
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	if _, err := Push(testkit.Ctx(t), Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}, CreateTopics: true, FetchBytes: 4096}); err != nil {
		t.Fatal(err)
	}
	if cut < 3 {
		t.Fatalf("the source cut %d responses; want the fetch size to grow 4 KiB -> 64 KiB", cut)
	}
	sameLogs(t, sa, dst.Addr, "t", 1)
}

// TestPushFollowSyncsConfigs: a topic config changed on the source while
// following is changed on the destination.
func TestPushFollowSyncsConfigs(t *testing.T) {
	_, sa, dst := startPushPair(t)
	produceN(t, testkit.Client(t, sa), "t", 3, false)
	_, stop := followInBackground(t, Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}, CreateTopics: true, Follow: true, MetadataEvery: 50 * time.Millisecond})
	if _, err := kadmClient(t, sa).AlterTopicConfigs(testkit.Ctx(t), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kmsg.StringPtr("123456")}}, "t"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); describeConfigs(t, dst.Addr, "t")["retention.ms"] != "123456"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("retention.ms not synced: %v", describeConfigs(t, dst.Addr, "t"))
		}
	}
	if describeConfigs(t, dst.Addr, "t")["mirror.mode"] != "push" {
		t.Fatal("mirror.mode lost in the sync")
	}
	stop()
}

// TestPushFollowSourceTopicRecreated: a source topic deleted and created
// again while following (a new topic id: its offsets are unrelated) stops
// the push with exit 1 and a clear message.
func TestPushFollowSourceTopicRecreated(t *testing.T) {
	_, sa, dst := startPushPair(t)
	produceN(t, testkit.Client(t, sa), "t", 5, false)
	p, err := NewPusher(Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}, CreateTopics: true, Follow: true, MetadataEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := p.Run(testkit.Ctx(t)); done <- err }()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if s := p.stats(); len(s) == 1 && s[0].End == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("initial copy did not finish")
		}
	}
	adm := kadmClient(t, sa)
	if _, err := adm.DeleteTopics(testkit.Ctx(t), "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(testkit.Ctx(t), 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		// The metadata refresh names the recreation; a fetch that meets
		// the new, shorter log first reports the divergence. Both stop.
		if ExitCode(err) != ExitRefused || !(strings.Contains(err.Error(), "recreated") || strings.Contains(err.Error(), "deleted") || errors.Is(err, ErrDivergence)) {
			t.Fatalf("push after the source topic was recreated: %v (exit %d)", err, ExitCode(err))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("push kept following a recreated topic")
	}
}
