//go:build !race

package hotpath

import (
	"testing"

	"github.com/verbatim-kafka/verbatim/internal/kbatch"
)

// Validation allocates nothing per batch or per record byte, in both modes,
// including the LogAppendTime patch; only rejections and decompression
// (compacted topics, ExactTimestamps) allocate.
func TestAllocValidate(t *testing.T) {
	corpus := buildCorpus(t)
	set := verbatimSet(corpus, 0)
	client := mustEncode(t, kbatch.NewBatch(corpusNowMs, testRecords(200, 100, true)...))
	gz := kbatch.NewBatch(corpusNowMs, testRecords(50, 100, true)...)
	gz.Attributes = int16(kbatch.CodecGzip)
	clientGzip := mustEncode(t, gz)
	lat := normalOpts()
	lat.Topic.LogAppendTime = true
	cases := []struct {
		name string
		set  []byte
		o    *Options
	}{
		{"verbatim-corpus-set", set, verbatimOpts()},
		{"normal-uncompressed-200-records", client, normalOpts()},
		{"normal-gzip-header-only", clientGzip, normalOpts()},
		{"normal-log-append-time", client, lat},
	}
	for _, c := range cases {
		var res Result
		buf := make([]byte, len(c.set))
		allocs := testing.AllocsPerRun(100, func() {
			copy(buf, c.set) // normal mode patches in place
			if err := Validate(buf, c.o, &res); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per call, want 0", c.name, allocs)
		}
	}
}
