package storage

import (
	"errors"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

func mustEpochCache(t *testing.T, entries ...EpochEntry) *EpochCache {
	t.Helper()
	c, err := OpenEpochCache(nil, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, err := c.Assign(e.Epoch, e.StartOffset); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Entries(); !reflect.DeepEqual(got, entries) && len(entries) > 0 {
		t.Fatalf("setup: entries %v, want %v", got, entries)
	}
	return c
}

// The cases follow the documented branches of Kafka's endOffsetFor and the
// scenarios of its LeaderEpochFileCacheTest.
func TestEpochCacheEndOffsetFor(t *testing.T) {
	const leo = 100
	cases := []struct {
		name      string
		entries   []EpochEntry
		requested int32
		epoch     int32
		end       int64
	}{
		{"empty cache", nil, 0, UndefinedEpoch, UndefinedEpochOffset},
		{"empty cache, undefined epoch", nil, UndefinedEpoch, UndefinedEpoch, UndefinedEpochOffset},
		{"undefined epoch", []EpochEntry{{2, 6}}, UndefinedEpoch, UndefinedEpoch, UndefinedEpochOffset},
		{"latest epoch returns log end", []EpochEntry{{2, 6}, {5, 20}}, 5, 5, leo},
		{"only epoch returns log end", []EpochEntry{{2, 6}}, 2, 2, leo},
		{"above latest epoch", []EpochEntry{{2, 6}, {5, 20}}, 6, UndefinedEpoch, UndefinedEpochOffset},
		{"below first epoch", []EpochEntry{{2, 6}, {5, 20}}, 1, 1, 6},
		{"below first epoch, zero", []EpochEntry{{2, 6}, {5, 20}}, 0, 0, 6},
		{"exact earlier epoch", []EpochEntry{{2, 6}, {5, 20}}, 2, 2, 20},
		{"between epochs returns floor epoch and next start", []EpochEntry{{2, 6}, {5, 20}, {9, 40}}, 4, 2, 20},
		{"between later epochs", []EpochEntry{{2, 6}, {5, 20}, {9, 40}}, 7, 5, 40},
		{"exact middle epoch", []EpochEntry{{2, 6}, {5, 20}, {9, 40}}, 5, 5, 40},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustEpochCache(t, tc.entries...)
			e, off := c.EndOffsetFor(tc.requested, leo)
			if e != tc.epoch || off != tc.end {
				t.Fatalf("EndOffsetFor(%d) = (%d, %d), want (%d, %d)", tc.requested, e, off, tc.epoch, tc.end)
			}
		})
	}
}

func TestEpochCacheAssign(t *testing.T) {
	type step struct {
		epoch   int32
		offset  int64
		changed bool
	}
	cases := []struct {
		name  string
		steps []step
		want  []EpochEntry
		ign   int64
	}{
		{"first entry", []step{{1, 0, true}}, []EpochEntry{{1, 0}}, 0},
		{"same epoch later offset is a no-op", []step{{1, 0, true}, {1, 5, false}, {1, 9, false}}, []EpochEntry{{1, 0}}, 0},
		{"higher epochs append", []step{{1, 0, true}, {3, 5, true}, {4, 9, true}}, []EpochEntry{{1, 0}, {3, 5}, {4, 9}}, 0},
		{"lower epoch is ignored", []step{{1, 0, true}, {3, 5, true}, {2, 9, false}}, []EpochEntry{{1, 0}, {3, 5}}, 1},
		{"lower epoch at same offset is ignored", []step{{3, 5, true}, {2, 5, false}}, []EpochEntry{{3, 5}}, 1},
		{"negative epoch is ignored", []step{{1, 0, true}, {-1, 5, false}}, []EpochEntry{{1, 0}}, 0},
		{"negative offset is ignored", []step{{1, -1, false}}, nil, 0},
		{"latest epoch moved back", []step{{1, 0, true}, {3, 10, true}, {3, 7, true}}, []EpochEntry{{1, 0}, {3, 7}}, 0},
		{"latest epoch moved back drops entries at or after", []step{{1, 5, true}, {3, 10, true}, {3, 4, true}}, []EpochEntry{{3, 4}}, 0},
		{"higher epoch at lower offset drops conflicting entries", []step{{1, 0, true}, {3, 10, true}, {5, 8, true}}, []EpochEntry{{1, 0}, {5, 8}}, 0},
		{"higher epoch at the same offset replaces (leader elected without writes)", []step{{1, 0, true}, {3, 10, true}, {4, 10, true}}, []EpochEntry{{1, 0}, {4, 10}}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustEpochCache(t)
			for i, s := range tc.steps {
				changed, err := c.Assign(s.epoch, s.offset)
				if err != nil {
					t.Fatal(err)
				}
				if changed != s.changed {
					t.Fatalf("step %d Assign(%d,%d) changed=%v, want %v", i, s.epoch, s.offset, changed, s.changed)
				}
			}
			if got := c.Entries(); !reflect.DeepEqual(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
				t.Fatalf("entries %v, want %v", got, tc.want)
			}
			if got := c.IgnoredAssignments(); got != tc.ign {
				t.Fatalf("ignored %d, want %d", got, tc.ign)
			}
		})
	}
}

