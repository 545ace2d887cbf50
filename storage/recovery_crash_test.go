package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"syscall"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// crashWorkload appends random batches until the machine dies (or n
// appends are done), returning every set that was attempted (in order,
// with its final bytes) and the offset below which durability was
// reported.
type crashRun struct {
	attempted [][]byte // batches, in log order, whose append was attempted
	failed    []bool   // the append of attempted[i] returned an error
	durable   int64    // everything below was reported durable
	deletes   bool     // the log start was advanced during the run
}

// injectRandomFault arms one fault on a random future operation: EIO or
// ENOSPC on a write, a short write, EIO on a sync, or ENOSPC on a create.
func injectRandomFault(rng *rand.Rand, fs *MemFS) {
	countdown := 1 + rng.Intn(60)
	kind := rng.Intn(5)
	fs.SetFault(func(op Op, name string) Fault {
		var f Fault
		switch {
		case kind == 0 && op == OpWrite:
			f = Fault{Err: syscall.EIO}
		case kind == 1 && op == OpWrite:
			f = Fault{Err: syscall.ENOSPC, Short: true}
		case kind == 2 && op == OpWrite:
			f = Fault{Short: true}
		case kind == 3 && op == OpSync:
			f = Fault{Err: syscall.EIO}
		case kind == 4 && op == OpOpen:
			f = Fault{Err: syscall.ENOSPC}
		default:
			return Fault{}
		}
		countdown--
		if countdown != 0 {
			return Fault{}
		}
		return f
	})
}

func runCrashWorkload(t *testing.T, rng *rand.Rand, fs *MemFS, cfg Config, n int, faults bool) crashRun {
	return runCrashWorkloadOpts(t, rng, fs, cfg, n, faults, false)
}

// runCrashWorkloadOpts is runCrashWorkload; with deletes it also advances
// the log start now and then (DeleteRecords, size retention).
func runCrashWorkloadOpts(t *testing.T, rng *rand.Rand, fs *MemFS, cfg Config, n int, faults, deletes bool) crashRun {
	t.Helper()
	run := crashRun{deletes: deletes}
	l, err := Open(fs, "data/t-0", cfg)
	if err != nil {
		if errors.Is(err, ErrMachineDown) {
			return run
		}
		t.Fatalf("open: %v", err)
	}
	defer l.Close()
	if faults {
		injectRandomFault(rng, fs)
	}
	next := int64(0)
	epoch := int32(0)
	for i := 0; i < n; i++ {
		nb := 1 + rng.Intn(2)
		var set []byte
		var batches [][]byte
		verbatim := rng.Intn(2) == 0
		for j := 0; j < nb; j++ {
			if rng.Intn(4) == 0 {
				epoch++
			}
			base := next
			if verbatim && rng.Intn(3) == 0 {
				base += int64(rng.Intn(5)) // gap
			}
			b := testBatch(t, base, epoch, 1000+int64(i), 1+rng.Intn(4), rng.Intn(700))
			batches = append(batches, b)
			set = append(set, b...)
			next = base + int64(kbatch.LastOffsetDelta(b)) + 1
			if !verbatim {
				break
			}
		}
		var res AppendResult
		if verbatim {
			res, err = l.AppendVerbatim(set)
		} else {
			res, err = l.AppendLeader(set, epoch, 5000)
		}
		// Record the bytes as stored (leader appends patch them).
		for pos := 0; pos < len(set); {
			sz := batchSize(set[pos:])
			run.attempted = append(run.attempted, set[pos:pos+sz])
			run.failed = append(run.failed, err != nil)
			pos += sz
		}
		if err != nil {
			if errors.Is(err, ErrNoSpace) || errors.Is(err, ErrWrite) {
				// Failed cleanly: the log goes on from where it was.
				next = l.LogEndOffset()
				continue
			}
			return run
		}
		next = res.LastOffset + 1
		if cfg.Flush != FlushNever && rng.Intn(2) == 0 {
			if err := l.WaitDurable(res.LastOffset + 1); err != nil {
				return run
			}
			run.durable = res.LastOffset + 1
		}
		if rng.Intn(20) == 0 {
			if err := l.Flush(); err != nil {
				return run
			}
			run.durable = res.LastOffset + 1
		}
		if deletes && rng.Intn(8) == 0 {
			start, end := l.LogStartOffset(), l.LogEndOffset()
			var err error
			if rng.Intn(2) == 0 {
				_, err = l.DeleteRecords(start + rng.Int63n(end-start+1))
			} else {
				_, err = l.ApplyRetention(1)
			}
			if err != nil {
				return run
			}
		}
	}
	return run
}

// checkPrefix opens the crashed FS and checks the prefix property: the
// recovered batches are, in order, the attempted ones, where only batches
// whose append failed may be missing, and everything reported durable is
// there.
func checkPrefix(t *testing.T, fs FS, cfg Config, run crashRun, what string) *Log {
	t.Helper()
	l, err := Open(fs, "data/t-0", cfg)
	if err != nil {
		t.Fatalf("%s: open after crash: %v", what, err)
	}
	got := readAllBatches(t, l)
	j := 0
	if run.deletes && len(got) > 0 {
		// The head may have been deleted: start where the first batch is.
		for j < len(run.attempted) && !bytes.Equal(got[0], run.attempted[j]) {
			j++
		}
	}
	for i := range got {
		for j < len(run.attempted) && !bytes.Equal(got[i], run.attempted[j]) {
			if !run.failed[j] && j < lastOK(run) {
				t.Fatalf("%s: batch %d (base %d) is not the next appended one (base %d)", what, i, kbatch.BaseOffset(got[i]), kbatch.BaseOffset(run.attempted[j]))
			}
			j++
		}
		if j == len(run.attempted) {
			t.Fatalf("%s: batch %d (base %d) was never appended", what, i, kbatch.BaseOffset(got[i]))
		}
		j++
	}
	end := int64(0)
	if len(got) > 0 {
		lb := got[len(got)-1]
		end = kbatch.BaseOffset(lb) + int64(kbatch.LastOffsetDelta(lb)) + 1
	}
	if end < run.durable && !(run.deletes && len(got) == 0 && l.LogEndOffset() >= run.durable) {
		t.Fatalf("%s: log ends at %d, but offsets below %d were reported durable", what, end, run.durable)
	}
	if l.LogEndOffset() < end {
		t.Fatalf("%s: LEO %d below the last batch end %d", what, l.LogEndOffset(), end)
	}
	return l
}

