package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

// idemBatch builds an idempotent producer's batch of n records.
func idemBatch(t testing.TB, pid int64, seq int32, ts int64, n, valueSize int) []byte {
	t.Helper()
	recs := make([]kbatch.Record, n)
	for i := range recs {
		recs[i] = kbatch.Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Value: bytes.Repeat([]byte{byte('a' + i)}, valueSize)}
	}
	b := kbatch.NewBatch(ts, recs...)
	b.ProducerID, b.ProducerEpoch, b.BaseSequence = pid, 0, seq
	return kbatchtest.Encode(t, b)
}

// segmentBases lists the base offsets of the .log files in dir.
func segmentBases(t testing.TB, fs FS, dir string) []int64 {
	t.Helper()
	names, err := fs.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, n := range names {
		if b, ok := parseSegmentFileName(n, logSuffix); ok {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// positionIn returns the file position of batches[k] in the segment at
// base, batches being every stored batch in log order.
func positionIn(batches [][]byte, base int64, k int) int64 {
	var pos int64
	for i := 0; i < k; i++ {
		if kbatch.BaseOffset(batches[i]) >= base {
			pos += int64(len(batches[i]))
		}
	}
	return pos
}

func damageFile(t testing.TB, fs FS, name string, at int64) {
	t.Helper()
	f, err := fs.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b[:], at); err != nil {
		t.Fatal(err)
	}
}

func firstTimestamp(b []byte) int64 {
	return int64(binary.BigEndian.Uint64(b[kbatch.BaseTimestampOffset:]))
}

func lastOffsetOf(b []byte) int64 { return kbatch.BaseOffset(b) + int64(kbatch.LastOffsetDelta(b)) }

// fillSegments appends idempotent batches (a new leader epoch every six)
// until the log has n segments, returning the stored batches.
func fillSegments(t testing.TB, l *Log, n int, from int) [][]byte {
	t.Helper()
	var out [][]byte
	for i := from; l.NumSegments() < n; i++ {
		b := idemBatch(t, 7, int32(3*i), 10_000+int64(i)*10, 3, 100)
		if _, err := l.AppendLeader(b, int32(1+i/6), 1); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// TestRollDoesNotSyncAndFlusherAdvancesRecoveryPoint: under FlushNever a
// roll syncs nothing on the append path; the flusher then syncs the rolled
// segment (log, indexes, transaction index) and records the recovery point
// at its end.
func TestRollDoesNotSyncAndFlusherAdvancesRecoveryPoint(t *testing.T) {
	fs := NewMemFS()
	var mu sync.Mutex
	synced := map[string]int{}
	fs.SetFault(func(op Op, name string) Fault {
		if op == OpSync {
			mu.Lock()
			synced[name[strings.LastIndexByte(name, '/')+1:]]++
			mu.Unlock()
		}
		return Fault{}
	})
	cfg := Config{SegmentBytes: 2048, IndexIntervalBytes: 128, Flush: FlushNever}
	l := openLog(t, fs, cfg)
	defer l.Close()
	l.holdBackground.Store(true)
	batches := fillSegments(t, l, 3, 0)
	bases := segmentBases(t, fs, "data/t-0")
	mu.Lock()
	for name, n := range synced {
		if strings.HasSuffix(name, logSuffix) || strings.HasSuffix(name, indexSuffix) || strings.HasSuffix(name, timeIndexSuffix) {
			t.Errorf("%s synced %d times by appends and rolls", name, n)
		}
	}
	mu.Unlock()
	if rp := l.RecoveryPoint(); rp != 0 {
		t.Fatalf("recovery point %d before any background sync", rp)
	}
	if d := l.DurableOffset(); d != 0 {
		t.Fatalf("durable %d before any background sync", d)
	}
	// Let the flusher work: WaitDurable wakes it, and under FlushNever
	// only the background sync of rolled segments can satisfy it.
	l.holdBackground.Store(false)
	if err := l.WaitDurable(bases[2]); err != nil {
		t.Fatal(err)
	}
	if rp := l.RecoveryPoint(); rp != bases[2] {
		t.Fatalf("recovery point %d, want the end of the second segment %d", rp, bases[2])
	}
	mu.Lock()
	for _, b := range bases[:2] {
		for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			if synced[SegmentFileName(b, suf)] == 0 {
				t.Errorf("%s not synced by the flusher", SegmentFileName(b, suf))
			}
		}
	}
	if synced[SegmentFileName(bases[2], logSuffix)] != 0 {
		t.Errorf("the active segment was synced under FlushNever")
	}
	mu.Unlock()
	got, err := readRecoveryPoint(fs, "data/t-0", "t", 0)
	if err != nil || got != bases[2] {
		t.Fatalf("checkpointed recovery point %d (%v), want %d", got, err, bases[2])
	}
	// Flush covers the active segment: the recovery point is the log end.
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	end := lastOffsetOf(batches[len(batches)-1]) + 1
	if rp := l.RecoveryPoint(); rp != end || l.DurableOffset() != end {
		t.Fatalf("after Flush: recovery point %d durable %d, want %d", rp, l.DurableOffset(), end)
	}
	if got, _ := readRecoveryPoint(fs, "data/t-0", "t", 0); got != end {
		t.Fatalf("checkpointed %d after Flush, want %d", got, end)
	}
}

// TestCrashAfterRollBeforeBackgroundFlush: several rolled segments were
// never synced, and a power cut tore a batch in the middle one. Recovery
// validates every segment above the recovery point, cuts at the tear,
// deletes the later segments and their files, and leaves the epoch cache,
// producer state and indexes consistent with the cut log.
func TestCrashAfterRollBeforeBackgroundFlush(t *testing.T) {
	fs := NewMemFS()
	cfg := Config{SegmentBytes: 2048, IndexIntervalBytes: 128, Flush: FlushNever}
	l := openLog(t, fs, cfg)
	l.holdBackground.Store(true)
	batches := fillSegments(t, l, 5, 0)
	bases := segmentBases(t, fs, "data/t-0")
	if len(bases) != 5 {
		t.Fatalf("%d segments", len(bases))
	}
	crashed := fs.Crash(CrashProcess, nil)
	l.Close() // the old machine is gone; this only stops the goroutine

	// Tear the middle batch of the third segment.
	var inSeg []int
	for i, b := range batches {
		if kbatch.BaseOffset(b) >= bases[2] && kbatch.BaseOffset(b) < bases[3] {
			inSeg = append(inSeg, i)
		}
	}
	k := inSeg[len(inSeg)/2]
	if k == inSeg[0] {
		t.Fatalf("segment 2 holds %d batches; need several", len(inSeg))
	}
	damageFile(t, crashed, "data/t-0/"+SegmentFileName(bases[2], logSuffix), positionIn(batches, bases[2], k)+kbatch.HeaderSize+3)

	l2, err := Open(crashed, "data/t-0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := batches[:k]
	got := readAllBatches(t, l2)
	checkBatches(t, got, want)
	leo := kbatch.BaseOffset(batches[k])
	if l2.LogEndOffset() != leo || l2.NumSegments() != 3 {
		t.Fatalf("LEO %d segments %d, want %d and 3", l2.LogEndOffset(), l2.NumSegments(), leo)
	}
	for _, b := range bases[3:] {
		for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, TxnIndexSuffix} {
			if _, err := crashed.Stat("data/t-0/" + SegmentFileName(b, suf)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s survived recovery (%v)", SegmentFileName(b, suf), err)
			}
		}
	}
	names, _ := crashed.ReadDir("data/t-0")
	for _, n := range names {
		if off, ok := parseSegmentFileName(n, SnapshotSuffix); ok && off > leo {
			t.Errorf("producer snapshot %s above the log end %d survived", n, leo)
		}
	}
	// Epoch cache: nothing starts at or after the log end; the latest
	// epoch is the last surviving batch's.
	for _, e := range l2.EpochCache().Entries() {
		if e.StartOffset >= leo {
			t.Errorf("epoch entry %+v at or above the log end %d", e, leo)
		}
	}
	if e, ok := l2.EpochCache().LatestEpoch(); !ok || e != kbatch.LeaderEpoch(batches[k-1]) {
		t.Fatalf("latest epoch %d %v, want %d", e, ok, kbatch.LeaderEpoch(batches[k-1]))
	}
	// Indexes: reads and timestamp lookups in every remaining segment.
	for _, b := range want {
		sl, err := l2.Read(kbatch.BaseOffset(b), 1)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := sl.Bytes(nil)
		if err != nil || !bytes.HasPrefix(rb, b) {
			t.Fatalf("Read(%d) does not start with the batch (%v)", kbatch.BaseOffset(b), err)
		}
		r, err := l2.OffsetForTimestamp(context.Background(), firstTimestamp(b))
		if err != nil || r.Offset != kbatch.BaseOffset(b) {
			t.Fatalf("OffsetForTimestamp(%d) = %+v %v, want offset %d", firstTimestamp(b), r, err, kbatch.BaseOffset(b))
		}
	}
	// Nothing was ever recorded durable; the recovered rolled segments
	// are synced in the background after Open, which raises it.
	if err := l2.WaitDurable(bases[2]); err != nil {
		t.Fatal(err)
	}
	if rp := l2.RecoveryPoint(); rp != bases[2] {
		t.Fatalf("recovery point %d after the background sync of the recovered segments, want %d", rp, bases[2])
	}
	// Producer state: the last surviving batch is a duplicate, the lost
	// one's sequence is the next expected.
	dup := idemBatch(t, 7, int32(3*(k-1)), 10_000+int64(k-1)*10, 3, 100)
	if res, err := l2.AppendLeader(dup, 9, 1); err != nil || !res.Duplicate || res.FirstOffset != kbatch.BaseOffset(batches[k-1]) {
		t.Fatalf("retry of the last surviving batch: %+v %v", res, err)
	}
	next := idemBatch(t, 7, int32(3*k), 10_000+int64(k)*10, 3, 100)
	res, err := l2.AppendLeader(next, 9, 1)
	if err != nil || res.FirstOffset != leo {
		t.Fatalf("append of the lost sequence: %+v %v", res, err)
	}
	want = append(want, next)
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	l3 := openLog(t, crashed, cfg)
	defer l3.Close()
	if got := readAllBatches(t, l3); len(got) != len(want) || !bytes.Equal(got[len(got)-1], next) {
		t.Fatalf("clean reopen: %d batches, want %d", len(got), len(want))
	}
}

// TestCrashLosesRolledTailAtBatchBoundary: a rolled, unsynced segment lost
// whole batches at its end while the next segment's data reached the
// disk. Each segment alone looks valid; the size recorded at the roll shows
// the loss, and the later segment goes.
func TestCrashLosesRolledTailAtBatchBoundary(t *testing.T) {
	fs := NewMemFS()
	cfg := Config{SegmentBytes: 2048, IndexIntervalBytes: 128, Flush: FlushNever}
	l := openLog(t, fs, cfg)
	l.holdBackground.Store(true)
	batches := fillSegments(t, l, 3, 0)
	bases := segmentBases(t, fs, "data/t-0")
	crashed := fs.Crash(CrashProcess, nil)
	l.Close()
	// Cut the second segment before its last batch.
	k := 0
	for i, b := range batches {
		if kbatch.BaseOffset(b) < bases[2] {
			k = i
		}
	}
	f, err := crashed.OpenFile("data/t-0/"+SegmentFileName(bases[1], logSuffix), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(positionIn(batches, bases[1], k)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// Under FlushAlways what recovery kept is made durable by Open.
	always := cfg
	always.Flush = FlushAlways
	l2 := openLog(t, crashed, always)
	defer l2.Close()
	if l2.DurableOffset() != l2.LogEndOffset() || l2.RecoveryPoint() != l2.LogEndOffset() {
		t.Fatalf("durable %d recovery point %d after Open under FlushAlways, LEO %d", l2.DurableOffset(), l2.RecoveryPoint(), l2.LogEndOffset())
	}
	if got := readAllBatches(t, l2); len(got) != k || l2.LogEndOffset() != kbatch.BaseOffset(batches[k]) || l2.NumSegments() != 2 {
		t.Fatalf("recovered %d batches, LEO %d, %d segments; want %d, %d, 2", len(got), l2.LogEndOffset(), l2.NumSegments(), k, kbatch.BaseOffset(batches[k]))
	}
}

// TestRecoveryPointHonoured: segments below the recorded recovery point
// are trusted (not validated batch by batch, as before); without a usable
// checkpoint (missing or corrupt) every segment is validated.
func TestRecoveryPointHonoured(t *testing.T) {
	for _, tc := range []struct {
		name     string
		damage   func(fs FS)
		trusted  bool
		rpOnDisk int64 // -1: not readable
	}{
		{"recorded", func(FS) {}, true, 0},
		{"missing", func(fs FS) { fs.Remove("data/t-0/" + RecoveryPointCheckpointFile) }, false, -1},
		{"corrupt", func(fs FS) {
			AtomicWriteFile(fs, "data/t-0/"+RecoveryPointCheckpointFile, []byte("0\n1\nt 0 notanumber\n"))
		}, false, -1},
		{"other-partition", func(fs FS) {
			AtomicWriteFile(fs, "data/t-0/"+RecoveryPointCheckpointFile, encodePartitionCheckpoint("t", 1, 1<<40))
		}, false, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := NewMemFS()
			cfg := Config{SegmentBytes: 2048, IndexIntervalBytes: 128, Flush: FlushNever}
			l := openLog(t, fs, cfg)
			batches := fillSegments(t, l, 3, 0)
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			rp := l.RecoveryPoint()
			if got, err := readRecoveryPoint(fs, "data/t-0", "t", 0); err != nil || got != rp || rp != l.LogEndOffset() {
				t.Fatalf("recovery point %d, file %d (%v), LEO %d", rp, got, err, l.LogEndOffset())
			}
			// More data in a new segment, then the process dies.
			l.holdBackground.Store(true)
			more := fillSegments(t, l, 4, len(batches))
			crashed := fs.Crash(CrashProcess, nil)
			l.Close()
			tc.damage(crashed)
			// Damage a batch in the first segment (below the recovery
			// point): only a validating recovery notices.
			bases := segmentBases(t, crashed, "data/t-0")
			damageFile(t, crashed, "data/t-0/"+SegmentFileName(bases[0], logSuffix), positionIn(batches, 0, 1)+kbatch.HeaderSize+3)
			l2 := openLog(t, crashed, cfg)
			defer l2.Close()
			got := readAllBatches(t, l2)
			if tc.trusted {
				// Everything is there, the damaged batch included (it
				// was below the recovery point), and the rest was
				// validated and kept.
				if len(got) != len(batches)+len(more) || l2.NumSegments() != 4 {
					t.Fatalf("%d batches in %d segments, want %d in 4", len(got), l2.NumSegments(), len(batches)+len(more))
				}
				if bytes.Equal(got[1], batches[1]) {
					t.Fatal("the damaged trusted batch reads back intact: the test damaged nothing")
				}
				// The recovered segments above it are synced in the
				// background, which may already have raised it.
				if got := l2.RecoveryPoint(); got < rp || got > l2.LogEndOffset() {
					t.Fatalf("recovery point %d after recovery, want %d..%d", got, rp, l2.LogEndOffset())
				}
				return
			}
			if len(got) != 1 || !bytes.Equal(got[0], batches[0]) || l2.NumSegments() != 1 || l2.LogEndOffset() != kbatch.BaseOffset(batches[1]) {
				t.Fatalf("%d batches, %d segments, LEO %d: want the first batch only", len(got), l2.NumSegments(), l2.LogEndOffset())
			}
			if rp := l2.RecoveryPoint(); rp != 0 {
				t.Fatalf("recovery point %d after a full recovery, want 0", rp)
			}
		})
	}
}

// TestTruncateLowersRecoveryPoint: after a truncation below the recovery
// point the recorded value drops to the new log end before new data can
// be written there.
func TestTruncateLowersRecoveryPoint(t *testing.T) {
	fs := NewMemFS()
	cfg := Config{SegmentBytes: 2048, IndexIntervalBytes: 128, Flush: FlushNever}
	l := openLog(t, fs, cfg)
	defer l.Close()
	batches := fillSegments(t, l, 3, 0)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	to := kbatch.BaseOffset(batches[2])
	if err := l.Truncate(to); err != nil {
		t.Fatal(err)
	}
	if rp := l.RecoveryPoint(); rp != to {
		t.Fatalf("recovery point %d after truncation to %d", rp, to)
	}
	if got, err := readRecoveryPoint(fs, "data/t-0", "t", 0); err != nil || got != to {
		t.Fatalf("checkpointed %d (%v), want %d", got, err, to)
	}
	if err := l.TruncateFullyAndStartAt(500); err != nil {
		t.Fatal(err)
	}
	if got, _ := readRecoveryPoint(fs, "data/t-0", "t", 0); got != 500 || l.RecoveryPoint() != 500 {
		t.Fatalf("after restart at 500: checkpointed %d, in memory %d", got, l.RecoveryPoint())
	}
}

// TestFlushAlwaysNoAckedLossAcrossRolls cuts the machine at random points
// of a FlushAlways workload with small segments (a roll every few
// appends) and crashes it in every mode: every offset whose OnDurable
// callback reported success is in the recovered log, unchanged.
func TestFlushAlwaysNoAckedLossAcrossRolls(t *testing.T) {
	trials := crashTrials(40)
	for _, mode := range CrashModes {
		t.Run(mode.String(), func(t *testing.T) {
			ackedRolls := 0 // trials where an acknowledged offset lay beyond a roll
			for trial := 0; trial < trials; trial++ {
				seed := int64(trial)*6007 + int64(mode)
				rng := rand.New(rand.NewSource(seed))
				fs := NewMemFS()
				fs.CutAfter(20 + rng.Intn(600))
				cfg := Config{SegmentBytes: 1024 + int64(rng.Intn(1024)), IndexIntervalBytes: 128, Flush: FlushAlways}
				l, err := Open(fs, "data/t-0", cfg)
				if err != nil {
					continue // the cut came during Open
				}
				var acked atomic.Int64
				var stored [][]byte
				for i := 0; i < 80; i++ {
					b := testBatch(t, 0, 1, int64(i), 1+rng.Intn(3), rng.Intn(300))
					res, err := l.AppendLeader(b, int32(1+i/10), 1)
					if err != nil {
						break
					}
					stored = append(stored, b)
					upTo := res.LastOffset + 1
					l.OnDurable(upTo, func(err error) {
						if err == nil {
							for {
								cur := acked.Load()
								if upTo <= cur || acked.CompareAndSwap(cur, upTo) {
									break
								}
							}
						}
					})
					if rng.Intn(3) == 0 {
						l.WaitDurable(upTo)
					}
				}
				ack := acked.Load()
				crashed := fs.Crash(mode, rng)
				l.Close()
				l2, err := Open(crashed, "data/t-0", cfg)
				if err != nil {
					t.Fatalf("seed %d: open after crash: %v", seed, err)
				}
				got := readAllBatches(t, l2)
				if bases := segmentBases(t, crashed, "data/t-0"); len(bases) > 1 && ack > bases[1] {
					ackedRolls++
				}
				for i, b := range stored {
					if lastOffsetOf(b) >= ack {
						break
					}
					if i >= len(got) || !bytes.Equal(got[i], b) {
						t.Fatalf("seed %d: acknowledged batch %d (offsets up to %d, acked below %d) lost or changed", seed, i, lastOffsetOf(b), ack)
					}
				}
				l2.Close()
			}
			if ackedRolls < trials/4 {
				t.Fatalf("only %d of %d trials acknowledged data past a roll: the workload does not test rolls", ackedRolls, trials)
			}
		})
	}
}

// FuzzRecoveryPointCheckpoint parses arbitrary recovery-point checkpoint
// bytes: no panic, a negative or malformed entry is an error, and an
// encoded value decodes to itself.
func FuzzRecoveryPointCheckpoint(f *testing.F) {
	f.Add([]byte("0\n1\nt 0 42\n"), "t", int32(0), int64(42))
	f.Add([]byte("0\n1\nt 0 -1\n"), "t", int32(0), int64(0))
	f.Add([]byte("0\n2\nt 0 1\nt 1 2\n"), "t", int32(1), int64(7))
	f.Add([]byte("1\n0\n"), "t", int32(0), int64(1))
	f.Add([]byte(""), "t", int32(0), int64(1))
	f.Fuzz(func(t *testing.T, data []byte, topic string, partition int32, off int64) {
		got, err := decodePartitionCheckpoint(data, topic, partition)
		if err == nil && got < -1 {
			t.Fatalf("decoded %d without error", got)
		}
		if err != nil && !errors.Is(err, ErrCorruptCheckpoint) {
			t.Fatalf("error %v is not ErrCorruptCheckpoint", err)
		}
		if off < 0 || topic == "" || !validTopicName(topic) {
			return
		}
		got, err = decodePartitionCheckpoint(encodePartitionCheckpoint(topic, partition, off), topic, partition)
		if err != nil || got != off {
			t.Fatalf("round trip %q %d %d: %d %v", topic, partition, off, got, err)
		}
	})
}

// FuzzRolledSegments parses arbitrary rolled-segments files: no panic,
// entries are sane, and encoding entries then decoding them gives them
// back.
func FuzzRolledSegments(f *testing.F) {
	f.Add([]byte("0\n1\n0 4096 17\n"), int64(0), int64(4096), int64(17))
	f.Add([]byte("0\n2\n0 10 5\n5 20 9\n"), int64(5), int64(20), int64(9))
	f.Add([]byte("0\n1\n9 -1 3\n"), int64(9), int64(0), int64(9))
	f.Add([]byte("0\n1\n0 1\n"), int64(1), int64(1), int64(1))
	f.Fuzz(func(t *testing.T, data []byte, base, size, next int64) {
		m, err := decodeRolledSegments(data)
		if err != nil && !errors.Is(err, ErrCorruptCheckpoint) {
			t.Fatalf("error %v is not ErrCorruptCheckpoint", err)
		}
		for b, e := range m {
			if e.base != b || b < 0 || e.size < 0 || e.size > 1<<31-1 || e.next < b {
				t.Fatalf("insane entry %+v", e)
			}
		}
		if base < 0 || size < 0 || size > 1<<31-1 || next < base {
			return
		}
		enc := appendRolledSegments(nil, []unflushedSeg{{seg: &segment{base: base}, size: size, upTo: next}})
		m, err = decodeRolledSegments(enc)
		if err != nil || len(m) != 1 || m[base] != (rolledSegment{base, size, next}) {
			t.Fatalf("round trip %d %d %d: %v %v", base, size, next, m, err)
		}
	})
}

func ExampleLog_RecoveryPoint() {
	fs := NewMemFS()
	l, _ := Open(fs, "data/t-0", Config{Flush: FlushNever})
	b, _ := kbatch.Encode(kbatch.NewBatch(1, kbatch.Record{Value: []byte("v")}))
	l.AppendLeader(b, 0, 1)
	before := l.RecoveryPoint()
	l.Flush()
	fmt.Println(before, l.RecoveryPoint())
	l.Close()
	// Output: 0 1
}