func TestEpochCacheTruncateFromEnd(t *testing.T) {
	base := []EpochEntry{{2, 6}, {3, 8}, {4, 11}}
	cases := []struct {
		end  int64
		want []EpochEntry
	}{
		{12, base},                         // after the latest start: nothing
		{11, []EpochEntry{{2, 6}, {3, 8}}}, // exactly the latest start: removed
		{9, []EpochEntry{{2, 6}, {3, 8}}},
		{8, []EpochEntry{{2, 6}}},
		{7, []EpochEntry{{2, 6}}},
		{6, nil},
		{0, nil},
		{-1, base}, // undefined: nothing
	}
	for _, tc := range cases {
		c := mustEpochCache(t, base...)
		if err := c.TruncateFromEnd(tc.end); err != nil {
			t.Fatal(err)
		}
		if got := c.Entries(); !reflect.DeepEqual(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
			t.Fatalf("TruncateFromEnd(%d): %v, want %v", tc.end, got, tc.want)
		}
	}
}

func TestEpochCacheTruncateFromStart(t *testing.T) {
	base := []EpochEntry{{2, 6}, {3, 8}, {4, 11}}
	cases := []struct {
		start int64
		want  []EpochEntry
	}{
		{5, base}, // before the first entry
		{6, base}, // exactly the first start: kept
		{7, []EpochEntry{{2, 7}, {3, 8}, {4, 11}}}, // first entry moved to the start
		{8, []EpochEntry{{3, 8}, {4, 11}}},         // exclusive: entry at 8 kept
		{9, []EpochEntry{{3, 9}, {4, 11}}},
		{11, []EpochEntry{{4, 11}}},
		{12, []EpochEntry{{4, 12}}},
		{100, []EpochEntry{{4, 100}}},
		{-1, base},
	}
	for _, tc := range cases {
		c := mustEpochCache(t, base...)
		if err := c.TruncateFromStart(tc.start); err != nil {
			t.Fatal(err)
		}
		if got := c.Entries(); !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("TruncateFromStart(%d): %v, want %v", tc.start, got, tc.want)
		}
	}
}

func TestEpochCacheEpochForOffset(t *testing.T) {
	c := mustEpochCache(t, EpochEntry{2, 6}, EpochEntry{3, 8}, EpochEntry{4, 11})
	cases := []struct {
		off   int64
		epoch int32
		ok    bool
	}{{5, UndefinedEpoch, false}, {6, 2, true}, {7, 2, true}, {8, 3, true}, {10, 3, true}, {11, 4, true}, {1000, 4, true}}
	for _, tc := range cases {
		e, ok := c.EpochForOffset(tc.off)
		if e != tc.epoch || ok != tc.ok {
			t.Fatalf("EpochForOffset(%d) = %d,%v want %d,%v", tc.off, e, ok, tc.epoch, tc.ok)
		}
	}
	if e, ok := c.LatestEpoch(); e != 4 || !ok {
		t.Fatalf("LatestEpoch = %d,%v", e, ok)
	}
	if e, ok := c.EarliestEntry(); e != (EpochEntry{2, 6}) || !ok {
		t.Fatalf("EarliestEntry = %v,%v", e, ok)
	}
	if e, ok := c.Entry(3); e != (EpochEntry{3, 8}) || !ok {
		t.Fatalf("Entry(3) = %v,%v", e, ok)
	}
	if _, ok := c.Entry(5); ok {
		t.Fatal("Entry(5) found")
	}
	empty := mustEpochCache(t)
	if _, ok := empty.LatestEpoch(); ok {
		t.Fatal("empty cache has a latest epoch")
	}
}

func TestEpochCheckpointFormat(t *testing.T) {
	got := string(AppendEpochCheckpoint(nil, []EpochEntry{{0, 0}, {3, 120}, {7, 4096}}))
	want := "0\n3\n0 0\n3 120\n7 4096\n"
	if got != want {
		t.Fatalf("checkpoint %q, want %q", got, want)
	}
	if got := string(AppendEpochCheckpoint(nil, nil)); got != "0\n0\n" {
		t.Fatalf("empty checkpoint %q", got)
	}
}

