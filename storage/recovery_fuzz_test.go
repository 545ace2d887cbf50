package storage

import (
	"bytes"
	"os"
	"testing"

	"github.com/verbatim-kafka/verbatim/internal/kbatch"
)

// validPrefix returns the batches of b that recovery must keep: whole v2
// batches with a correct CRC and increasing offsets, up to the first one
// that is not.
func validPrefix(b []byte) [][]byte {
	var out [][]byte
	next := int64(0)
	for len(b) >= kbatch.HeaderSize {
		n := int64(kbatch.Length(b))
		if n < kbatch.HeaderSize-kbatch.LogOverhead || int64(len(b)) < kbatch.LogOverhead+n {
			break
		}
		batch := b[:kbatch.LogOverhead+n]
		if kbatch.Magic(batch) != 2 || kbatch.CRC(batch) != kbatch.StoredCRC(batch) || kbatch.LastOffsetDelta(batch) < 0 {
			break
		}
		base := kbatch.BaseOffset(batch)
		last := base + int64(kbatch.LastOffsetDelta(batch))
		if base < next || last > 1<<31-1 {
			break
		}
		out = append(out, batch)
		next = last + 1
		b = b[len(batch):]
	}
	return out
}

// FuzzRecoverSegment writes arbitrary bytes as the only segment of a
// partition and opens it: recovery must not panic, must keep exactly the
// valid whole-batch prefix, serve it unchanged, and accept appends after
// it.
func FuzzRecoverSegment(f *testing.F) {
	b1 := testBatch(f, 0, 1, 100, 2, 10)
	b2 := testBatch(f, 2, 1, 101, 1, 30)
	b3 := testBatch(f, 10, 2, 99, 3, 5)
	good := concat(b1, b2, b3)
	f.Add(good)
	f.Add(good[:len(good)-7])
	f.Add(append(append([]byte(nil), good...), make([]byte, 40)...))
	corrupt := append([]byte(nil), good...)
	corrupt[len(b1)+30] ^= 0xff
	f.Add(corrupt)
	f.Add([]byte{})
	f.Add(make([]byte, 100))
	f.Fuzz(func(t *testing.T, data []byte) {
		fs := NewMemFS()
		dir := "data/t-0"
		if err := fs.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		lf, err := fs.OpenFile(dir+"/"+SegmentFileName(0, ".log"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lf.Write(data); err != nil {
			t.Fatal(err)
		}
		lf.Close()
		l, err := Open(fs, dir, Config{IndexIntervalBytes: 64})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		want := validPrefix(data)
		got := readAllBatches(t, l)
		if len(got) != len(want) {
			t.Fatalf("recovered %d batches, want %d", len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("batch %d differs", i)
			}
		}
		if _, err := l.AppendLeader(testBatch(t, 0, 5, 1, 1, 1), 5, 1); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l2, err := Open(fs, dir, Config{IndexIntervalBytes: 64})
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		if n := len(readAllBatches(t, l2)); n != len(want)+1 {
			t.Fatalf("reopen: %d batches, want %d", n, len(want)+1)
		}
		l2.Close()
	})
}

// FuzzLoadRolledIndexes gives a rolled segment arbitrary .index and
// .timeindex files: opening must not panic, must rebuild inconsistent
// indexes, and reads and timestamp lookups must match a log whose indexes
// are intact.
func FuzzLoadRolledIndexes(f *testing.F) {
	// A reference log with two segments.
	mk := func(t testing.TB) (*MemFS, []byte, []byte) {
		fs := NewMemFS()
		l, err := Open(fs, "data/t-0", Config{SegmentBytes: 1200, IndexIntervalBytes: 100})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 12; i++ {
			if _, err := l.AppendLeader(testBatch(t, 0, 1, int64(1000+(i*37)%11), 2, 60), 1, 1); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		idx, _ := readAll(fs, "data/t-0/"+SegmentFileName(0, ".index"))
		tidx, _ := readAll(fs, "data/t-0/"+SegmentFileName(0, ".timeindex"))
		return fs, idx, tidx
	}
	_, idx, tidx := mk(f)
	f.Add(idx, tidx)
	f.Add([]byte{}, []byte{})
	f.Add(idx[:len(idx)/2*1+3], tidx)
	f.Add(make([]byte, 16), make([]byte, 24))
	f.Fuzz(func(t *testing.T, idx, tidx []byte) {
		fs, _, _ := mk(t)
		ref, err := Open(fs, "data/t-0", Config{SegmentBytes: 1200, IndexIntervalBytes: 100})
		if err != nil {
			t.Fatal(err)
		}
		want := readAllBatches(t, ref)
		var wantTs []TimestampOffset
		for ts := int64(995); ts < 1015; ts++ {
			r, _ := ref.OffsetForTimestamp(ts)
			wantTs = append(wantTs, r)
		}
		ref.Close()
		for name, data := range map[string][]byte{".index": idx, ".timeindex": tidx} {
			fl, err := fs.OpenFile("data/t-0/"+SegmentFileName(0, name), os.O_RDWR|os.O_TRUNC, 0)
			if err != nil {
				t.Fatal(err)
			}
			fl.Write(data)
			fl.Close()
		}
		l, err := Open(fs, "data/t-0", Config{SegmentBytes: 1200, IndexIntervalBytes: 100})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer l.Close()
		got := readAllBatches(t, l)
		if len(got) != len(want) {
			t.Fatalf("%d batches, want %d", len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("batch %d differs", i)
			}
		}
		for i, ts := 0, int64(995); ts < 1015; i, ts = i+1, ts+1 {
			r, _ := l.OffsetForTimestamp(ts)
			if r != wantTs[i] {
				t.Fatalf("timestamp %d: %+v, want %+v", ts, r, wantTs[i])
			}
		}
	})
}
