package interop

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/internal/hostile"
	"github.com/verbatim-kafka/verbatim/kbatch"
)

// produceRawV8 sends one record set to partition 0 as Produce v8 (acks
// -1, a non-flexible response header for rawRequest) and returns the
// partition's answer.
func produceRawV8(t *testing.T, addr, topic string, set []byte, corr int32) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 8, -1, 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = set
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 8
	if err := resp.ReadFrom(rawRequest(t, addr, req, corr)); err != nil {
		t.Fatalf("produce response: %v", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("produce response %+v", resp)
	}
	return resp.Topics[0].Partitions[0]
}

// TestHostileCompressedBatches is the holes 2 and 3 against a real
// `verbatim serve`: batches of all four codecs whose payload is not valid
// for the codec get INVALID_RECORD, and a gzip bomb (about 1 MB inflating
// to 950 MiB) MESSAGE_TOO_LARGE; nothing of them is stored, so kcat
// (librdkafka) and franz-go read the whole partition, the good records
// produced before and after, without error, and again after a restart.
func TestHostileCompressedBatches(t *testing.T) {
	bin := BuildVerbatim(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	v := StartVerbatim(t, bin, VerbatimOptions{DataDir: dataDir})
	const topic = "hostile"
	adm := kadm.NewClient(verbatimClient(t, v.Addr))
	createTopicOn(t, adm, topic, 1, nil)

	var want []wantRecord
	produceGood := func(tag string, codec kgo.CompressionCodec) {
		t.Helper()
		cl := verbatimClient(t, v.Addr, kgo.ProducerBatchCompression(codec), kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		var rs []*kgo.Record
		for i := 0; i < 10; i++ {
			k, val := fmt.Sprintf("%s-%02d", tag, i), fmt.Sprintf("%s value %d", tag, i)
			rs = append(rs, &kgo.Record{Key: []byte(k), Value: []byte(val)})
			want = append(want, wantRecord{len(want), k, val})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", tag, err)
		}
	}
	produceGood("before-zstd", kgo.ZstdCompression())
	produceGood("before-gzip", kgo.GzipCompression())

	now := time.Now().UnixMilli()
	for i, c := range hostile.Codecs {
		pr := produceRawV8(t, v.Addr, topic, hostile.Batch(c, hostile.Poison(c), 3, now), int32(10+i))
		if pr.ErrorCode != kerr.InvalidRecord.Code || pr.BaseOffset != -1 {
			t.Errorf("poisoned %s batch: error %d (%v), base offset %d; want INVALID_RECORD", c, pr.ErrorCode, pr.ErrorMessage, pr.BaseOffset)
		}
	}
	bomb := hostile.Batch(kbatch.CodecGzip, hostile.GzipBomb(950<<20), 1, now)
	if len(bomb) > 1<<20 {
		t.Fatalf("the bomb is %d bytes, over max.message.bytes", len(bomb))
	}
	if pr := produceRawV8(t, v.Addr, topic, bomb, 20); pr.ErrorCode != kerr.MessageTooLarge.Code {
		t.Errorf("gzip bomb (%d bytes): error %d (%v); want MESSAGE_TOO_LARGE", len(bomb), pr.ErrorCode, pr.ErrorMessage)
	}
	produceGood("after-lz4", kgo.Lz4Compression())
	produceGood("after-snappy", kgo.SnappyCompression())

	readAll := func(when string) {
		t.Helper()
		res := Kcat(t, "-C", "-b", v.Addr, "-t", topic, "-p", "0", "-o", "beginning", "-c", strconv.Itoa(len(want)), "-e",
			"-f", "%o\t%k\t%s\n")
		checkConsumed(t, "kcat "+when, res.Lines(), want)

		cl := verbatimClient(t, v.Addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var lines []string
		for len(lines) < len(want) {
			fs := cl.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatalf("franz-go %s after %d records: %v", when, len(lines), err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				lines = append(lines, fmt.Sprintf("%d\t%s\t%s", r.Offset, r.Key, r.Value))
			})
		}
		checkConsumed(t, "franz-go "+when, lines, want)
	}
	readAll("after the hostile batches")

	v.Proc.Stop(10 * time.Second)
	v = StartVerbatim(t, bin, VerbatimOptions{DataDir: dataDir})
	readAll("after a restart")
}
