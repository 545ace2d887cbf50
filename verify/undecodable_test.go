package verify

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/verbatim-kafka/verbatim/internal/hostile"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/kbatch"
)

// A compressed batch that cannot be decompressed, mirrored verbatim, is
// listed with its offset, codec and reason; the mirror is still exact (the
// destination holds the source's bytes).
func TestVerifyReportsUndecodableBatch(t *testing.T) {
	src := testkit.StartSource(t, kfake.SeedTopics(1, "u"))
	sa := src.ListenAddrs()[0]
	dst := startDest(t)
	cl := testkit.Client(t, sa, kgo.DefaultProduceTopic("u"), kgo.ProducerBatchCompression(kgo.GzipCompression()))
	produce(t, cl, &kgo.Record{Value: []byte("before")})
	// Produce by topic name (v12 at most: v13 addresses topics by id).
	raw := testkit.Client(t, sa, kgo.MaxVersions(kversion.V3_0_0()))
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "u"
	rp := kmsg.NewProduceRequestTopicPartition()
	// An hour old: never the partition's max timestamp, which kfake would
	// decompress to answer ListOffsets.
	rp.Records = hostile.Batch(kbatch.CodecGzip, hostile.Poison(kbatch.CodecGzip), 2, time.Now().UnixMilli()-3_600_000)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testkit.Ctx(t), raw)
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("the source refused the poisoned batch: %v %+v", err, resp)
	}
	produce(t, cl, &kgo.Record{Value: []byte("after")})
	push(t, sa, dst, "u")
	rep := run(t, sa, dst, "u")
	p := rep.Partitions[0]
	if !rep.Exact || p.Status != Identical || len(p.Undecodable) != 1 {
		t.Fatalf("report %+v", p)
	}
	if u := p.Undecodable[0]; u.Offset != 1 || u.Codec != "gzip" || !strings.Contains(u.Reason, "gzip") {
		t.Fatalf("undecodable %+v", u)
	}
	var b strings.Builder
	rep.WriteText(&b)
	if !strings.Contains(b.String(), "batch at offset 1 (gzip) cannot be decompressed") {
		t.Fatalf("text report:\n%s", b.String())
	}
}
