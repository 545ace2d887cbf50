package interop

import (
	"bytes"
	"strings"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// FuzzCutBatches: cutting never panics, the batches and the tail
// reassemble the input prefix they came from, and every batch is as long as
// its length field says.
func FuzzCutBatches(f *testing.F) {
	b1, _ := kbatch.Encode(kbatch.NewBatch(1000, kbatch.Record{Key: []byte("k"), Value: []byte("v")}))
	b2, _ := kbatch.Encode(kbatch.NewBatch(2000, kbatch.Record{Value: []byte("second")}, kbatch.Record{OffsetDelta: 1}))
	f.Add(append(append([]byte{}, b1...), b2...))
	f.Add(append(append([]byte{}, b1...), b2[:30]...))
	f.Add(b1[:11])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, set []byte) {
		batches, tail, err := cutBatches(set)
		var got []byte
		for _, b := range batches {
			if len(b) != kbatch.LogOverhead+int(kbatch.Length(b)) {
				t.Fatalf("batch of %d bytes with length field %d", len(b), kbatch.Length(b))
			}
			got = append(got, b...)
		}
		got = append(got, tail...)
		if !bytes.Equal(got, set) {
			t.Fatalf("batches and tail do not reassemble the input")
		}
		if err == nil && len(tail) > 0 && len(tail) >= kbatch.LogOverhead && kbatch.LogOverhead+int(kbatch.Length(tail)) <= len(tail) {
			t.Fatalf("a whole batch was left in the tail")
		}
	})
}

// FuzzDumpFields: parsing a DumpLogSegments line never panics, and every
// value it returns occurs in the line right after its name.
func FuzzDumpFields(f *testing.F) {
	f.Add("baseOffset: 0 lastOffset: 4 count: 5 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1764000000004 size: 318 magic: 2 compresscodec: none crc: 3355453253 isvalid: true")
	f.Add("| offset: 1 CreateTime: 1764000000001 keySize: 11 valueSize: 33 sequence: -1 headerKeys: [h1,h2] key: plain-key-1 payload: plain-value-1-xxx")
	f.Add("version: 0 producerId: 2001 firstOffset: 58 lastOffset: 61 lastStableOffset: 62")
	f.Add("a: [ b: ]")
	f.Fuzz(func(t *testing.T, line string) {
		for k, v := range dumpFields(line) {
			if (v == "" && k != "payload") || !strings.Contains(line, k+": "+v) {
				t.Fatalf("field %q = %q not found in %q", k, v, line)
			}
		}
	})
}
