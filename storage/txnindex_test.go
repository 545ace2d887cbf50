package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// handTxnEntry builds an entry field by field, independently of
// AppendAbortedTxn.
func handTxnEntry(version int16, pid, first, last, lso int64) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.BigEndian, version)
	binary.Write(&b, binary.BigEndian, pid)
	binary.Write(&b, binary.BigEndian, first)
	binary.Write(&b, binary.BigEndian, last)
	binary.Write(&b, binary.BigEndian, lso)
	return b.Bytes()
}

func TestTxnIndexEntryLayout(t *testing.T) {
	got := AppendAbortedTxn(nil, AbortedTxn{ProducerID: 7, FirstOffset: 100, LastOffset: 150, LastStableOffset: 151})
	want := handTxnEntry(0, 7, 100, 150, 151)
	if !bytes.Equal(got, want) || len(got) != TxnIndexEntrySize {
		t.Fatalf("entry %x, want %x", got, want)
	}
}

func TestTxnIndexAppendLoad(t *testing.T) {
	fsys := newStateTestFS()
	x, err := OpenTxnIndex(fsys, "p/00000000000000000100.txnindex", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(fsys.names()) != 0 {
		t.Fatalf("file created before the first append: %v", fsys.names())
	}
	txns := []AbortedTxn{{1, 100, 105, 106}, {2, 103, 110, 111}, {1, 120, 130, 125}}
	for _, tx := range txns {
		if err := x.Append(tx); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	data, _ := fsys.read("p/00000000000000000100.txnindex")
	var want []byte
	for _, tx := range txns {
		want = append(want, handTxnEntry(0, tx.ProducerID, tx.FirstOffset, tx.LastOffset, tx.LastStableOffset)...)
	}
	if !bytes.Equal(data, want) {
		t.Fatalf("file %x\nwant %x", data, want)
	}
	// Not increasing last offset: refused, file unchanged.
	if err := x.Append(AbortedTxn{3, 125, 130, 131}); err == nil {
		t.Fatal("append with non-increasing last offset accepted")
	}
	if err := x.Append(AbortedTxn{3, 140, 135, 141}); err == nil {
		t.Fatal("append with first > last accepted")
	}
	x.Close()

	y, err := OpenTxnIndex(fsys, "p/00000000000000000100.txnindex", 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := y.Entries(); !reflect.DeepEqual(got, txns) {
		t.Fatalf("loaded %v", got)
	}
	if err := y.SanityCheck(); err != nil {
		t.Fatal(err)
	}
	// Appending after reopen continues at the end.
	if err := y.Append(AbortedTxn{4, 140, 150, 151}); err != nil {
		t.Fatal(err)
	}
	data, _ = fsys.read("p/00000000000000000100.txnindex")
	if len(data) != 4*TxnIndexEntrySize || !bytes.Equal(data[3*TxnIndexEntrySize:], handTxnEntry(0, 4, 140, 150, 151)) {
		t.Fatalf("append after reopen: %x", data)
	}
}

func TestTxnIndexLoadErrors(t *testing.T) {
	good := append(handTxnEntry(0, 1, 10, 20, 21), handTxnEntry(0, 2, 15, 30, 31)...)
	cases := []struct {
		name string
		data []byte
		msg  string
	}{
		{"partial entry", good[:TxnIndexEntrySize+10], "partial entry of 10 bytes at position 34"},
		{"tiny file", good[:3], "partial entry of 3 bytes at position 0"},
		{"unknown version", append(append([]byte{}, good...), handTxnEntry(1, 3, 40, 50, 51)...), "unexpected entry version 1 at position 68"},
	}
	for _, tc := range cases {
		fsys := newStateTestFS()
		fsys.write("x.txnindex", tc.data)
		_, err := OpenTxnIndex(fsys, "x.txnindex", 0)
		if !errors.Is(err, ErrCorruptTxnIndex) || !strings.Contains(err.Error(), tc.msg) {
			t.Fatalf("%s: %v (want %q)", tc.name, err, tc.msg)
		}
	}
}

func TestTxnIndexSanityCheck(t *testing.T) {
	cases := []struct {
		name string
		data []byte
		msg  string
	}{
		{"last offset below segment base", handTxnEntry(0, 1, 10, 20, 21), "less than the segment base offset 50"},
		{"first after last", handTxnEntry(0, 1, 90, 60, 91), "first offset 90 after last offset 60"},
		{"not increasing", append(handTxnEntry(0, 1, 50, 70, 71), handTxnEntry(0, 2, 55, 70, 71)...), "does not increase"},
	}
	for _, tc := range cases {
		fsys := newStateTestFS()
		fsys.write("x.txnindex", tc.data)
		x, err := OpenTxnIndex(fsys, "x.txnindex", 50)
		if err != nil {
			t.Fatal(err)
		}
		if err := x.SanityCheck(); !errors.Is(err, ErrCorruptTxnIndex) || !strings.Contains(err.Error(), tc.msg) {
			t.Fatalf("%s: %v", tc.name, err)
		}
	}
}

func TestTxnIndexTruncate(t *testing.T) {
	fsys := newStateTestFS()
	x, _ := OpenTxnIndex(fsys, "x.txnindex", 0)
	for _, tx := range []AbortedTxn{{1, 0, 10, 11}, {2, 5, 20, 21}, {3, 15, 30, 31}} {
		if err := x.Append(tx); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.TruncateTo(21); err != nil { // keeps last offsets < 21
		t.Fatal(err)
	}
	if got := x.Entries(); len(got) != 2 || got[1].LastOffset != 20 {
		t.Fatalf("after TruncateTo(21): %v", got)
	}
	if err := x.TruncateTo(20); err != nil {
		t.Fatal(err)
	}
	data, _ := fsys.read("x.txnindex")
	if len(data) != TxnIndexEntrySize || x.Len() != 1 {
		t.Fatalf("after TruncateTo(20): %d bytes, %d entries", len(data), x.Len())
	}
	// An entry can be appended again after truncation.
	if err := x.Append(AbortedTxn{4, 12, 25, 26}); err != nil {
		t.Fatal(err)
	}
	if err := x.Reset(); err != nil {
		t.Fatal(err)
	}
	data, _ = fsys.read("x.txnindex")
	if len(data) != 0 || x.Len() != 0 {
		t.Fatalf("after Reset: %d bytes", len(data))
	}
	// Truncating a never-written index creates nothing.
	fsys2 := newStateTestFS()
	y, _ := OpenTxnIndex(fsys2, "y.txnindex", 0)
	if err := y.TruncateTo(5); err != nil {
		t.Fatal(err)
	}
	if len(fsys2.names()) != 0 {
		t.Fatalf("truncate created %v", fsys2.names())
	}
}

func TestTxnIndexAppendWriteError(t *testing.T) {
	fsys := newStateTestFS()
	x, _ := OpenTxnIndex(fsys, "x.txnindex", 0)
	if err := x.Append(AbortedTxn{1, 0, 10, 11}); err != nil {
		t.Fatal(err)
	}
	fsys.failOp["write"] = errors.New("injected ENOSPC")
	if err := x.Append(AbortedTxn{2, 5, 20, 21}); err == nil || !strings.Contains(err.Error(), "ENOSPC") {
		t.Fatalf("err %v", err)
	}
	// The half-written entry was cut off: the file still loads.
	y, err := OpenTxnIndex(fsys, "x.txnindex", 0)
	if err != nil {
		t.Fatal(err)
	}
	if y.Len() != 1 || x.Len() != 1 {
		t.Fatalf("entries after failed append: file %d, memory %d", y.Len(), x.Len())
	}
	if err := x.Append(AbortedTxn{2, 5, 20, 21}); err != nil {
		t.Fatalf("append after space is back: %v", err)
	}
}

// The cases mirror Kafka's collectAbortedTxns contract: overlap with
// [fetchOffset, upperBound) and early completion on the LSO.
func TestTxnIndexCollectAborted(t *testing.T) {
	fsys := newStateTestFS()
	x, _ := OpenTxnIndex(fsys, "x.txnindex", 0)
	txns := []AbortedTxn{
		{ProducerID: 0, FirstOffset: 0, LastOffset: 10, LastStableOffset: 11},
		{ProducerID: 1, FirstOffset: 5, LastOffset: 15, LastStableOffset: 13},
		{ProducerID: 2, FirstOffset: 18, LastOffset: 35, LastStableOffset: 25},
		{ProducerID: 3, FirstOffset: 32, LastOffset: 50, LastStableOffset: 40},
	}
	for _, tx := range txns {
		if err := x.Append(tx); err != nil {
			t.Fatal(err)
		}
	}
	A, B, C, D := txns[0], txns[1], txns[2], txns[3]
	cases := []struct {
		fetch, upper int64
		want         []AbortedTxn
		complete     bool
	}{
		{0, 1, []AbortedTxn{A}, true},      // A's LSO 11 >= 1 stops the scan
		{0, 11, []AbortedTxn{A}, true},     // 11 >= 11
		{0, 12, []AbortedTxn{A, B}, true},  // B's LSO 13 >= 12
		{11, 14, []AbortedTxn{B}, true},    // A ended before 11; C starts at 18, C's LSO 25 stops
		{16, 20, []AbortedTxn{C}, true},    // C's LSO 25 >= 20
		{16, 26, []AbortedTxn{C}, true},    // D starts at 32 (not < 26) but its LSO 40 stops
		{36, 100, []AbortedTxn{D}, false},  // C ended at 35; nothing reaches 100
		{60, 100, nil, false},              // all ended before 60
		{0, 1000, txns, false},             // everything, incomplete
		{10, 11, []AbortedTxn{A}, true},    // last offset == fetch offset overlaps
		{33, 33, []AbortedTxn{C, D}, true}, // empty range still reports overlapping entries, as Kafka does
		{15, 18, []AbortedTxn{B}, true},    // C starts at 18, not < 18
		{16, 19, []AbortedTxn{C}, true},    // 18 < 19
		{51, 60, nil, false},               // after everything
		{0, 0, nil, true},                  // A's LSO 11 >= 0
		{35, 36, []AbortedTxn{C, D}, true}, // D's LSO 40 >= 36
	}
	for _, tc := range cases {
		got, complete := x.CollectAborted(tc.fetch, tc.upper, nil)
		if !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("CollectAborted(%d,%d) = %v, want %v", tc.fetch, tc.upper, got, tc.want)
		}
		if complete != tc.complete {
			t.Fatalf("CollectAborted(%d,%d) complete=%v want %v", tc.fetch, tc.upper, complete, tc.complete)
		}
	}
	// dst is appended to, not overwritten.
	prev := []AbortedTxn{{ProducerID: 99}}
	got, _ := x.CollectAborted(0, 1, prev)
	if len(got) != 2 || got[0].ProducerID != 99 || got[1] != A {
		t.Fatalf("append to dst: %v", got)
	}
}

func TestTxnIndexRenameDelete(t *testing.T) {
	fsys := newStateTestFS()
	x, _ := OpenTxnIndex(fsys, "a.txnindex", 0)
	if err := x.Rename("a.txnindex.deleted"); err != nil { // never written: fine
		t.Fatal(err)
	}
	if err := x.Append(AbortedTxn{1, 0, 1, 2}); err != nil {
		t.Fatal(err)
	}
	if x.Name() != "a.txnindex.deleted" {
		t.Fatal(x.Name())
	}
	if err := x.Delete(); err != nil {
		t.Fatal(err)
	}
	if n := fsys.names(); len(n) != 0 {
		t.Fatalf("left %v", n)
	}
}

func FuzzTxnIndexLoad(f *testing.F) {
	f.Add(handTxnEntry(0, 1, 10, 20, 21), int64(0))
	f.Add(append(handTxnEntry(0, 1, 10, 20, 21), handTxnEntry(0, 2, 15, 30, 31)...), int64(15))
	f.Add(handTxnEntry(1, 1, 10, 20, 21), int64(0))
	f.Add(handTxnEntry(0, 1, 10, 20, 21)[:20], int64(0))
	f.Add([]byte{}, int64(0))
	f.Fuzz(func(t *testing.T, b []byte, base int64) {
		fsys := newStateTestFS()
		fsys.write("x.txnindex", b)
		x, err := OpenTxnIndex(fsys, "x.txnindex", base)
		if err != nil {
			if !errors.Is(err, ErrCorruptTxnIndex) {
				t.Fatalf("error does not wrap ErrCorruptTxnIndex: %v", err)
			}
			return
		}
		if len(b)%TxnIndexEntrySize != 0 {
			t.Fatalf("accepted %d bytes", len(b))
		}
		entries := x.Entries()
		var re []byte
		for _, e := range entries {
			re = AppendAbortedTxn(re, e)
		}
		if !bytes.Equal(re, b) {
			t.Fatal("entries do not re-encode to the file")
		}
		if err := x.SanityCheck(); err != nil && !errors.Is(err, ErrCorruptTxnIndex) {
			t.Fatalf("sanity error does not wrap ErrCorruptTxnIndex: %v", err)
		}
		// Queries never panic and return a subset in order.
		got, _ := x.CollectAborted(base, base+100, nil)
		if len(got) > len(entries) {
			t.Fatal("collected more than present")
		}
		if err := x.TruncateTo(base + 50); err != nil {
			t.Fatal(err)
		}
		for _, e := range x.Entries() {
			if e.LastOffset >= base+50 {
				t.Fatalf("entry %v survived TruncateTo(%d)", e, base+50)
			}
		}
	})
}

// A read_committed fetch composes the indexes of the segment holding the
// fetch offset and the following ones until an entry's LSO reaches the
// upper bound (Kafka's collectAbortedTransactions). A transaction whose
// data is in the fetched range can be aborted in a later segment whose base
// is above the upper bound: only that segment's index knows it, so the
// composition must not stop at segments starting past the upper bound.
func TestTxnIndexCollectAcrossSegments(t *testing.T) {
	fsys := newStateTestFS()
	seg0, _ := OpenTxnIndex(fsys, "00000000000000000000.txnindex", 0)
	seg1, _ := OpenTxnIndex(fsys, "00000000000000000100.txnindex", 100)
	seg2, _ := OpenTxnIndex(fsys, "00000000000000000200.txnindex", 200)
	// Producer 1's transaction starts at 5 and is aborted at 150; producer
	// 2's starts at 160, aborted at 210 with nothing open after it.
	if err := seg1.Append(AbortedTxn{ProducerID: 1, FirstOffset: 5, LastOffset: 150, LastStableOffset: 151}); err != nil {
		t.Fatal(err)
	}
	if err := seg2.Append(AbortedTxn{ProducerID: 2, FirstOffset: 160, LastOffset: 210, LastStableOffset: 211}); err != nil {
		t.Fatal(err)
	}
	collect := func(from, upTo int64) []AbortedTxn {
		var out []AbortedTxn
		for _, x := range []*TxnIndex{seg0, seg1, seg2} {
			if x.BaseOffset()+100 <= from { // the floor segment of from starts the search
				continue
			}
			var complete bool
			out, complete = x.CollectAborted(from, upTo, out)
			if complete {
				break
			}
		}
		return out
	}
	got := collect(0, 50) // fetched bytes [0, 50) hold producer 1's records
	if len(got) != 1 || got[0].ProducerID != 1 {
		t.Fatalf("fetch [0,50): %v", got)
	}
	if _, complete := seg0.CollectAborted(0, 50, nil); complete {
		t.Fatal("segment 0 alone claims completeness")
	}
	// Producer 1's LSO 151 >= 120 ends the search in segment 1.
	if got := collect(110, 120); len(got) != 1 || got[0].ProducerID != 1 {
		t.Fatalf("fetch [110,120): %v", got)
	}
	if got := collect(155, 300); len(got) != 1 || got[0].ProducerID != 2 {
		t.Fatalf("fetch [155,300): %v", got)
	}
}
