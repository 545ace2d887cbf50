package storage

import (
	"errors"
	"reflect"
	"slices"
	"testing"
)

// TestSourceEntryRule: the entry a mirror's source forwards is taken when
// it agrees with the stored batches (first stored batch firstBase,
// firstEpoch), replaces only entries no stored batch backs, and moves
// the first batch's epoch back at most.
func TestSourceEntryRule(t *testing.T) {
	type e = EpochEntry
	cases := []struct {
		name         string
		have         []EpochEntry
		epoch        int32
		start        int64
		base         int64
		first        int32
		want         []EpochEntry // nil: unchanged
		inconsistent bool
	}{
		{name: "first batch epoch moves back", have: []e{{0, 5}, {1, 8}}, epoch: 0, start: 0, base: 5, first: 0, want: []e{{0, 0}, {1, 8}}},
		{name: "lower epoch before the first batch", have: []e{{1, 5}, {2, 9}}, epoch: 0, start: 0, base: 5, first: 1, want: []e{{0, 0}, {1, 5}, {2, 9}}},
		{name: "already covered", have: []e{{0, 0}, {1, 5}}, epoch: 0, start: 0, base: 5, first: 1},
		{name: "covered by an earlier start", have: []e{{3, 2}}, epoch: 3, start: 4, base: 6, first: 3},
		{name: "history entry replaced", have: []e{{0, 2}, {3, 6}}, epoch: 1, start: 2, base: 6, first: 3, want: []e{{1, 2}, {3, 6}}},
		{name: "history kept below, dropped above", have: []e{{0, 1}, {1, 3}, {2, 4}, {5, 7}}, epoch: 2, start: 3, base: 7, first: 5, want: []e{{0, 1}, {2, 3}, {5, 7}}},
		{name: "epoch above the first batch", have: []e{{0, 5}}, epoch: 1, start: 0, base: 5, first: 0, inconsistent: true},
		{name: "start after the first batch", have: []e{{0, 5}, {1, 8}}, epoch: 0, start: 9, base: 8, first: 1, inconsistent: true},
		{name: "inside the first batch, its epoch", have: []e{{0, 5}}, epoch: 0, start: 6, base: 5, first: 0},
		{name: "overrides the first batch's entry", have: []e{{2, 3}}, epoch: 1, start: 4, base: 4, first: 2, inconsistent: true},
		{name: "lower epoch at the first batch", have: []e{{2, 4}}, epoch: 1, start: 4, base: 4, first: 2, inconsistent: true},
		{name: "negative epoch", have: []e{{2, 4}}, epoch: -1, start: 0, base: 4, first: 2, inconsistent: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustEpochCache(t, tc.have...)
			changed, err := c.AssignFromSource(tc.epoch, tc.start, tc.base, tc.first)
			if tc.inconsistent {
				if !errors.Is(err, ErrEpochInconsistent) || changed {
					t.Fatalf("changed %v err %v, want ErrEpochInconsistent", changed, err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if want == nil {
				want = tc.have
			}
			if changed != (tc.want != nil) {
				t.Fatalf("changed %v", changed)
			}
			if got := c.Entries(); !reflect.DeepEqual(got, want) {
				t.Fatalf("entries %v, want %v", got, want)
			}
		})
	}
}

// TestDeleteRecordsWithEpoch: a log whose first batches are missing (a
// compacted source's, copied at their offsets) answers the forwarded
// epoch at its log start, keeps it across clean and unclean reopening and
// across log-start moves, and refuses an entry that contradicts its
// batches without moving anything.
func TestDeleteRecordsWithEpoch(t *testing.T) {
	fs := NewMemFS()
	l := openLog(t, fs, Config{})
	if _, err := l.DeleteRecordsWithEpoch(0, 0); !errors.Is(err, ErrEpochInconsistent) {
		t.Fatalf("empty log: %v", err)
	}
	if _, err := l.AppendVerbatim(slices.Concat(testBatch(t, 5, 0, 1000, 2, 5), testBatch(t, 8, 1, 1001, 2, 5))); err != nil {
		t.Fatal(err)
	}
	earliest := func(l *Log) int32 {
		e, ok := l.EpochCache().EpochForOffset(l.LogStartOffset())
		if !ok {
			return -1
		}
		return e
	}
	if e := earliest(l); e != -1 {
		t.Fatalf("before the forward: epoch %d at the log start", e)
	}
	for _, bad := range []struct {
		off   int64
		epoch int32
		want  error
	}{{0, 1, ErrEpochInconsistent}, {9, 0, ErrEpochInconsistent}, {11, 0, ErrOffsetOutOfRange}} {
		if _, err := l.DeleteRecordsWithEpoch(bad.off, bad.epoch); !errors.Is(err, bad.want) {
			t.Fatalf("epoch %d at %d: %v, want %v", bad.epoch, bad.off, err, bad.want)
		}
		if l.LogStartOffset() != 0 || !reflect.DeepEqual(l.EpochCache().Entries(), []EpochEntry{{0, 5}, {1, 8}}) {
			t.Fatalf("a refused entry changed the log: start %d, %v", l.LogStartOffset(), l.EpochCache().Entries())
		}
	}
	if low, err := l.DeleteRecordsWithEpoch(0, 0); err != nil || low != 0 || earliest(l) != 0 {
		t.Fatalf("forward: low %d err %v epoch %d", low, err, earliest(l))
	}
	// The log start moves with the entry.
	if low, err := l.DeleteRecordsWithEpoch(3, 0); err != nil || low != 3 {
		t.Fatalf("forward to 3: %d %v", low, err)
	}
	if _, err := l.DeleteRecordsWithEpoch(2, 0); !errors.Is(err, ErrEpochInconsistent) {
		t.Fatalf("below the log start: %v", err)
	}
	want := []EpochEntry{{0, 3}, {1, 8}}
	if got := l.EpochCache().Entries(); !reflect.DeepEqual(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
	// Clean reopen, then a crash after more appends: the checkpoint keeps
	// the entry; recovery's truncations leave it alone.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, fs, Config{})
	if got := l.EpochCache().Entries(); !reflect.DeepEqual(got, want) || earliest(l) != 0 {
		t.Fatalf("reopened: %v", got)
	}
	if _, err := l.AppendVerbatim(testBatch(t, 10, 2, 1002, 1, 5)); err != nil {
		t.Fatal(err)
	}
	l2, err := Open(fs.Crash(CrashProcess, nil), "data/t-0", Config{})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	want = append(want, EpochEntry{2, 10})
	if got := l2.EpochCache().Entries(); !reflect.DeepEqual(got, want) || earliest(l2) != 0 {
		t.Fatalf("after a crash: %v", got)
	}
	// An ordinary log-start move (retention, DeleteRecords) keeps the
	// epoch at the new start; a truncation from the end to inside the
	// first batches' gap keeps the entry below it.
	if _, err := l2.DeleteRecords(4); err != nil {
		t.Fatal(err)
	}
	if earliest(l2) != 0 {
		t.Fatalf("after DeleteRecords(4): %v", l2.EpochCache().Entries())
	}
	if err := l2.Truncate(8); err != nil {
		t.Fatal(err)
	}
	if got := l2.EpochCache().Entries(); !reflect.DeepEqual(got, []EpochEntry{{0, 4}}) {
		t.Fatalf("after Truncate(8): %v", got)
	}
	l2.Close()
}
