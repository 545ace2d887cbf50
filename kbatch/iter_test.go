package kbatch

import (
	"bytes"
	"testing"
)

func testSet(t testing.TB, n int) ([]byte, [][]byte) {
	var set []byte
	var batches [][]byte
	for i := range n {
		b := NewBatch(1000, Record{Value: bytes.Repeat([]byte{byte(i)}, 10*i)})
		b.BaseOffset = int64(i * 5)
		raw, err := Encode(b)
		if err != nil {
			t.Fatal(err)
		}
		set = append(set, raw...)
		batches = append(batches, raw)
	}
	return set, batches
}

func TestBatches(t *testing.T) {
	set, want := testSet(t, 4)
	var got [][]byte
	pos := 0
	it := Batches(set)
	for it.Next() {
		b := it.Batch()
		if it.Pos() != pos || cap(b) != len(b) {
			t.Fatalf("batch %d at %d (want %d), cap %d len %d", len(got), it.Pos(), pos, cap(b), len(b))
		}
		got = append(got, b)
		pos += len(b)
	}
	if len(got) != len(want) || len(it.Rest()) != 0 || it.Pos() != len(set) || it.Next() {
		t.Fatalf("%d batches, rest %d, pos %d", len(got), len(it.Rest()), it.Pos())
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("batch %d differs", i)
		}
	}
	// A torn tail stops the walk where the whole batches end.
	it = Batches(set[:len(set)-1])
	n := 0
	for it.Next() {
		n++
	}
	if n != 3 || it.Pos() != len(set)-len(want[3]) || len(it.Rest()) != len(want[3])-1 {
		t.Fatalf("torn tail: %d batches, pos %d, rest %d", n, it.Pos(), len(it.Rest()))
	}
	// A length below the header size is not a batch.
	bad := bytes.Clone(want[0])
	bad[LengthOffset+3] = HeaderSize - LogOverhead - 1
	if it := Batches(bad); it.Next() {
		t.Fatal("a batch shorter than its header")
	}
}

// FuzzBatches: the walk never panics, yields contiguous batches that tile
// the set up to Pos, each at least a header long and as long as its length
// field, and agrees with Next (the splitter) on every batch.
func FuzzBatches(f *testing.F) {
	set, _ := testSet(f, 3)
	f.Add(set)
	f.Add(set[:len(set)-3])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, set []byte) {
		it := Batches(set)
		pos := 0
		for it.Next() {
			b := it.Batch()
			if it.Pos() != pos || len(b) < HeaderSize || len(b) != LogOverhead+int(Length(b)) || !bytes.Equal(b, set[pos:pos+len(b)]) {
				t.Fatalf("batch at %d (pos %d), %d bytes", it.Pos(), pos, len(b))
			}
			nb, _, err := Next(set[pos:])
			if err != nil || !bytes.Equal(nb, b) {
				t.Fatalf("Next disagrees at %d: %v", pos, err)
			}
			pos += len(b)
		}
		if it.Pos() != pos || len(it.Rest()) != len(set)-pos {
			t.Fatalf("pos %d, walked %d, rest %d of %d", it.Pos(), pos, len(it.Rest()), len(set))
		}
	})
}
