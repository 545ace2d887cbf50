package interop

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/mirror"
)

// BenchmarkMirrorPushFromKafka measures `verbatim mirror push` from a real
// Kafka 4.4 node into `verbatim serve`, next to the rate at which the same
// node serves raw fetches of the same data in the same run (the upper
// bound for any pusher). Run with:
//
//	go test -run '^$' -bench BenchmarkMirrorPushFromKafka -benchtime 1x ./interop/
//
// MIRROR_BENCH_RECORDS (default 8000) sets the 1000-byte records per
// partition (4 partitions); small runs mostly time the pusher's start-up.
func BenchmarkMirrorPushFromKafka(b *testing.B) {
	const parts, valueSize = 4, 1000
	perPart := 8000 // 32 MB of values
	if v := os.Getenv("MIRROR_BENCH_RECORDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("MIRROR_BENCH_RECORDS=%q: want a positive number", v)
		}
		perPart = n
	}
	bin := BuildVerbatim(b)
	k := StartKafka(b, KafkaOptions{HeapMB: 768})
	src := k.Bootstrap()
	k.CreateTopic(b, "bench", parts, 1, nil)
	cl := k.Client(b, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(256<<10), kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(1, 2))
	for p := int32(0); p < parts; p++ {
		for i := 0; i < perPart; i++ {
			val := make([]byte, valueSize)
			for j := range val {
				val[j] = byte(rng.Uint32())
			}
			cl.Produce(ctx, &kgo.Record{Topic: "bench", Partition: p, Key: []byte(fmt.Sprint(i)), Value: val}, nil)
		}
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		// The limit: raw fetches of every partition, as fast as the source
		// serves them, on one connection per partition.
		start := time.Now()
		var fetched int64
		done := make(chan int64, parts)
		for p := int32(0); p < parts; p++ {
			go func() { done <- rawFetchAll(b, src, "bench", p) }()
		}
		for p := 0; p < parts; p++ {
			fetched += <-done
		}
		fetchSecs := time.Since(start).Seconds()

		v := StartVerbatim(b, bin, VerbatimOptions{})
		start = time.Now()
		res, _ := RunTool(b, Cmd{Timeout: 5 * time.Minute}, bin, "mirror", "push", "--source", src, "--dest", v.Addr, "--topics", "bench", "--create-topics", "--log-format", "json")
		pushSecs := time.Since(start).Seconds()
		if res.ExitCode != 0 {
			b.Fatalf("push: exit %d\n%s", res.ExitCode, tail(res.Stderr, 20))
		}
		mb := float64(fetched) / (1 << 20)
		b.ReportMetric(mb/fetchSecs, "fetch-MB/s")
		b.ReportMetric(mb/pushSecs, "push-MB/s")
		b.ReportMetric(fetchSecs/pushSecs, "push/fetch")
		b.Logf("%.1f MB: raw fetch %.2fs (%.1f MB/s), mirror push %.2fs (%.1f MB/s), ratio %.2f", mb, fetchSecs, mb/fetchSecs, pushSecs, mb/pushSecs, fetchSecs/pushSecs)
		v.Proc.Stop(10 * time.Second)
	}
}

// rawFetchAll reads a whole partition with raw fetches and returns the
// bytes read.
func rawFetchAll(b *testing.B, addr, topic string, part int32) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := client.NewCluster(addr, client.Options{ClientID: "bench"})
	if err != nil {
		b.Error(err)
		return 0
	}
	defer cl.Close()
	la, _, err := cl.LeaderAddr(ctx, topic, part)
	if err != nil {
		b.Error(err)
		return 0
	}
	cn, err := client.Dial(ctx, la, client.Options{ClientID: "bench"})
	if err != nil {
		b.Error(err)
		return 0
	}
	defer cn.Close()
	end, err := client.ListOffset(ctx, cn, topic, part, client.Latest, client.ReadUncommitted)
	if err != nil {
		b.Error(err)
		return 0
	}
	var total int64
	for next := int64(0); next < end.Offset; {
		res, err := client.FetchPartition(ctx, cn, client.FetchArgs{Topic: topic, Partition: part, Offset: next, MaxBytes: 4 << 20, CurrentEpoch: -1, LastFetchedEpoch: -1})
		if err == nil {
			err = res.Err
		}
		if err != nil {
			b.Error(err)
			return total
		}
		bs, span, _, err := mirror.Split(res.Records, next)
		if err != nil || len(bs) == 0 {
			b.Errorf("fetch at %d: %d batches, %v", next, len(bs), err)
			return total
		}
		total += int64(len(span))
		next = mirror.LastOffset(bs[len(bs)-1]) + 1
	}
	return total
}