func TestEpochCheckpointParse(t *testing.T) {
	ok := []struct {
		in   string
		want []EpochEntry
	}{
		{"0\n0\n", []EpochEntry{}},
		{"0\n2\n1 0\n4 50\n", []EpochEntry{{1, 0}, {4, 50}}},
		{"0\n1\n1  10", []EpochEntry{{1, 10}}},   // no final newline, several spaces
		{"0\n1\n1\t10\n", []EpochEntry{{1, 10}}}, // any whitespace separates
	}
	for _, tc := range ok {
		got, err := ParseEpochCheckpoint([]byte(tc.in))
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("%q: %v, want %v", tc.in, got, tc.want)
		}
	}
	bad := []struct{ in, msg string }{
		{"", "missing"},
		{"0\n", "missing"},
		{"1\n0\n", "unrecognised version 1"},
		{"x\n0\n", "version"},
		{"0\n-1\n", "invalid entry count"},
		{"0\n2\n1 0\n", "expected 2 entries but found only 1"},
		{"0\n1\n1 0\n2 5\n", "expected 1 entries but found more"},
		{"0\n1\n1 0 9\n", "expected 2 fields"},
		{"0\n1\n1\n", "expected 2 fields"},
		{"0\n1\na 0\n", "malformed"},
		{"0\n1\n1 -5\n", "negative"},
		{"0\n2\n3 10\n2 20\n", "does not follow"},
		{"0\n2\n3 10\n4 10\n", "does not follow"},
		{"0\n1\n99999999999 0\n", "malformed"},
	}
	for _, tc := range bad {
		_, err := ParseEpochCheckpoint([]byte(tc.in))
		if err == nil || !errors.Is(err, ErrCorruptCheckpoint) || !strings.Contains(err.Error(), tc.msg) {
			t.Fatalf("%q: error %v, want ErrCorruptCheckpoint mentioning %q", tc.in, err, tc.msg)
		}
	}
}

func TestEpochCachePersistence(t *testing.T) {
	fsys := newStateTestFS()
	c, err := OpenEpochCache(fsys, "p")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fsys.read("p/leader-epoch-checkpoint"); ok {
		t.Fatal("checkpoint written before any change")
	}
	for _, e := range []EpochEntry{{1, 0}, {1, 10}, {4, 30}, {6, 90}} {
		if _, err := c.Assign(e.Epoch, e.StartOffset); err != nil {
			t.Fatal(err)
		}
	}
	data, _ := fsys.read("p/leader-epoch-checkpoint")
	if string(data) != "0\n3\n1 0\n4 30\n6 90\n" {
		t.Fatalf("file %q", data)
	}
	// Atomic write: tmp file synced, renamed, directory synced; no tmp left.
	ops := fsys.opsMatching("")
	wantSeq := []string{"sync p/leader-epoch-checkpoint.tmp", "rename p/leader-epoch-checkpoint.tmp p/leader-epoch-checkpoint", "syncdir p"}
	if !containsInOrder(ops, wantSeq) {
		t.Fatalf("operations %v do not contain %v in order", ops, wantSeq)
	}
	if _, ok := fsys.read("p/leader-epoch-checkpoint.tmp"); ok {
		t.Fatal("temporary file left behind")
	}
	if err := c.TruncateFromStart(40); err != nil {
		t.Fatal(err)
	}
	if err := c.TruncateFromEnd(95); err != nil {
		t.Fatal(err)
	}
	c2, err := OpenEpochCache(fsys, "p")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c2.Entries(), []EpochEntry{{4, 40}, {6, 90}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("reloaded %v, want %v", got, want)
	}
	if err := c2.Clear(); err != nil {
		t.Fatal(err)
	}
	data, _ = fsys.read("p/leader-epoch-checkpoint")
	if string(data) != "0\n0\n" {
		t.Fatalf("cleared file %q", data)
	}

	// Corruption is reported, not repaired silently.
	fsys.write("p/leader-epoch-checkpoint", []byte("0\n2\n1 0\n"))
	if _, err := OpenEpochCache(fsys, "p"); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Fatalf("open corrupt: %v", err)
	}
}

func TestEpochCacheWriteErrors(t *testing.T) {
	for _, op := range []string{"open", "write", "sync", "rename", "syncdir"} {
		fsys := newStateTestFS()
		c, _ := OpenEpochCache(fsys, "p")
		if _, err := c.Assign(1, 0); err != nil {
			t.Fatal(err)
		}
		fsys.failOp[op] = errors.New("injected EIO")
		if _, err := c.Assign(2, 5); err == nil || !strings.Contains(err.Error(), "injected EIO") {
			t.Fatalf("%s failure: err %v", op, err)
		}
		// The previous checkpoint is intact whatever failed.
		c2, err := OpenEpochCache(fsys, "p")
		if err != nil {
			t.Fatalf("%s failure: reopen: %v", op, err)
		}
		got := c2.Entries()
		if !reflect.DeepEqual(got, []EpochEntry{{1, 0}}) && !reflect.DeepEqual(got, []EpochEntry{{1, 0}, {2, 5}}) {
			t.Fatalf("%s failure: reopened %v", op, got)
		}
		if err := c.Flush(); err != nil {
			t.Fatalf("%s failure: flush after repair: %v", op, err)
		}
		c3, _ := OpenEpochCache(fsys, "p")
		if got := c3.Entries(); !reflect.DeepEqual(got, []EpochEntry{{1, 0}, {2, 5}}) {
			t.Fatalf("%s failure: after flush %v", op, got)
		}
	}
}

