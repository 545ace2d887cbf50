package storage

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// TestEpochCheckpointDeferredOnAppend: opening a new partition's log and
// its first appends (a new epoch each) sync no leader-epoch checkpoint
// (a link's start-up creates and fills a thousand of them); the entries
// are answered from memory at once and reach the checkpoint with the
// flush that records a recovery point covering them, one write per log.
func TestEpochCheckpointDeferredOnAppend(t *testing.T) {
	const n = 50
	fs := NewMemFS()
	all, epochSyncs := new(int), 0
	fs.SetFault(func(op Op, name string) Fault {
		if op == OpSync || op == OpSyncDir {
			*all++
			if strings.Contains(name, LeaderEpochCheckpointFile) {
				epochSyncs++
			}
		}
		return Fault{}
	})
	logs := make([]*Log, n)
	for i := range logs {
		l, err := Open(fs, fmt.Sprintf("t-%d", i), Config{})
		if err != nil {
			t.Fatal(err)
		}
		logs[i] = l
	}
	if *all != n {
		t.Fatalf("opening %d new logs synced %d times, want %d (one directory sync each: the new segment)", n, *all, n)
	}
	*all = 0
	for i, l := range logs {
		for e := int32(0); e < 3; e++ {
			base := l.LogEndOffset()
			if _, err := l.AppendVerbatim(testBatch(t, base, 5+e, 1, 2, 10)); err != nil {
				t.Fatal(err)
			}
		}
		if got, want := l.EpochCache().Entries(), []EpochEntry{{5, 0}, {6, 2}, {7, 4}}; !reflect.DeepEqual(got, want) {
			t.Fatalf("log %d: epoch cache %v, want %v", i, got, want)
		}
		if !l.EpochCache().Deferred() {
			t.Fatalf("log %d: its new entries are not waiting for a checkpoint write", i)
		}
	}
	if *all != 0 {
		t.Fatalf("%d first appends (3 new epochs each) synced %d times, want 0", 3*n, *all)
	}
	for i, l := range logs {
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		if l.EpochCache().Deferred() {
			t.Fatalf("log %d: flushed, its epochs still deferred", i)
		}
	}
	if epochSyncs != n {
		t.Fatalf("flushing %d logs synced the epoch checkpoint %d times, want %d", n, epochSyncs, n)
	}
	c, err := OpenEpochCache(fs, "t-0")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Entries(), []EpochEntry{{5, 0}, {6, 2}, {7, 4}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("checkpoint after flush %v, want %v", got, want)
	}
	for _, l := range logs {
		l.Close()
	}
}

// derivedEpochs is the epoch cache the batches of l describe: the first
// batch of every epoch higher than the ones before it.
func derivedEpochs(t *testing.T, l *Log) []EpochEntry {
	var out []EpochEntry
	for _, b := range readAllBatches(t, l) {
		e := kbatch.LeaderEpoch(b)
		if len(out) == 0 || e > out[len(out)-1].Epoch {
			out = append(out, EpochEntry{Epoch: e, StartOffset: kbatch.BaseOffset(b)})
		}
	}
	return out
}

// checkEpochs wants l's epoch cache to be the one its batches describe.
func checkEpochs(t *testing.T, l *Log, what string) {
	t.Helper()
	want := derivedEpochs(t, l)
	if got := l.EpochCache().Entries(); !reflect.DeepEqual(got, want) && (len(got) != 0 || len(want) != 0) {
		t.Fatalf("%s: epoch cache %v, the batches say %v", what, got, want)
	}
}
