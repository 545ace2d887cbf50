package hotpath

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// Segments written by a real Apache Kafka 4.4 broker (committed by the
// interop work under cmd/verbatim/testdata/kafka-4.4): a compacted topic
// after cleaning (empty batches, delete-horizon batches, a cleaned marker,
// LogAppendTime) and a transactional topic (data and COMMIT/ABORT markers).
// Every batch must pass verbatim validation untouched, one by one and as
// whole segments.
func TestVerbatimAcceptsKafka44Segments(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "cmd", "verbatim", "testdata", "kafka-4.4", "*.log"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Kafka 4.4 segments found (%v)", err)
	}
	shapes := map[string]int{}
	for _, name := range files {
		seg, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		orig := bytes.Clone(seg)
		var res Result
		if err := Validate(seg, verbatimOpts(), &res); err != nil {
			t.Fatalf("%s as one set: %v", filepath.Base(name), err)
		}
		if !bytes.Equal(seg, orig) {
			t.Fatalf("%s: verbatim validation changed bytes", filepath.Base(name))
		}
		for rest, i := seg, 0; len(rest) > 0; i++ {
			b, r, err := kbatch.Next(rest)
			if err != nil {
				t.Fatalf("%s batch %d: %v", filepath.Base(name), i, err)
			}
			rest = r
			if err := Validate(b, verbatimOpts(), &res); err != nil {
				t.Fatalf("%s batch %d: %v", filepath.Base(name), i, err)
			}
			h, _ := kbatch.ParseHeader(b)
			switch {
			case h.IsControl():
				shapes["control"]++
			case h.RecordCount == 0:
				shapes["empty"]++
			case int64(h.RecordCount) < int64(h.LastOffsetDelta)+1:
				shapes["compacted"]++
			case h.IsTransactional():
				shapes["transactional"]++
			}
			if h.HasDeleteHorizon() {
				shapes["delete-horizon"]++
			}
			if h.LogAppendTime() {
				shapes["log-append-time"]++
			}
		}
	}
	for _, want := range []string{"control", "empty", "transactional", "delete-horizon", "log-append-time"} {
		if shapes[want] == 0 {
			t.Errorf("the Kafka 4.4 segments no longer contain a %s batch: %v", want, shapes)
		}
	}
	t.Logf("Kafka 4.4 batch shapes accepted: %v", shapes)
}