func containsInOrder(have, want []string) bool {
	i := 0
	for _, h := range have {
		if i < len(want) && h == want[i] {
			i++
		}
	}
	return i == len(want)
}

// Property: whatever sequence of assignments and truncations, the entries
// stay strictly increasing in epoch and offset, EndOffsetFor agrees with a
// direct reading of the entries, and the checkpoint round-trips.
func TestEpochCacheProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for iter := 0; iter < 300; iter++ {
		fsys := newStateTestFS()
		c, _ := OpenEpochCache(fsys, "d")
		for step := 0; step < 40; step++ {
			switch rng.Intn(6) {
			case 0:
				c.TruncateFromEnd(int64(rng.Intn(200)))
			case 1:
				c.TruncateFromStart(int64(rng.Intn(200)))
			default:
				c.Assign(int32(rng.Intn(20)), int64(rng.Intn(200)))
			}
			es := c.Entries()
			for i := 1; i < len(es); i++ {
				if es[i].Epoch <= es[i-1].Epoch || es[i].StartOffset <= es[i-1].StartOffset {
					t.Fatalf("not monotonic: %v", es)
				}
			}
			for req := int32(-1); req < 22; req++ {
				e, off := c.EndOffsetFor(req, 1000)
				we, woff := modelEndOffset(es, req, 1000)
				if e != we || off != woff {
					t.Fatalf("entries %v: EndOffsetFor(%d) = (%d,%d) want (%d,%d)", es, req, e, off, we, woff)
				}
			}
		}
		c2, err := OpenEpochCache(fsys, "d")
		if err != nil {
			t.Fatal(err)
		}
		if a, b := c.Entries(), c2.Entries(); !reflect.DeepEqual(a, b) && !(len(a) == 0 && len(b) == 0) {
			t.Fatalf("round trip %v != %v", a, b)
		}
	}
}

// modelEndOffset is a literal reading of Kafka's documented answer.
func modelEndOffset(es []EpochEntry, req int32, leo int64) (int32, int64) {
	if req == UndefinedEpoch {
		return UndefinedEpoch, UndefinedEpochOffset
	}
	if len(es) > 0 && es[len(es)-1].Epoch == req {
		return req, leo
	}
	var floor, higher *EpochEntry
	for i := range es {
		if es[i].Epoch <= req {
			floor = &es[i]
		} else if higher == nil {
			higher = &es[i]
		}
	}
	switch {
	case higher == nil:
		return UndefinedEpoch, UndefinedEpochOffset
	case floor == nil:
		return req, higher.StartOffset
	default:
		return floor.Epoch, higher.StartOffset
	}
}

func FuzzEpochCheckpoint(f *testing.F) {
	f.Add([]byte("0\n0\n"))
	f.Add([]byte("0\n2\n1 0\n4 50\n"))
	f.Add([]byte("0\n1\n1 0 9\n"))
	f.Add([]byte("0\n3\n0 0\n3 120\n7 4096\n"))
	f.Add([]byte("0\n2\n3 10\n2 20\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := ParseEpochCheckpoint(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptCheckpoint) {
				t.Fatalf("error does not wrap ErrCorruptCheckpoint: %v", err)
			}
			return
		}
		for i := 1; i < len(entries); i++ {
			if entries[i].Epoch <= entries[i-1].Epoch || entries[i].StartOffset <= entries[i-1].StartOffset {
				t.Fatalf("accepted non-monotonic entries %v", entries)
			}
		}
		// What parses re-encodes to a canonical file that parses the same.
		again, err := ParseEpochCheckpoint(AppendEpochCheckpoint(nil, entries))
		if err != nil || !reflect.DeepEqual(again, entries) {
			t.Fatalf("re-encode: %v %v vs %v", err, again, entries)
		}
		// Loading through a cache gives the same answers.
		fsys := newStateTestFS()
		fsys.write("d/leader-epoch-checkpoint", b)
		c, err := OpenEpochCache(fsys, "d")
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Entries(); !reflect.DeepEqual(got, entries) && !(len(got) == 0 && len(entries) == 0) {
			t.Fatalf("cache %v, parsed %v", got, entries)
		}
	})
}
