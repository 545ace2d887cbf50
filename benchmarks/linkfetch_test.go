//go:build peerbench

package benchmarks

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/interop"
	"github.com/verbatim-kafka/verbatim/link"
	"github.com/verbatim-kafka/verbatim/mirror"
)

var (
	linkFetchMB     = flag.Int("linkfetch.mb", 64, "MB of record values per topic (spread over its partitions)")
	linkFetchRounds = flag.Int("linkfetch.rounds", 3, "alternating rounds; the median is reported")
)

// TestLinkFetchBench measures the cluster link's fetch side (link.SourceFetchers:
// one KIP-227 session per source broker) against a plain fetch of the same
// partitions (package client, one connection and sessionless Fetch per
// partition, as `mirror push` fetches) from a real Kafka 4.4 node, at 4 and
// 1,000 partitions: fetch only, the bytes are counted and dropped. The
// Source runs with 1 (the default) and 2 (the most) sessions per broker; the modes
// take turns within each round, in a rotated order; the median of the
// rounds is reported.
//
//	go test -tags peerbench -count=1 -timeout 30m -run '^TestLinkFetchBench$' ./benchmarks/ -args -linkfetch.mb=64 -linkfetch.rounds=3
func TestLinkFetchBench(t *testing.T) {
	k := interop.StartKafka(t, interop.KafkaOptions{HeapMB: 768, FullJIT: true})
	seed := k.Nodes[0].Addr
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	for _, parts := range []int32{4, 1000} {
		topic := fmt.Sprintf("linkfetch-%d", parts)
		k.CreateTopic(t, topic, parts, 1, nil)
		loadTopic(t, ctx, k, topic, parts, *linkFetchMB<<20)
		// Modes: 0 the plain fetch, n > 0 the link's Source with n fetch
		// sessions per broker.
		modes := []int{1, 2, 0}
		rates := map[int][]float64{}
		for round := 0; round < *linkFetchRounds; round++ {
			for i := range modes {
				mode := modes[(i+round)%len(modes)] // rotate the order each round
				mb, secs := fetchTopic(t, ctx, seed, topic, parts, mode)
				rates[mode] = append(rates[mode], mb/secs)
				t.Logf("%d partitions, round %d, %s: %.1f MB in %.2fs, %.1f MB/s", parts, round, modeName(mode), mb, secs, mb/secs)
			}
		}
		ref := median(rates[0])
		for _, mode := range modes[:2] {
			m := median(rates[mode])
			t.Logf("RESULT %d partitions: %s %.1f MB/s, plain fetch %.1f MB/s, ratio %.2f (median of %d)", parts, modeName(mode), m, ref, m/ref, len(rates[mode]))
		}
	}
}

func modeName(mode int) string {
	if mode == 0 {
		return "plain fetch"
	}
	return fmt.Sprintf("link source (%d session(s) per broker)", mode)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// loadTopic writes about total bytes of 1000-byte random values, spread
// evenly over the partitions.
func loadTopic(t *testing.T, ctx context.Context, k *interop.Kafka, topic string, parts int32, total int) {
	t.Helper()
	cl := k.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(256<<10), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.UnknownTopicRetries(-1))
	rng := rand.New(rand.NewPCG(1, uint64(parts)))
	per := max(total/1000/int(parts), 1)
	var failed atomic.Int64
	for i := 0; i < per; i++ {
		for p := int32(0); p < parts; p++ {
			val := make([]byte, 1000)
			for j := range val {
				val[j] = byte(rng.Uint32())
			}
			cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: val}, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Add(1)
				}
			})
		}
	}
	if err := cl.Flush(ctx); err != nil || failed.Load() > 0 {
		t.Fatalf("loading %s: %v, %d records failed", topic, err, failed.Load())
	}
}

// fetchTopic reads every partition of topic from offset 0 to its log end,
// through a link's Source or with plain per-partition fetches, and
// returns the MB of batches read and the seconds it took (sessions 0: plain
// fetches).
func fetchTopic(t *testing.T, ctx context.Context, seed, topic string, parts int32, sessions int) (float64, float64) {
	t.Helper()
	cl, err := client.NewCluster(seed, client.Options{ClientID: "linkfetch-bench"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends := make([]int64, parts)
	for p := range parts {
		cn, _, err := cl.Leader(ctx, topic, p)
		if err != nil {
			t.Fatal(err)
		}
		e, err := client.ListOffset(ctx, cn, topic, p, client.Latest, client.ReadUncommitted)
		if err != nil {
			t.Fatal(err)
		}
		ends[p] = e.Offset
	}
	viaSource := sessions > 0
	var f *link.SourceFetchers
	if viaSource {
		f = link.NewSourceFetchers(link.SourceConfig{Cluster: cl, FetchConns: sessions})
		defer f.Close()
	}
	var total atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, parts)
	start := time.Now()
	for p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var cn mirror.SourceConn
			var err error
			if viaSource {
				cn, _, err = f.Source(topic, p).Leader(ctx)
			} else {
				cn, _, err = mirror.ClusterSource{Cluster: cl, Topic: topic, Partition: p}.Leader(ctx)
			}
			if err != nil {
				errs <- err
				return
			}
			defer cn.Close()
			for next := int64(0); next < ends[p]; {
				res, err := cn.Fetch(ctx, client.FetchArgs{Topic: topic, Partition: p, Offset: next, MaxBytes: 4 << 20, MaxWaitMs: 500,
					Isolation: client.ReadUncommitted, CurrentEpoch: -1, LastFetchedEpoch: -1})
				if err == nil {
					err = res.Err
				}
				if err != nil {
					errs <- err
					return
				}
				bs, span, _, err := mirror.Split(res.Records, next)
				if err != nil || len(bs) == 0 {
					errs <- fmt.Errorf("%s/%d at %d: %d batches, %v", topic, p, next, len(bs), err)
					return
				}
				total.Add(int64(len(span)))
				next = mirror.LastOffset(bs[len(bs)-1]) + 1
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return float64(total.Load()) / (1 << 20), secs
}
