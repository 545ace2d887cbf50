package storage

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

// testBatch builds a batch of n records with values of valueSize bytes.
func testBatch(t testing.TB, base int64, epoch int32, ts int64, n int, valueSize int) []byte {
	t.Helper()
	recs := make([]kbatch.Record, n)
	for i := range recs {
		v := bytes.Repeat([]byte{byte('a' + i%26)}, valueSize)
		recs[i] = kbatch.Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Key: []byte(fmt.Sprint(i)), Value: v}
	}
	b := kbatch.NewBatch(ts, recs...)
	b.BaseOffset = base
	b.LeaderEpoch = epoch
	return kbatchtest.Encode(t, b)
}

func openLog(t testing.TB, fs FS, cfg Config) *Log {
	t.Helper()
	l, err := Open(fs, "data/t-0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// checkBatches fails t unless got is want, batch for batch and byte for
// byte.
func checkBatches(t testing.TB, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d batches, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("batch %d differs", i)
		}
	}
}

// readAllBatches returns every stored batch from the log start, by
// following Read.
func readAllBatches(t testing.TB, l *Log) [][]byte {
	t.Helper()
	var out [][]byte
	off := l.LogStartOffset()
	for off < l.LogEndOffset() {
		sl, err := l.Read(off, 1<<20)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		if sl.Size == 0 {
			break
		}
		b, err := sl.Bytes(nil)
		if err != nil {
			t.Fatal(err)
		}
		for len(b) > 0 {
			batch, rest, err := kbatch.Next(b)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, batch)
			off = kbatch.BaseOffset(batch) + int64(kbatch.LastOffsetDelta(batch)) + 1
			b = rest
		}
	}
	return out
}

// setSeq rewrites the base sequence of a batch and its CRC.
func setSeq(b []byte, seq int32) {
	b[kbatch.BaseSequenceOffset] = byte(seq >> 24)
	b[kbatch.BaseSequenceOffset+1] = byte(seq >> 16)
	b[kbatch.BaseSequenceOffset+2] = byte(seq >> 8)
	b[kbatch.BaseSequenceOffset+3] = byte(seq)
	kbatch.SetCRC(b)
}

// setBase rewrites the base offset (outside the CRC).
func setBase(b []byte, off int64) { kbatch.SetBaseOffset(b, off) }
