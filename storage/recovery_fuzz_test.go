package storage

import (
	"bytes"
	"context"
	"os"
	"slices"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
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
	good := slices.Concat(b1, b2, b3)
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
		checkBatches(t, got, want)
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

// FuzzLoadRolledIndexes damages the .index and .timeindex files of a
// rolled segment. mode 0: the files are cut at cutIdx/cutTidx bytes and
// the range [zeroFrom, zeroFrom+zeroLen) zero-filled (what a crash or a
// torn write does); then reads and timestamp lookups must equal those of
// the intact log. mode 1: the files are replaced by arbitrary bytes; then
// reads must still be exact (offset index entries are verified against the
// log) and a timestamp lookup must return a record at or after the
// timestamp, as Kafka trusts time indexes of flushed segments. Opening
// must never fail or panic.
func FuzzLoadRolledIndexes(f *testing.F) {
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
	f.Add(uint8(0), uint16(len(idx)), uint16(len(tidx)), uint16(0), uint16(0), []byte{}, []byte{})
	f.Add(uint8(0), uint16(len(idx)-3), uint16(len(tidx)-12), uint16(0), uint16(0), []byte{}, []byte{})
	f.Add(uint8(0), uint16(len(idx)), uint16(len(tidx)), uint16(4), uint16(9), []byte{}, []byte{})
	f.Add(uint8(1), uint16(0), uint16(0), uint16(0), uint16(0), idx, tidx)
	f.Add(uint8(1), uint16(0), uint16(0), uint16(0), uint16(0), []byte("0000\x00\x00\x010"), []byte{})
	f.Add(uint8(1), uint16(0), uint16(0), uint16(0), uint16(0), make([]byte, 16), make([]byte, 24))
	// Earlier finds: an index naming a far offset; a truthful but
	// incomplete time index.
	f.Add(uint8(1), uint16(0), uint16(0), uint16(0), uint16(0), []byte("\x00\x00\x00\t\x00\x00\x03\x1c"), []byte("\x00\x00\x00\x00\x00\x00\x03\xed\x00\x00\x00\x03"))
	f.Fuzz(func(t *testing.T, mode uint8, cutIdx, cutTidx, zeroFrom, zeroLen uint16, rawIdx, rawTidx []byte) {
		fs, idx, tidx := mk(t)
		ref, err := Open(fs, "data/t-0", Config{SegmentBytes: 1200, IndexIntervalBytes: 100})
		if err != nil {
			t.Fatal(err)
		}
		want := readAllBatches(t, ref)
		var wantTs []TimestampOffset
		for ts := int64(995); ts < 1015; ts++ {
			r, _ := ref.OffsetForTimestamp(context.Background(), ts)
			wantTs = append(wantTs, r)
		}
		ref.Close()
		damage := func(b []byte, cut uint16) []byte {
			if int(cut) < len(b) {
				b = b[:cut]
			}
			b = append([]byte(nil), b...)
			for i := int(zeroFrom); i < int(zeroFrom)+int(zeroLen) && i < len(b); i++ {
				b[i] = 0
			}
			return b
		}
		exact := mode%2 == 0
		if exact {
			rawIdx, rawTidx = damage(idx, cutIdx), damage(tidx, cutTidx)
		}
		for name, data := range map[string][]byte{".index": rawIdx, ".timeindex": rawTidx} {
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
		checkBatches(t, got, want)
		for i, ts := 0, int64(995); ts < 1015; i, ts = i+1, ts+1 {
			r, err := l.OffsetForTimestamp(context.Background(), ts)
			if exact {
				if r != wantTs[i] {
					t.Fatalf("timestamp %d: %+v, want %+v", ts, r, wantTs[i])
				}
				continue
			}
			if err == nil && (r.Timestamp < ts || r.Offset < wantTs[i].Offset) {
				t.Fatalf("timestamp %d: %+v is before the first match %+v", ts, r, wantTs[i])
			}
		}
	})
}

// FuzzRecoverDamagedSegment builds a valid segment from fuzz-chosen
// batches (sizes, gaps, epochs, codecs), damages it as crashes and bad
// disks do (cut at a byte, a zero-filled range, one flipped byte) and
// checks that recovery keeps exactly the valid prefix.
func FuzzRecoverDamagedSegment(f *testing.F) {
	f.Add([]byte{3, 10, 200, 0, 5, 1}, uint16(500), uint16(0), uint16(0), uint16(0), byte(0))
	f.Add([]byte{1, 1, 1, 1, 1, 1, 1, 1}, uint16(9999), uint16(100), uint16(30), uint16(0), byte(0))
	f.Add([]byte{7, 0, 90, 3, 2, 2, 4, 4}, uint16(9999), uint16(0), uint16(0), uint16(150), byte(0x40))
	f.Fuzz(func(t *testing.T, shape []byte, cut, zeroFrom, zeroLen, flipAt uint16, flip byte) {
		if len(shape) > 64 {
			shape = shape[:64]
		}
		var data []byte
		next := int64(0)
		for i := 0; i+1 < len(shape); i += 2 {
			n := 1 + int(shape[i]%5)
			gap := int64(shape[i+1] % 4)
			b := kbatch.NewBatch(1000+int64(i), func() []kbatch.Record {
				r := make([]kbatch.Record, n)
				for j := range r {
					r[j] = kbatch.Record{OffsetDelta: int32(j), Value: bytes.Repeat([]byte{shape[i]}, int(shape[i+1]))}
				}
				return r
			}()...)
			b.BaseOffset = next + gap
			b.LeaderEpoch = int32(shape[i] % 3)
			b.Attributes = int16(shape[i+1] % 5) // codec
			enc := kbatchtest.Encode(t, b)
			data = append(data, enc...)
			next = b.BaseOffset + int64(n)
		}
		if int(cut) < len(data) {
			data = data[:cut]
		}
		for i := int(zeroFrom); i < int(zeroFrom)+int(zeroLen) && i < len(data); i++ {
			data[i] = 0
		}
		if int(flipAt) < len(data) {
			data[flipAt] ^= flip
		}
		fs := NewMemFS()
		dir := "data/t-0"
		fs.MkdirAll(dir, 0o755)
		lf, err := fs.OpenFile(dir+"/"+SegmentFileName(0, ".log"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		lf.Write(data)
		lf.Close()
		l, err := Open(fs, dir, Config{IndexIntervalBytes: 64})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer l.Close()
		want := validPrefix(data)
		got := readAllBatches(t, l)
		checkBatches(t, got, want)
		// Timestamp lookups work on whatever was recovered.
		for _, b := range want {
			r, err := l.OffsetForTimestamp(context.Background(), kbatch.MaxTimestamp(b))
			if err != nil || r.Timestamp < kbatch.MaxTimestamp(b) {
				t.Fatalf("timestamp %d: %+v %v", kbatch.MaxTimestamp(b), r, err)
			}
		}
	})
}
