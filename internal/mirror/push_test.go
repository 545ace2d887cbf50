package mirror

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestPushPlain(t *testing.T) {
	src := startSource(t, kfake.SeedTopics(2, "t"))
	dst := startDest(t, t.TempDir())
	produceN(t, client(t, src.ListenAddrs()[0], kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.ProducerLinger(0)), "t", 500, true)
	stats, err := Push(ctxT(t), Options{Source: src.ListenAddrs()[0], Dest: dst.addr, Topics: []string{"t"}, CreateTopics: true})
	if err != nil {
		t.Fatalf("push: %v (exit %d)", err, ExitCode(err))
	}
	t.Logf("%+v", stats)
	for p := int32(0); p < 2; p++ {
		s, d := rawLog(t, src.ListenAddrs()[0], "t", p), rawLog(t, dst.addr, "t", p)
		if len(s) == 0 || !bytes.Equal(s, d) {
			t.Fatalf("partition %d: source %d bytes, destination %d bytes, equal %v", p, len(s), len(d), bytes.Equal(s, d))
		}
	}
}
