package broker

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/internal/hostile"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

// Compressed produce through the broker: poisoned payloads of every codec
// get INVALID_RECORD, the topic's max.decompressed.batch.bytes
// MESSAGE_TOO_LARGE and max.decompressed.message.bytes INVALID_RECORD with
// Kafka's message; nothing refused is stored; valid compressed batches are
// stored byte for byte; the decode budget is back to zero; and both limits
// are described with their defaults and documentation.
func TestProduceCompressedLimits(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "c", 1, nil)
	createTopic(t, b, "batchcap", 1, map[string]*string{"max.decompressed.batch.bytes": sp("4096")})
	createTopic(t, b, "reccap", 1, map[string]*string{"max.decompressed.message.bytes": sp("512")})
	now := time.Now().UnixMilli()
	for _, c := range hostile.Codecs {
		pr := produceOne(t, b, 9, "c", 0, hostile.Batch(c, hostile.Poison(c), 2, now))
		if pr.ErrorCode != kerr.InvalidRecord.Code || pr.ErrorMessage == nil || !strings.Contains(*pr.ErrorMessage, "cannot decompress") {
			t.Errorf("poisoned %s: %d %v", c, pr.ErrorCode, pr.ErrorMessage)
		}
	}
	big := func(c kbatch.Codec) []byte {
		bt := kbatch.NewBatch(now, kbatch.Record{Key: []byte("k"), Value: make([]byte, 8000)})
		bt.Attributes = int16(c)
		return kbatchtest.Encode(t, bt)
	}
	if pr := produceOne(t, b, 9, "batchcap", 0, big(kbatch.CodecZstd)); pr.ErrorCode != kerr.MessageTooLarge.Code {
		t.Errorf("over max.decompressed.batch.bytes: %+v", pr)
	}
	if pr := produceOne(t, b, 9, "reccap", 0, big(kbatch.CodecLZ4)); pr.ErrorCode != kerr.InvalidRecord.Code || pr.ErrorMessage == nil ||
		!strings.Contains(*pr.ErrorMessage, "exceeds the configured maximum record size of 512") {
		t.Errorf("over max.decompressed.message.bytes: %+v", pr)
	}
	// Uncompressed, the same record is bounded by max.message.bytes only.
	if pr := produceOne(t, b, 9, "reccap", 0, big(kbatch.CodecNone)); pr.ErrorCode != 0 {
		t.Errorf("uncompressed record: %+v", pr)
	}
	good := big(kbatch.CodecGzip)
	if pr := produceOne(t, b, 9, "c", 0, good); pr.ErrorCode != 0 || pr.BaseOffset != 0 {
		t.Fatalf("valid gzip batch: %+v", pr)
	}
	f := fetchAll(t, b, "c", 0, 0)
	if len(f.RecordBatches) != len(good) || string(f.RecordBatches[kbatch.MagicOffset:]) != string(good[kbatch.MagicOffset:]) {
		t.Fatalf("stored %d bytes, want the %d sent", len(f.RecordBatches), len(good))
	}
	if n := b.srv.decode.InUse(); n != 0 {
		t.Fatalf("%d decode bytes still charged", n)
	}

	want := map[string]string{"max.decompressed.batch.bytes": "67108864", "max.decompressed.message.bytes": "2147483639"}
	for _, c := range topicConfigDocs(t, b, "c", "max.decompressed.batch.bytes", "max.decompressed.message.bytes") {
		if c.Value == nil || *c.Value != want[c.Name] || c.Documentation == nil || !strings.Contains(*c.Documentation, "record") {
			t.Errorf("%s = %v (doc %v)", c.Name, c.Value, c.Documentation)
		}
		delete(want, c.Name)
	}
	if len(want) != 0 {
		t.Errorf("not described: %v", want)
	}
}
