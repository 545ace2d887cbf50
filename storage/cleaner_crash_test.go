package storage

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// The cleaner's crash tests: a clean is cut after every one of its file
// operations, the machine crashes in every mode, and the reopened log
// must hold, group by group, either every old record or exactly what the
// clean keeps, at the same offsets: never a mix inside a group, never a
// stray file left.

var crashCleanCfg = Config{SegmentBytes: 400, IndexIntervalBytes: 64}

// crashCleanLog builds a log whose first clean (uncut) shrank its
// segments, then appends more, so the clean under test merges several
// segments per group. It returns the log, synced.
func crashCleanLog(t testing.TB, fs *MemFS) *Log {
	t.Helper()
	l := openLog(t, fs, crashCleanCfg)
	rng := rand.New(rand.NewSource(1))
	add := func(n int) {
		for i := 0; i < n; i++ {
			off := l.LogEndOffset()
			var kvs []string
			for j := 0; j < 3; j++ {
				k := fmt.Sprintf("k%d", rng.Intn(12))
				if rng.Intn(6) == 0 {
					kvs = append(kvs, k) // tombstone
				} else {
					kvs = append(kvs, fmt.Sprintf("%s=%d", k, off+int64(j)))
				}
			}
			appendAll(t, l, kvBatch(t, off, 1000+off, kvs...))
			if i%7 == 3 {
				off = l.LogEndOffset()
				appendAll(t, l, txnData(t, off, 9, int32(off), "k1=txn"), markerBatch(t, off+1, 9, 0, kbatch.ControlAbort))
			}
		}
	}
	add(30)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := NewCleaner(CleanerConfig{}).Clean(l, CompactConfig{DeleteRetentionMs: 10}, 5000); err != nil {
		t.Fatal(err)
	}
	add(12)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestCleanerCrashAtEveryStep(t *testing.T) {
	cc := CompactConfig{DeleteRetentionMs: 10}
	const now = 9000
	ref := NewMemFS()
	l := crashCleanLog(t, ref)
	before := logRecords(t, l)
	start := ref.Ops()
	st, err := NewCleaner(CleanerConfig{}).Clean(l, cc, now)
	if err != nil {
		t.Fatal(err)
	}
	ops := ref.Ops() - start
	after := logRecords(t, l)
	// Group boundaries: the cleaned segments are named by their groups'
	// first base offsets.
	var bounds []int64
	for _, s := range l.segs {
		if s.base < st.EndOffset {
			bounds = append(bounds, s.base)
		}
	}
	bounds = append(bounds, st.EndOffset)
	l.Close()
	if st.Groups < 2 || len(bounds) < 3 || recString(before) == recString(after) {
		t.Fatalf("the workload must clean several groups and change them: %+v", st)
	}
	multi := false
	for i := 1; i < len(bounds); i++ {
		n := 0
		for _, r := range before {
			if r.off >= bounds[i-1] && r.off < bounds[i] {
				n++
			}
		}
		multi = multi || n > 6
	}
	if !multi {
		t.Fatal("no group merged several segments")
	}
	// The acceptable states: groups [0, k) cleaned, the rest not.
	allowed := map[string]bool{}
	for k := range bounds {
		var want []rec
		for _, r := range after {
			if r.off < bounds[k] {
				want = append(want, r)
			}
		}
		for _, r := range before {
			if r.off >= bounds[k] {
				want = append(want, r)
			}
		}
		allowed[recString(want)] = true
	}
	allowed[recString(after)] = true
	rng := rand.New(rand.NewSource(2))
	for cut := 1; cut <= ops+1; cut++ {
		for _, mode := range CrashModes {
			fs := NewMemFS()
			l := crashCleanLog(t, fs)
			fs.CutAfter(cut)
			NewCleaner(CleanerConfig{}).Clean(l, cc, now) // fails at the cut
			crashed := fs.Crash(mode, rng)
			l.Close()
			l2, err := Open(crashed, "data/t-0", crashCleanCfg)
			if err != nil {
				t.Fatalf("cut %d/%d %v: open: %v", cut, ops, mode, err)
			}
			got := recString(logRecords(t, l2))
			if !allowed[got] {
				t.Fatalf("cut %d/%d %v: a state the clean cannot leave:\n got %s\nbefore %s\n after %s", cut, ops, mode, got, recString(before), recString(after))
			}
			names, _ := crashed.ReadDir("data/t-0")
			for _, n := range names {
				if strings.HasSuffix(n, cleanedSuffix) || strings.HasSuffix(n, swapSuffix) || strings.HasSuffix(n, deletedSuffix) || n == cleanerSwapFile {
					t.Fatalf("cut %d %v: %s left behind", cut, mode, n)
				}
			}
			// The recovered log cleans again and reaches the same result.
			if _, err := NewCleaner(CleanerConfig{}).Clean(l2, cc, now); err != nil {
				t.Fatalf("cut %d %v: clean after recovery: %v", cut, mode, err)
			}
			if got := recString(logRecords(t, l2)); got != recString(after) {
				t.Fatalf("cut %d %v: clean after recovery:\n got %s\nwant %s", cut, mode, got, recString(after))
			}
			l2.Close()
		}
	}
}
