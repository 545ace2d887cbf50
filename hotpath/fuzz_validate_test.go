package hotpath

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// fuzzOptions derives validation options from one fuzzed byte.
func fuzzOptions(flags byte) *Options {
	o := &Options{Mode: Normal, Topic: DefaultTopicConfig(), ProduceVersion: 11, NowMs: corpusNowMs}
	if flags&1 != 0 {
		o.Mode = Verbatim
	}
	o.Topic.Compacted = flags&2 != 0
	o.Topic.LogAppendTime = flags&4 != 0
	if flags&8 != 0 {
		// A small per-record limit, so that fuzzed compressed batches
		// reach it (the per-batch cap has its own tests).
		o.Topic.MaxDecompressedRecordBytes = 64
	}
	if flags&16 != 0 {
		o.ProduceVersion = 6
		o.Topic.TimestampBeforeMaxMs = 60_000
	}
	if flags&32 != 0 {
		o.Topic.MaxMessageBytes = 300
	}
	return o
}

// fixCRCs recomputes the CRC of every complete batch so that mutations reach
// the checks behind the CRC.
func fixCRCs(set []byte) {
	for rest := set; ; {
		b, r, err := kbatch.Next(rest)
		if err != nil || len(b) < kbatch.HeaderSize {
			return
		}
		kbatch.SetCRC(b)
		rest = r
	}
}

// FuzzValidate: Validate never panics, agrees with the kmsg/kbin reference
// on accept/reject and on the error code, leaves verbatim input untouched,
// and in normal mode stores exactly the MaxTimestamp/attributes Kafka would,
// with a valid CRC.
func FuzzValidate(f *testing.F) {
	corpus := buildCorpus(f)
	for i, e := range corpus {
		f.Add(withBase(e.b, 10, 1), byte(1), false)
		if e.client {
			f.Add(append([]byte(nil), e.b...), byte(i%64)&^1, i%2 == 0)
		}
	}
	f.Add(verbatimSet(corpus[:6], 0), byte(1), true)
	// Batches of real Kafka 4.4 segments (see kafka44_test.go), one of
	// each distinct attributes value.
	files, _ := filepath.Glob(filepath.Join("..", "cmd", "verbatim", "testdata", "kafka-4.4", "*.log"))
	seen := map[int16]bool{}
	for _, name := range files {
		seg, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for rest := seg; len(rest) > 0; {
			b, r, err := kbatch.Next(rest)
			if err != nil {
				break
			}
			rest = r
			if a := kbatch.Attributes(b); !seen[a] {
				seen[a] = true
				f.Add(bytes.Clone(b), byte(1), false)
			}
		}
	}
	f.Fuzz(func(t *testing.T, set []byte, flags byte, fixCRC bool) {
		if fixCRC {
			fixCRCs(set)
		}
		o := fuzzOptions(flags)
		orig := append([]byte(nil), set...)
		refCode, wantMax, wantAttrs := refValidate(append([]byte(nil), set...), o)
		var res Result
		err := Validate(set, o, &res)
		gotCode := int16(0)
		if err != nil {
			he, ok := err.(*Error)
			if !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			gotCode = he.Code
			if !bytes.Equal(set, orig) {
				t.Fatal("a rejected set was modified")
			}
		}
		if gotCode != refCode {
			t.Fatalf("mode %s flags %08b: Validate code %d (%v), reference %d", o.Mode, flags, gotCode, err, refCode)
		}
		if err != nil {
			return
		}
		if o.Mode == Verbatim {
			if !bytes.Equal(set, orig) {
				t.Fatal("verbatim mode modified the set")
			}
			return
		}
		if kbatch.MaxTimestamp(set) != wantMax || kbatch.Attributes(set) != wantAttrs {
			t.Fatalf("stored max %d attrs %x, reference max %d attrs %x", kbatch.MaxTimestamp(set), kbatch.Attributes(set), wantMax, wantAttrs)
		}
		if kbatch.CRC(set) != kbatch.StoredCRC(set) {
			t.Fatal("stored CRC invalid after patching")
		}
		if !bytes.Equal(set[kbatch.HeaderSize:], orig[kbatch.HeaderSize:]) {
			t.Fatal("normal mode changed record bytes")
		}
	})
}
