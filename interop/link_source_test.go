package interop

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/link"
	"github.com/verbatim-kafka/verbatim/mirror"
)

// countingProxy forwards TCP connections to one address and counts the
// ones it accepted.
type countingProxy struct {
	ln       net.Listener
	to       string
	accepted atomic.Int64
}

func startCountingProxy(t *testing.T, to string) *countingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{ln: ln, to: to}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.accepted.Add(1)
			go p.pipe(c)
		}
	}()
	return p
}

func (p *countingProxy) pipe(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("tcp", p.to)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

// viaProxies dials each Kafka node through its counting proxy.
func viaProxies(ps map[string]*countingProxy) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if p := ps[addr]; p != nil {
			addr = p.ln.Addr().String()
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
}

// TestLinkSourceKafka: 1,000 partitions (4 topics x 250) of a 3-node
// Kafka 4.4 cluster copied by PartitionCopys through one link's Source
// (shared fetch sessions) into Verbatim, while more records arrive and the
// leaders of one topic's partitions move: every partition ends at the
// source high watermark with the source's bytes, and each source broker
// accepted at most 4 connections from the link (counted by a proxy in
// front of it).
func TestLinkSourceKafka(t *testing.T) {
	topics := []string{"la", "lb", "lc", "ld"}
	const parts = 250
	k := StartKafkaCluster(t, 3, KafkaOptions{HeapMB: 320})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := k.Admin(t)
	for _, tp := range topics {
		k.CreateTopic(t, tp, parts, 3, map[string]string{"min.insync.replicas": "1"})
	}
	prod := k.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.UnknownTopicRetries(-1))
	t0 := time.Now()
	produceRound := func(tag string, per int) {
		defer func() { t.Logf("%v: round %s produced", time.Since(t0).Round(time.Millisecond), tag) }()
		var wg sync.WaitGroup
		var failed atomic.Int64
		var first atomic.Value
		for _, tp := range topics {
			for p := int32(0); p < parts; p++ {
				for i := 0; i < per; i++ {
					wg.Add(1)
					prod.Produce(ctx, &kgo.Record{Topic: tp, Partition: p, Value: []byte(fmt.Sprintf("%s-%d-%s-%d", tp, p, tag, i))}, func(_ *kgo.Record, err error) {
						if err != nil {
							failed.Add(1)
							first.CompareAndSwap(nil, err)
						}
						wg.Done()
					})
				}
			}
		}
		wg.Wait()
		if failed.Load() > 0 {
			t.Fatalf("%d records of round %s failed, first: %v", failed.Load(), tag, first.Load())
		}
	}
	produceRound("r0", 4)

	dst := testkit.StartDest(t, t.TempDir())
	dadm := kadm.NewClient(testkit.Client(t, dst.Addr))
	for _, tp := range topics {
		r, err := dadm.CreateTopic(ctx, parts, 1, map[string]*string{"mirror.mode": kadm.StringPtr("push")}, tp)
		if err == nil {
			err = r.Err
		}
		if err != nil {
			t.Fatalf("creating %s on the destination: %v", tp, err)
		}
	}

	proxies := map[string]*countingProxy{}
	for _, n := range k.Nodes {
		proxies[n.Addr] = startCountingProxy(t, n.Addr)
	}
	srcCl, err := client.NewCluster(k.Nodes[0].Addr, client.Options{ClientID: "link-source", DialContext: viaProxies(proxies)})
	if err != nil {
		t.Fatal(err)
	}
	defer srcCl.Close()
	dstCl, err := client.NewCluster(dst.Addr, client.Options{ClientID: "link-dest"})
	if err != nil {
		t.Fatal(err)
	}
	defer dstCl.Close()
	f := link.NewSourceFetchers(link.SourceConfig{Cluster: srcCl})
	defer f.Close()
	// Register as the writer of every partition at once, as a pusher does.
	var wid [16]byte
	_, _ = rand.Read(wid[:])
	all := map[string][]int32{}
	for _, tp := range topics {
		for p := int32(0); p < parts; p++ {
			all[tp] = append(all[tp], p)
		}
	}
	dcn, err := dstCl.Any(ctx)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := dcn.Request(ctx, mirror.DeleteRecordsRequest(mirror.Writer{Epoch: mirror.RegisterEpoch, ID: wid}, all, 0), 2)
	if err != nil {
		t.Fatal(err)
	}
	rp := resp.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]
	wepoch, err := mirror.AssignedEpoch(&rp)
	if err != nil || wepoch < 0 || rp.ErrorCode != 0 {
		t.Fatalf("registering: epoch %d, error code %d, %v", wepoch, rp.ErrorCode, err)
	}
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	var cerrs sync.Map
	for _, tp := range topics {
		for p := int32(0); p < parts; p++ {
			c := mirror.NewPartitionCopy(mirror.CopyConfig{Topic: tp, Partition: p, Source: f.Source(tp, p),
				Dest: mirror.ClusterDest{Cluster: dstCl, Topic: tp, Partition: p}, Follow: true, RetryFor: 2 * time.Minute,
				Writer: mirror.Writer{Epoch: wepoch, ID: wid}})
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.Run(cctx); err != nil && !errors.Is(err, context.Canceled) {
					cerrs.Store(fmt.Sprintf("%s/%d", tp, p), err)
				}
			}()
		}
	}

	t.Logf("%v: copies started", time.Since(t0).Round(time.Millisecond))
	waitLinkCaughtUp(t, ctx, adm, dadm, topics, &cerrs)
	t.Logf("%v: every partition caught up", time.Since(t0).Round(time.Millisecond))

	// Move the leader of every partition of the first topic while the
	// copies follow: rotate each replica list (no data moves), then elect
	// the preferred (new first) replica.
	produceRound("r1", 3)
	moved := moveLeaders(t, ctx, adm, topics[0])
	t.Logf("%v: %d leaders moved", time.Since(t0).Round(time.Millisecond), moved)
	produceRound("r2", 3)
	waitLinkCaughtUp(t, ctx, adm, dadm, topics, &cerrs)
	t.Logf("%v: every partition caught up", time.Since(t0).Round(time.Millisecond))
	if f.Moves() < int64(moved) {
		t.Errorf("%d partitions moved to another broker's session, %d leaders moved", f.Moves(), moved)
	}
	stop()
	wg.Wait()
	cerrs.Range(func(k, v any) bool { t.Fatalf("%s: %v", k, v); return false })
	for addr, p := range proxies {
		n := p.accepted.Load()
		t.Logf("source broker %s accepted %d connections from the link", addr, n)
		if n < 1 || n > 4 {
			t.Errorf("source broker %s accepted %d connections from the link for %d partitions, want 1..4", addr, n, len(topics)*parts)
		}
	}
	f.Close()
	compareAll(t, ctx, k.Nodes[0].Addr, dstCl, topics, parts)
	t.Logf("%v: bytes compared", time.Since(t0).Round(time.Millisecond))
	// The cluster is this test's alone: no controlled shutdown of 3,000
	// replicas.
	for _, n := range k.Nodes {
		n.Kill()
	}
}

