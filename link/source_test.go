package link

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/mirror"
)

// newTestFetchers starts fetchers on seed (dialled with dial when set).
func newTestFetchers(t *testing.T, seed string, cfg sourceConfig, dial ...func(context.Context, string, string) (net.Conn, error)) *sourceFetchers {
	t.Helper()
	o := client.Options{ClientID: "link-test"}
	if len(dial) > 0 {
		o.DialContext = dial[0]
	}
	cl, err := client.NewCluster(seed, o)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Cluster = cl
	f := newSourceFetchers(cfg)
	t.Cleanup(func() {
		f.Close()
		cl.Close()
	})
	return f
}

// sourceWith starts a kfake source of brokers with topics of parts
// partitions, per records in each (in batches of batch), and returns it,
// its seed, the test's context and a producer.
func sourceWith(t *testing.T, brokers int, topics []string, parts int32, per, batch int) (*countedSource, string, context.Context, *kgo.Client) {
	t.Helper()
	src := startCountedSource(t, kfake.NumBrokers(brokers), kfake.SeedTopics(parts, topics...))
	seed := src.ListenAddrs()[0]
	ctx := testCtx(t, 2*time.Minute)
	prod := kgoClient(t, seed)
	produceEach(t, ctx, prod, topics, parts, per, batch)
	return src, seed, ctx, prod
}

// follow starts following copies of tps through f into d; finish waits
// until they caught up with the source, stops them and fails the test on
// a copy's error.
func follow(t *testing.T, ctx context.Context, seed string, f *sourceFetchers, d *memDest, tps []client.TopicPartition, fetchBytes int32) (finish func()) {
	cctx, stop := context.WithCancel(ctx)
	done := make(chan []error, 1)
	go func() { done <- copyAll(cctx, f, d, tps, true, nil, fetchBytes) }()
	return func() {
		t.Helper()
		waitCaughtUp(t, ctx, seed, d, tps)
		stop()
		for i, err := range <-done {
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("%s: %v", tps[i], err)
			}
		}
	}
}

// TestSourceThousandPartitions: 1,000 partitions on a 3-broker source
// copied by PartitionCopys through one link's Source reach the source
// high watermark with identical bytes, over at most 4 connections per
// source broker (counted by the brokers' listeners).
func TestSourceThousandPartitions(t *testing.T) {
	topics := []string{"a", "b", "c", "d"}
	const parts = 250
	src, seed, ctx, prod := sourceWith(t, 3, topics, parts, 6, 3)
	prod.Close()
	tps := partitions(topics, parts)
	// With one session per broker (the default) and with two: a session
	// and the shared connection, or two sessions and the shared one.
	for _, conns := range []int{1, 2} {
		before := src.accepted()
		f := newTestFetchers(t, seed, sourceConfig{FetchConns: conns})
		d := newMemDest()
		for i, err := range copyAll(ctx, f, d, tps, false, nil, 0) {
			if err != nil {
				t.Fatalf("%s: %v", tps[i], err)
			}
		}
		after := src.accepted()
		if len(after) != 3 {
			t.Fatalf("counted %d brokers", len(after))
		}
		for addr, n := range after {
			used := n - before[addr]
			t.Logf("%d session(s) per broker: broker %s accepted %d connections from the link", conns, addr, used)
			if used < int64(conns) || used > 4 {
				t.Fatalf("%d session(s) per broker: broker %s accepted %d connections from the link for %d partitions, want %d..4", conns, addr, used, len(tps), conns)
			}
		}
		f.Close()
		sameAsSource(t, ctx, seed, d, tps)
	}
}

// TestSourceLeaderMove: partitions whose leader moves while they are
// copied (following) move to the new leader's session and end exact.
func TestSourceLeaderMove(t *testing.T) {
	topics := []string{"m"}
	const parts = 6
	src, seed, ctx, prod := sourceWith(t, 3, topics, parts, 20, 5)
	f := newTestFetchers(t, seed, sourceConfig{})
	d := newMemDest()
	tps := partitions(topics, parts)
	finish := follow(t, ctx, seed, f, d, tps, 1<<10)
	for round := 0; round < 3; round++ {
		for p := int32(0); p < parts; p++ {
			leader := src.LeaderFor("m", p)
			if err := src.MoveTopicPartition("m", p, (leader+1)%3); err != nil {
				t.Fatal(err)
			}
		}
		produceEach(t, ctx, prod, topics, parts, 10, 5)
	}
	finish()
	// kfake's former leader may go on answering fetches for a moved
	// partition, so whether a copy rebinds is up to it; that copies do
	// rebind on Kafka's NOT_LEADER_OR_FOLLOWER is asserted against a
	// real 3-node Kafka (interop TestLinkSourceKafka). Here: exact.
	t.Logf("%d partition moves to another broker's session", f.Moves())
	sameAsSource(t, ctx, seed, d, tps)
}