// lastOK is the index after the last successfully appended batch: a
// successful batch may only be missing from the tail (not durable, lost in
// the crash), never from the middle.
func lastOK(run crashRun) int {
	n := 0
	for i, f := range run.failed {
		if !f {
			n = i + 1
		}
	}
	return n
}

// crashTrials is how many random crashes a crash test runs per mode:
// full, or a quarter of it under -short.
func crashTrials(full int) int {
	if testing.Short() {
		return full / 4
	}
	return full
}

// TestCrashWithLogStartAdvances crashes a workload that also deletes
// records and applies size retention: the recovered log is a contiguous run
// of the appended batches (its head possibly deleted) that reaches every
// durable offset.
func TestCrashWithLogStartAdvances(t *testing.T) {
	trials := crashTrials(40)
	for _, mode := range CrashModes {
		t.Run(mode.String(), func(t *testing.T) {
			for trial := 0; trial < trials; trial++ {
				seed := int64(trial)*104729 + int64(mode)
				rng := rand.New(rand.NewSource(seed))
				cfg := Config{SegmentBytes: 1024 + int64(rng.Intn(2048)), IndexIntervalBytes: 256,
					Flush: FlushAlways, RetentionBytes: 4096, RetentionMs: -1}
				fs := NewMemFS()
				fs.CutAfter(1 + rng.Intn(500))
				run := runCrashWorkloadOpts(t, rng, fs, cfg, 60, false, true)
				l := checkPrefix(t, fs.Crash(mode, rng), cfg, run, fmt.Sprintf("seed %d", seed))
				got := readAllBatches(t, l)
				if len(got) > 0 && kbatch.BaseOffset(got[0])+int64(kbatch.LastOffsetDelta(got[0])) < l.LogStartOffset() {
					t.Fatalf("seed %d: first batch ends below the log start %d", seed, l.LogStartOffset())
				}
				l.Close()
			}
		})
	}
}

// TestCrashPrefixProperty cuts the MemFS at random points of a random
// workload (every flush policy; the interval policy's 1 ms timer makes
// those runs timing-dependent, the property must hold anyway), crashes it
// in every mode, and checks that the recovered log is
// a whole-batch prefix of what was appended and holds everything reported
// durable, with the leader-epoch cache its batches describe; the
// recovered log must then accept appends and reopen cleanly, its cache
// still the batches'.
func TestCrashPrefixProperty(t *testing.T) {
	trials := crashTrials(60)
	for _, mode := range CrashModes {
		for _, policy := range []FlushPolicy{FlushAlways, FlushNever, FlushInterval} {
			for _, faults := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/%v/faults=%v", mode, policy, faults), func(t *testing.T) {
					n := trials
					if policy == FlushInterval {
						n = trials / 4 // waits on a timer
					}
					for trial := 0; trial < n; trial++ {
						seed := int64(trial)*7919 + int64(mode)*131 + int64(policy)
						rng := rand.New(rand.NewSource(seed))
						cfg := Config{SegmentBytes: 2048 + int64(rng.Intn(4096)), IndexIntervalBytes: 256, Flush: policy, FlushInterval: time.Millisecond}
						fs := NewMemFS()
						fs.CutAfter(1 + rng.Intn(400))
						run := runCrashWorkload(t, rng, fs, cfg, 60, faults)
						crashed := fs.Crash(mode, rng)
						what := fmt.Sprintf("seed %d", seed)
						l := checkPrefix(t, crashed, cfg, run, what)
						// The leader-epoch checkpoint is written lazily
						// (AssignDeferred): an entry it had not received is
						// re-learned from its batch, never lost, and none
						// outlives its batch.
						checkEpochs(t, l, what+": recovered")
						// The recovered log accepts appends and survives a
						// clean reopen (which re-learns nothing: the close
						// writes the new epoch).
						b := testBatch(t, 0, 1000, 9999, 2, 10)
						if _, err := l.AppendLeader(b, 1000, 1); err != nil {
							t.Fatalf("%s: append after recovery: %v", what, err)
						}
						want := readAllBatches(t, l)
						if err := l.Close(); err != nil {
							t.Fatalf("%s: close: %v", what, err)
						}
						l2, err := Open(crashed, "data/t-0", cfg)
						if err != nil {
							t.Fatalf("%s: reopen: %v", what, err)
						}
						got := readAllBatches(t, l2)
						if len(got) != len(want) {
							t.Fatalf("%s: reopen has %d batches, want %d", what, len(got), len(want))
						}
						checkEpochs(t, l2, what+": reopened")
						for i := range got {
							if !bytes.Equal(got[i], want[i]) {
								t.Fatalf("%s: reopen batch %d differs", what, i)
							}
						}
						l2.Close()
					}
				})
			}
		}
	}
}