// moveLeaders moves the leader of every partition of topic to another
// replica and returns how many moved.
func moveLeaders(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) int {
	t.Helper()
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	moves := kadm.AlterPartitionAssignmentsReq{}
	elect := kadm.TopicsSet{}
	before := map[int32]int32{}
	for _, p := range md.Topics[topic].Partitions {
		r := p.Replicas
		moves.Assign(topic, p.Partition, append(append([]int32{}, r[1:]...), r[0]))
		elect.Add(topic, p.Partition)
		before[p.Partition] = p.Leader
	}
	if _, err := adm.AlterPartitionAssignments(ctx, moves); err != nil {
		t.Fatalf("reassigning: %v", err)
	}
	// The reassignment completes asynchronously; elect until every
	// leader moved.
	for attempt := 0; ; attempt++ {
		res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, elect)
		if err != nil {
			t.Fatalf("electing: %v", err)
		}
		if md, err = adm.Metadata(ctx, topic); err != nil {
			t.Fatal(err)
		}
		moved := 0
		for _, p := range md.Topics[topic].Partitions {
			if p.Leader != before[p.Partition] {
				moved++
			}
		}
		if moved == len(before) {
			return moved
		}
		if attempt == 100 {
			var errs []string
			for _, ps := range res {
				for _, r := range ps {
					if r.Err != nil && len(errs) < 3 {
						errs = append(errs, fmt.Sprintf("%s/%d: %v %s", r.Topic, r.Partition, r.Err, r.ErrMessage))
					}
				}
			}
			t.Fatalf("only %d of %d leaders moved; election errors %v", moved, len(before), errs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// compareAll checks that every partition of topics holds the same bytes on
// the destination as on the source.
func compareAll(t *testing.T, ctx context.Context, src string, dstCl *client.Cluster, topics []string, parts int32) {
	t.Helper()
	plain, err := client.NewCluster(src, client.Options{ClientID: "interop"})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	for _, tp := range topics {
		for p := int32(0); p < parts; p++ {
			s, d := partitionBytes(t, ctx, plain, tp, p), partitionBytes(t, ctx, dstCl, tp, p)
			if len(s) == 0 || !bytes.Equal(s, d) {
				t.Fatalf("%s/%d: source %d bytes, destination %d, equal %v", tp, p, len(s), len(d), bytes.Equal(s, d))
			}
		}
	}
}

// waitLinkCaughtUp waits until every partition of topics ends on the
// destination where it ends on the source (a copy's error fails the test).
func waitLinkCaughtUp(t *testing.T, ctx context.Context, adm, dadm *kadm.Client, topics []string, cerrs *sync.Map) {
	t.Helper()
	for {
		cerrs.Range(func(k, v any) bool { t.Fatalf("%s: %v", k, v); return false })
		srcEnds, err := adm.ListEndOffsets(ctx, topics...)
		if err != nil {
			t.Fatal(err)
		}
		dstEnds, err := dadm.ListEndOffsets(ctx, topics...)
		if err != nil {
			t.Fatal(err)
		}
		var behind []string
		srcEnds.Each(func(o kadm.ListedOffset) {
			if d, _ := dstEnds.Lookup(o.Topic, o.Partition); d.Offset != o.Offset {
				behind = append(behind, fmt.Sprintf("%s/%d at %d of %d", o.Topic, o.Partition, d.Offset, o.Offset))
			}
		})
		if len(behind) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d partitions never caught up, e.g. %v", len(behind), behind[:min(len(behind), 5)])
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// partitionBytes reads a partition's batches from offset 0 to its log
// end.
func partitionBytes(t *testing.T, ctx context.Context, cl *client.Cluster, topic string, p int32) []byte {
	t.Helper()
	out, _ := testkit.ReadLog(t, ctx, cl, topic, p)
	return out
}