// waitCaughtUp waits until every partition of d ends at the source high
// watermark.
func waitCaughtUp(t *testing.T, ctx context.Context, seed string, d *memDest, tps []client.TopicPartition) {
	t.Helper()
	cl := plainCluster(t, seed)
	for _, tp := range tps {
		_, hw := rawSourceLog(t, ctx, cl, tp)
		for {
			if _, end := d.snapshot(tp); end >= hw {
				break
			}
			select {
			case <-ctx.Done():
				_, end := d.snapshot(tp)
				t.Fatalf("%s: destination at %d, source high watermark %d", tp, end, hw)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

// TestSourceSessionReset: killed connections and session errors while
// copying neither lose nor repeat data (the destination refuses a write
// that does not continue its log).
func TestSourceSessionReset(t *testing.T) {
	topics := []string{"r"}
	const parts = 4
	src, seed, ctx, prod := sourceWith(t, 1, topics, parts, 30, 5)
	f := newTestFetchers(t, seed, sourceConfig{})
	d := newMemDest()
	tps := partitions(topics, parts)
	var kills, resets atomic.Int64
	var n atomic.Int64
	src.ControlKey(kmsg.Fetch.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		src.KeepControl()
		req := r.(*kmsg.FetchRequest)
		if req.SessionEpoch < 0 {
			return nil, nil, false // the test's own sessionless reads
		}
		switch n.Add(1) % 7 {
		case 3:
			kills.Add(1)
			return nil, errors.New("killed"), true // kfake closes the connection
		case 5:
			resets.Add(1)
			resp := req.ResponseKind().(*kmsg.FetchResponse)
			resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
			return resp, nil, true
		}
		return nil, nil, false
	})
	finish := follow(t, ctx, seed, f, d, tps, 256)
	produceEach(t, ctx, prod, topics, parts, 30, 5)
	finish()
	if kills.Load() == 0 || resets.Load() == 0 {
		t.Fatalf("%d kills, %d session resets: the faults did not happen", kills.Load(), resets.Load())
	}
	t.Logf("%d connections killed, %d sessions reset", kills.Load(), resets.Load())
	sameAsSource(t, ctx, seed, d, tps)
}

// TestSourceBrokerRestart: while the source broker is unreachable the
// copies' fetches fail and the session re-dials with back-off; once it is
// back, the copies continue exactly where they were.
func TestSourceBrokerRestart(t *testing.T) {
	topics := []string{"s"}
	const parts = 3
	_, seed, ctx, prod := sourceWith(t, 1, topics, parts, 10, 5)
	proxy := startSwitchProxy(t, seed)
	f := newTestFetchers(t, seed, sourceConfig{}, proxy.dial)
	d := newMemDest()
	tps := partitions(topics, parts)
	finish := follow(t, ctx, seed, f, d, tps, 0)
	waitCaughtUp(t, ctx, seed, d, tps)
	before := proxy.accepted.Load()
	addr := proxy.address()
	proxy.down()
	produceEach(t, ctx, prod, topics, parts, 10, 5)
	time.Sleep(300 * time.Millisecond) // the copies meet the outage (not a pass/fail condition)
	if err := proxy.up(addr); err != nil {
		t.Fatal(err)
	}
	finish()
	if proxy.accepted.Load() <= before {
		t.Fatalf("no connection after the broker came back (%d before, %d after)", before, proxy.accepted.Load())
	}
	sameAsSource(t, ctx, seed, d, tps)
}

// TestSourceBackPressure: a partition whose copy does not ask is not
// fetched for: the next request forgets it and no later one names it.
func TestSourceBackPressure(t *testing.T) {
	src := startCountedSource(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "p"))
	seed := src.ListenAddrs()[0]
	ctx := testCtx(t, time.Minute)
	produceEach(t, ctx, kgoClient(t, seed), []string{"p"}, 2, 10, 2)
	var mu sync.Mutex
	var reqs []*kmsg.FetchRequest
	src.ControlKey(kmsg.Fetch.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		src.KeepControl()
		mu.Lock()
		reqs = append(reqs, r.(*kmsg.FetchRequest))
		mu.Unlock()
		return nil, nil, false
	})
	f := newTestFetchers(t, seed, sourceConfig{})
	conn := func(p int32) mirror.SourceConn {
		cn, _, err := f.Source("p", p).Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return cn
	}
	a, b := conn(0), conn(1)
	args := func(p int32, off int64) client.FetchArgs {
		return client.FetchArgs{Topic: "p", Partition: p, Offset: off, MaxBytes: 1 << 20, MaxWaitMs: 50, CurrentEpoch: -1, LastFetchedEpoch: -1}
	}
	if res, err := a.Fetch(ctx, args(0, 0)); err != nil || len(res.Records) == 0 {
		t.Fatalf("partition 0: %v, %d bytes", err, len(res.Records))
	}
	// Only partition 1 asks from now on, a batch at a time.
	var off int64
	for i := 0; i < 5; i++ {
		a := args(1, off)
		a.MaxBytes = 1
		res, err := b.Fetch(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if bs, _, _, _ := mirror.Split(res.Records, off); len(bs) > 0 {
			off = mirror.LastOffset(bs[len(bs)-1]) + 1
		}
	}
	mu.Lock()
	defer mu.Unlock()
	forgotten := false
	for _, r := range reqs[1:] {
		for _, ft := range r.ForgottenTopics {
			for _, p := range ft.Partitions {
				forgotten = forgotten || p == 0
			}
		}
		if forgotten {
			for _, rt := range r.Topics {
				for _, rp := range rt.Partitions {
					if rp.Partition == 0 {
						t.Fatalf("partition 0 fetched for after it was forgotten")
					}
				}
			}
		}
	}
	if !forgotten {
		t.Fatalf("partition 0 was never forgotten in %d requests", len(reqs))
	}
}

// TestSourceDivergingEpoch: a DivergingEpoch answer of the session reaches
// the copy, which refuses to continue.
func TestSourceDivergingEpoch(t *testing.T) {
	src := startCountedSource(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "v"))
	seed := src.ListenAddrs()[0]
	ctx := testCtx(t, time.Minute)
	produceEach(t, ctx, kgoClient(t, seed), []string{"v"}, 1, 10, 5)
	f := newTestFetchers(t, seed, sourceConfig{})
	d := newMemDest()
	tps := partitions([]string{"v"}, 1)
	if errs := copyAll(ctx, f, d, tps, false, nil, 0); errs[0] != nil {
		t.Fatal(errs[0])
	}
	produceEach(t, ctx, kgoClient(t, seed), []string{"v"}, 1, 5, 5)
	id := src.TopicInfo("v").TopicID
	src.ControlKey(kmsg.Fetch.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		src.KeepControl()
		req := r.(*kmsg.FetchRequest)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = "v", id
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.HighWatermark = 15
		rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = 0, 7
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	err := copyAll(ctx, f, d, tps, false, nil, 0)[0]
	if !errors.Is(err, mirror.ErrDivergence) {
		t.Fatalf("copy after a DivergingEpoch answer: %v", err)
	}
}

// TestSourceThrottle: with a throttle of R bytes/s, fetching B bytes takes
// (B - one second's burst)/R on the link's clock, within one response.
func TestSourceThrottle(t *testing.T) {
	topics := []string{"th"}
	const parts = 3
	src := startCountedSource(t, kfake.NumBrokers(1), kfake.SeedTopics(parts, topics...))
	seed := src.ListenAddrs()[0]
	ctx := testCtx(t, time.Minute)
	produceEach(t, ctx, kgoClient(t, seed), topics, parts, 400, 4)
	clk := testkit.NewSleepClock(time.Unix(1e9, 0))
	const rate = 4 << 10
	const fetchBytes = 1 << 10
	f := newTestFetchers(t, seed, sourceConfig{Clock: clk, ThrottleBytesPerSec: rate})
	d := newMemDest()
	tps := partitions(topics, parts)
	start := clk.Now()
	for i, err := range copyAll(ctx, f, d, tps, false, nil, fetchBytes) {
		if err != nil {
			t.Fatalf("%s: %v", tps[i], err)
		}
	}
	elapsed := clk.Now().Sub(start)
	var total int64
	for _, tp := range tps {
		total += d.log(tp).written
	}
	// Every fetch waits until the bucket is out of debt: the bytes
	// fetched before the last wait are at most burst + rate*elapsed,
	// and the last response adds at most one request's worth.
	lo := time.Duration(float64(total-rate-parts*(fetchBytes+1<<10)) / rate * float64(time.Second))
	hi := time.Duration(float64(total-rate) / rate * float64(time.Second))
	t.Logf("%d bytes in %v of link time at %d B/s (bounds %v..%v)", total, elapsed, rate, lo, hi)
	if total < 4*rate || elapsed < lo || elapsed > hi+time.Millisecond {
		t.Fatalf("%d bytes took %v at %d B/s, want %v..%v", total, elapsed, rate, lo, hi)
	}
}

// TestSourceRecreatedTopic: once a partition's source knows its topic's
// id, a leader lookup that finds the topic under another id (deleted and
// re-created between two lookups) is refused permanently, so no copy
// follows a new topic's data into the old mirror.
func TestSourceRecreatedTopic(t *testing.T) {
	src := startCountedSource(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "r"))
	seed := src.ListenAddrs()[0]
	ctx := testCtx(t, time.Minute)
	f := newTestFetchers(t, seed, sourceConfig{})
	s := f.Source("r", 0)
	cn, _, err := s.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cn.Close()
	adm := kadm.NewClient(kgoClient(t, seed))
	if _, err := adm.DeleteTopics(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "r"); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Leader(ctx)
	var p interface{ Permanent() bool }
	if err == nil || !errors.As(err, &p) || !strings.Contains(err.Error(), "re-created") {
		t.Fatalf("leader lookup after the topic was re-created: %v, want a permanent re-creation error", err)
	}
}
