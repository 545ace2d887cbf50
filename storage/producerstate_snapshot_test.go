package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

type handEntry struct {
	pid      int64
	epoch    int16
	lastSeq  int32
	lastOff  int64
	offDelta int32
	ts       int64
	coord    int32
	txnFirst int64
}

// handSnapshot writes Kafka's ProducerSnapshot v1 field by field with
// encoding/binary, independently of AppendSnapshot.
func handSnapshot(entries ...handEntry) []byte {
	var body bytes.Buffer
	w := func(v any) { binary.Write(&body, binary.BigEndian, v) }
	w(int32(len(entries)))
	for _, e := range entries {
		w(e.pid)
		w(e.epoch)
		w(e.lastSeq)
		w(e.lastOff)
		w(e.offDelta)
		w(e.ts)
		w(e.coord)
		w(e.txnFirst)
	}
	var out bytes.Buffer
	binary.Write(&out, binary.BigEndian, int16(1))
	binary.Write(&out, binary.BigEndian, crc32.Checksum(body.Bytes(), crc32.MakeTable(crc32.Castagnoli)))
	out.Write(body.Bytes())
	return out.Bytes()
}

func TestSnapshotFileName(t *testing.T) {
	if got := SnapshotFileName(1234); got != "00000000000000001234.snapshot" {
		t.Fatal(got)
	}
	for name, want := range map[string]int64{"00000000000000001234.snapshot": 1234, "5.snapshot": 5} {
		if off, ok := snapshotOffsetFromName(name); !ok || off != want {
			t.Fatalf("%s: %d %v", name, off, ok)
		}
	}
	for _, name := range []string{"x.snapshot", ".snapshot", "00000000000000001234.snapshot.deleted", "1.snapshot.tmp", "-1.snapshot", "00000000000000001234.log"} {
		if _, ok := snapshotOffsetFromName(name); ok {
			t.Fatalf("%s accepted", name)
		}
	}
}

func TestSnapshotMatchesKafkaFormat(t *testing.T) {
	fsys := newStateTestFS()
	s, err := OpenProducerState(fsys, "p", ProducerStateConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// Producer 9: two batches (only the last is written), then a transaction.
	mustApply(t, s, dataHeader(9, 3, 0, 0, 4, 1000, false), ControlRecord{}, OriginVerbatim)
	mustApply(t, s, dataHeader(9, 3, 4, 4, 6, 1001, true), ControlRecord{}, OriginVerbatim)
	// Producer 2: a committed transaction; the marker sets coordinator epoch
	// and timestamp.
	mustApply(t, s, dataHeader(2, 0, 100, 10, 1, 1002, true), ControlRecord{}, OriginVerbatim)
	h, ctl := controlBatch(t, 2, 0, 11, kbatch.ControlCommit, 17, 1003)
	mustApply(t, s, h, ctl, OriginVerbatim)
	// Producer 5: known only from a marker (its data was compacted away).
	h, ctl = controlBatch(t, 5, 8, 12, kbatch.ControlAbort, 4, 1004)
	mustApply(t, s, h, ctl, OriginVerbatim)
	if err := s.TakeSnapshot(); err != nil {
		t.Fatal(err)
	}
	got, ok := fsys.read("p/00000000000000000013.snapshot")
	if !ok {
		t.Fatalf("no snapshot file, have %v", fsys.names())
	}
	want := handSnapshot(
		handEntry{pid: 2, epoch: 0, lastSeq: 100, lastOff: 10, offDelta: 0, ts: 1003, coord: 17, txnFirst: -1},
		handEntry{pid: 5, epoch: 8, lastSeq: -1, lastOff: -1, offDelta: 0, ts: 1004, coord: 4, txnFirst: -1},
		handEntry{pid: 9, epoch: 3, lastSeq: 9, lastOff: 9, offDelta: 5, ts: 1001, coord: -1, txnFirst: 4},
	)
	if !bytes.Equal(got, want) {
		t.Fatalf("snapshot\n got %x\nwant %x", got, want)
	}
	if _, ok := fsys.read("p/00000000000000000013.snapshot.tmp"); ok {
		t.Fatal("temporary file left")
	}
	if off, ok := s.LatestSnapshotOffset(); !ok || off != 13 {
		t.Fatalf("latest snapshot %d %v", off, ok)
	}
	// No new data: no new snapshot.
	if err := s.TakeSnapshot(); err != nil {
		t.Fatal(err)
	}
	if n := len(s.SnapshotOffsets()); n != 1 {
		t.Fatalf("%d snapshots", n)
	}
}

func TestSnapshotLoadKafkaFile(t *testing.T) {
	fsys := newStateTestFS()
	fsys.write("p/00000000000000000500.snapshot", handSnapshot(
		handEntry{pid: 1, epoch: 2, lastSeq: 41, lastOff: 480, offDelta: 9, ts: 10_000, coord: -1, txnFirst: -1},
		handEntry{pid: 3, epoch: 0, lastSeq: 4, lastOff: 490, offDelta: 4, ts: 1, coord: 2, txnFirst: 470},
		handEntry{pid: 4, epoch: 0, lastSeq: 4, lastOff: 495, offDelta: 4, ts: 1, coord: 2, txnFirst: -1}, // expired
		handEntry{pid: 6, epoch: 1, lastSeq: -1, lastOff: -1, offDelta: 0, ts: 10_000, coord: 3, txnFirst: -1},
	))
	s, err := OpenProducerState(fsys, "p", ProducerStateConfig{ProducerIDExpirationMs: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.TruncateAndReload(0, 600, 12_000); err != nil {
		t.Fatal(err)
	}
	if s.MapEndOffset() != 500 {
		t.Fatalf("map end %d", s.MapEndOffset())
	}
	got := s.Producers()
	want := []ProducerInfo{
		{ProducerID: 1, Epoch: 2, LastSequence: 41, LastTimestamp: 10_000, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1,
			Batches: []BatchMetadata{{LastSeq: 41, LastOffset: 480, OffsetDelta: 9, Timestamp: 10_000}}},
		{ProducerID: 3, Epoch: 0, LastSequence: 4, LastTimestamp: 1, CoordinatorEpoch: 2, CurrentTxnFirstOffset: 470,
			Batches: []BatchMetadata{{LastSeq: 4, LastOffset: 490, OffsetDelta: 4, Timestamp: 1}}},
		{ProducerID: 6, Epoch: 1, LastSequence: -1, LastTimestamp: 10_000, CoordinatorEpoch: 3, CurrentTxnFirstOffset: -1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded\n%+v\nwant\n%+v", got, want)
	}
	if off, ok := s.FirstUnstableOffset(); !ok || off != 470 {
		t.Fatalf("first unstable %d %v", off, ok)
	}
	// The retained batch still answers a retry; the next sequence follows it.
	r, _, err := apply(s, dataHeader(1, 2, 32, 600, 10, 5, false), ControlRecord{}, OriginClient)
	if err != nil || !r.Duplicate || r.Original.FirstOffset() != 471 || r.Original.LastOffset != 480 {
		t.Fatalf("retry after load: %+v %v", r, err)
	}
	mustApply(t, s, dataHeader(1, 2, 42, 600, 1, 5, false), ControlRecord{}, OriginClient)
}

func TestSnapshotTruncateAndReload(t *testing.T) {
	fsys := newStateTestFS()
	s, _ := OpenProducerState(fsys, "p", ProducerStateConfig{})
	// Snapshots at 10, 20, 30 with producer 1 at sequences 9, 19, 29.
	for i := int64(0); i < 3; i++ {
		mustApply(t, s, dataHeader(1, 0, int32(i*10), i*10, 10, 1, false), ControlRecord{}, OriginClient)
		if err := s.TakeSnapshot(); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.SnapshotOffsets(); !reflect.DeepEqual(got, []int64{10, 20, 30}) {
		t.Fatalf("snapshots %v", got)
	}
	// Same end offset: nothing reloaded, snapshots at/below the start removed.
	if err := s.TruncateAndReload(10, 30, 0); err != nil {
		t.Fatal(err)
	}
	if got := s.SnapshotOffsets(); !reflect.DeepEqual(got, []int64{20, 30}) {
		t.Fatalf("snapshots %v", got)
	}
	if p, _ := s.Producer(1); len(p.Batches) != 3 {
		t.Fatalf("in-memory state dropped: %+v", p)
	}
	// Truncation to 25: the snapshot at 30 goes, 20 is loaded.
	if err := s.TruncateAndReload(10, 25, 0); err != nil {
		t.Fatal(err)
	}
	if got := s.SnapshotOffsets(); !reflect.DeepEqual(got, []int64{20}) {
		t.Fatalf("snapshots %v", got)
	}
	if _, ok := fsys.read("p/00000000000000000030.snapshot"); ok {
		t.Fatal("snapshot above the end not deleted")
	}
	if p, _ := s.Producer(1); p.LastSequence != 19 || s.MapEndOffset() != 20 {
		t.Fatalf("reloaded %+v map end %d", p, s.MapEndOffset())
	}
	// A corrupt newest snapshot is deleted and the next older one used.
	mustApply(t, s, dataHeader(1, 0, 20, 20, 10, 1, false), ControlRecord{}, OriginClient)
	if err := s.TakeSnapshot(); err != nil {
		t.Fatal(err)
	}
	data, _ := fsys.read("p/00000000000000000030.snapshot")
	data[len(data)-1] ^= 1
	fsys.write("p/00000000000000000030.snapshot", data)
	if err := s.TruncateAndReload(0, 35, 0); err != nil {
		t.Fatal(err)
	}
	if got := s.SnapshotOffsets(); !reflect.DeepEqual(got, []int64{20}) {
		t.Fatalf("snapshots after corrupt load %v", got)
	}
	if p, _ := s.Producer(1); p.LastSequence != 19 {
		t.Fatalf("state %+v", p)
	}
	// No snapshot left: state is empty from the log start.
	if err := s.TruncateAndReload(20, 35, 0); err != nil {
		t.Fatal(err)
	}
	if s.ProducerCount() != 0 || s.MapEndOffset() != 20 || len(s.SnapshotOffsets()) != 0 {
		t.Fatalf("count %d map end %d snapshots %v", s.ProducerCount(), s.MapEndOffset(), s.SnapshotOffsets())
	}
}

func TestSnapshotDeletionAndFullTruncation(t *testing.T) {
	fsys := newStateTestFS()
	for _, off := range []int64{5, 10, 15, 20} {
		fsys.write("p/"+SnapshotFileName(off), handSnapshot())
	}
	fsys.write("p/00000000000000000099.snapshot.tmp", []byte("partial"))
	fsys.write("p/00000000000000000005.log", nil)
	s, err := OpenProducerState(fsys, "p", ProducerStateConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fsys.read("p/00000000000000000099.snapshot.tmp"); ok {
		t.Fatal("temporary snapshot not cleaned up")
	}
	if got := s.SnapshotOffsets(); !reflect.DeepEqual(got, []int64{5, 10, 15, 20}) {
		t.Fatalf("scanned %v", got)
	}
	if err := s.DeleteSnapshotsBefore(10); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSnapshotsAbove(15); err != nil {
		t.Fatal(err)
	}
	if got := s.SnapshotOffsets(); !reflect.DeepEqual(got, []int64{10, 15}) {
		t.Fatalf("after deletes %v", got)
	}
	if off, _ := s.OldestSnapshotOffset(); off != 10 {
		t.Fatal(off)
	}
	if err := s.TruncateFullyAndStartAt(77); err != nil {
		t.Fatal(err)
	}
	if len(s.SnapshotOffsets()) != 0 || s.MapEndOffset() != 77 {
		t.Fatalf("after full truncation %v %d", s.SnapshotOffsets(), s.MapEndOffset())
	}
	if got := fsys.names(); !reflect.DeepEqual(got, []string{"p/00000000000000000005.log"}) {
		t.Fatalf("files %v", got)
	}
}

func TestSnapshotRemoveStray(t *testing.T) {
	cases := []struct {
		snaps, segs, want []int64
	}{
		{[]int64{0, 10, 20, 25}, []int64{0, 10, 20}, []int64{0, 10, 20, 25}}, // clean shutdown snapshot kept
		{[]int64{0, 5, 10, 20}, []int64{0, 10, 20}, []int64{0, 10, 20}},      // stray below the last segment
		{[]int64{3, 7, 30, 40}, []int64{0, 10, 20}, []int64{40}},             // only the newest stray survives
		{[]int64{5}, nil, []int64{5}},
	}
	for _, tc := range cases {
		fsys := newStateTestFS()
		for _, off := range tc.snaps {
			fsys.write("p/"+SnapshotFileName(off), handSnapshot())
		}
		s, _ := OpenProducerState(fsys, "p", ProducerStateConfig{})
		if err := s.RemoveStraySnapshots(tc.segs); err != nil {
			t.Fatal(err)
		}
		if got := s.SnapshotOffsets(); !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("snaps %v segs %v: kept %v, want %v", tc.snaps, tc.segs, got, tc.want)
		}
		if n := len(fsys.names()); n != len(tc.want) {
			t.Fatalf("%d files left", n)
		}
	}
}

func TestSnapshotWriteError(t *testing.T) {
	fsys := newStateTestFS()
	s, _ := OpenProducerState(fsys, "p", ProducerStateConfig{})
	mustApply(t, s, dataHeader(1, 0, 0, 0, 1, 1, false), ControlRecord{}, OriginClient)
	fsys.failOp["sync"] = errors.New("injected EIO")
	if err := s.TakeSnapshot(); err == nil || !strings.Contains(err.Error(), "EIO") {
		t.Fatalf("err %v", err)
	}
	if len(s.SnapshotOffsets()) != 0 {
		t.Fatal("failed snapshot recorded")
	}
	if err := s.TakeSnapshot(); err != nil {
		t.Fatal(err)
	}
	if got := s.SnapshotOffsets(); !reflect.DeepEqual(got, []int64{1}) {
		t.Fatal(got)
	}
}

func TestParseSnapshotErrors(t *testing.T) {
	good := handSnapshot(handEntry{pid: 1, epoch: 0, lastSeq: 1, lastOff: 1, offDelta: 0, ts: 1, coord: 0, txnFirst: -1})
	badVersion := append([]byte{}, good...)
	badVersion[1] = 2
	badCount := handSnapshot()
	binary.BigEndian.PutUint32(badCount[6:], 1) // count 1, no entry bytes (CRC refreshed below)
	binary.BigEndian.PutUint32(badCount[2:], crc32.Checksum(badCount[6:], crc32.MakeTable(crc32.Castagnoli)))
	cases := map[string]struct {
		in  []byte
		msg string
	}{
		"short":   {good[:9], "shorter than"},
		"version": {badVersion, "unknown file version 2"},
		"crc":     {append(append([]byte{}, good[:len(good)-1]...), good[len(good)-1]^0xff), "CRC"},
		"count":   {badCount, "1 entries announced, 0 bytes"},
		"partial": {good[:len(good)-3], "CRC"},
	}
	for name, tc := range cases {
		_, err := ParseSnapshot(tc.in)
		if !errors.Is(err, ErrCorruptSnapshot) || !strings.Contains(err.Error(), tc.msg) {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// Property (recovery): for random mirrored logs, loading the newest
// snapshot at or below a crash point and replaying the log suffix in
// verbatim mode gives the same producer state (as a snapshot would record
// it), the same open transactions and the same first unstable offset as
// replaying the whole prefix. MIRROR_PID_RESET barriers in the prefix or
// the suffix are honoured either way.
func TestProducerStateRecoveryProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	var fromSnapshot, withTxns, withProducers int
	for iter := 0; iter < 200; iter++ {
		log := randomLog(t, rng, 60)
		fsys := newStateTestFS()
		full, _ := OpenProducerState(fsys, "p", ProducerStateConfig{})
		for _, b := range log {
			mustApply(t, full, b.h, b.ctl, OriginVerbatim)
			if rng.Intn(5) == 0 {
				if err := full.TakeSnapshot(); err != nil {
					t.Fatal(err)
				}
			}
		}
		crash := rng.Intn(len(log) + 1)
		logEnd := int64(0)
		if crash > 0 {
			logEnd = log[crash-1].h.NextOffset()
		}
		// Reference: the prefix replayed from nothing.
		ref := newTestProducerState(t)
		for _, b := range log[:crash] {
			mustApply(t, ref, b.h, b.ctl, OriginVerbatim)
		}
		// Recovered: newest snapshot <= logEnd, then the suffix.
		rec, err := OpenProducerState(fsys, "p", ProducerStateConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if err := rec.TruncateAndReload(0, logEnd, 0); err != nil {
			t.Fatal(err)
		}
		from := rec.MapEndOffset()
		for _, b := range log[:crash] {
			if b.h.BaseOffset >= from {
				mustApply(t, rec, b.h, b.ctl, OriginVerbatim)
			}
		}
		if a, b := rec.SnapshotEntries(), ref.SnapshotEntries(); !reflect.DeepEqual(a, b) {
			t.Fatalf("iter %d crash %d (end %d, from %d): recovered\n%+v\nreference\n%+v", iter, crash, logEnd, from, a, b)
		}
		if a, b := rec.OngoingTxns(), ref.OngoingTxns(); !reflect.DeepEqual(a, b) {
			t.Fatalf("iter %d: ongoing %v vs %v", iter, a, b)
		}
		au, aok := rec.FirstUndecidedOffset()
		bu, bok := ref.FirstUndecidedOffset()
		if au != bu || aok != bok {
			t.Fatalf("iter %d: first undecided %d/%v vs %d/%v", iter, au, aok, bu, bok)
		}
		if rec.MapEndOffset() != logEnd && crash > 0 {
			t.Fatalf("iter %d: map end %d, log end %d", iter, rec.MapEndOffset(), logEnd)
		}
		if from > 0 {
			fromSnapshot++
		}
		if len(ref.OngoingTxns()) > 0 {
			withTxns++
		}
		if ref.ProducerCount() > 0 {
			withProducers++
		}
	}
	// The property must not hold vacuously.
	if fromSnapshot < 50 || withTxns < 20 || withProducers < 50 {
		t.Fatalf("weak coverage: %d from a snapshot, %d with open transactions, %d with producers", fromSnapshot, withTxns, withProducers)
	}
	t.Logf("%d recoveries from a snapshot, %d with open transactions, %d with producers", fromSnapshot, withTxns, withProducers)
}

type logBatch struct {
	h   *kbatch.Header
	ctl ControlRecord
}

// randomLog generates a plausible mirrored log: several producers with
// idempotent and transactional batches, markers (sometimes without their
// data), batches without producer id, offset gaps and the occasional
// MIRROR_PID_RESET.
func randomLog(t testing.TB, rng *rand.Rand, n int) []logBatch {
	type prod struct {
		epoch int16
		seq   int32
		inTxn bool
	}
	prods := map[int64]*prod{}
	var out []logBatch
	off := int64(rng.Intn(3))
	for len(out) < n {
		pid := int64(rng.Intn(4))
		p := prods[pid]
		if p == nil {
			p = &prod{}
			prods[pid] = p
		}
		ts := int64(1000 + len(out))
		switch r := rng.Intn(20); {
		case r < 10:
			cnt := int32(1 + rng.Intn(4))
			txn := p.inTxn || rng.Intn(3) == 0
			out = append(out, logBatch{h: dataHeader(pid, p.epoch, p.seq, off, cnt, ts, txn)})
			p.seq += cnt
			p.inTxn = txn
			off += int64(cnt)
		case r < 15:
			typ := kbatch.ControlCommit
			if rng.Intn(2) == 0 {
				typ = kbatch.ControlAbort
			}
			epoch := p.epoch
			if rng.Intn(3) == 0 { // transaction version 2 bump
				epoch++
				p.epoch, p.seq = epoch, 0
			}
			h, ctl := controlBatch(t, pid, epoch, off, typ, int32(rng.Intn(3)), ts)
			out = append(out, logBatch{h: h, ctl: ctl})
			p.inTxn = false
			off++
		case r < 17:
			out = append(out, logBatch{h: dataHeader(-1, -1, -1, off, 2, ts, false)})
			off += 2
		case r < 18:
			h, ctl := controlBatch(t, -1, -1, off, kbatch.ControlMirrorPidReset, 0, ts)
			out = append(out, logBatch{h: h, ctl: ctl})
			prods = map[int64]*prod{}
			off++
		default:
			off += int64(1 + rng.Intn(5)) // compaction gap
		}
	}
	return out
}

func FuzzProducerSnapshot(f *testing.F) {
	f.Add(handSnapshot(), false)
	f.Add(handSnapshot(handEntry{pid: 1, epoch: 2, lastSeq: 41, lastOff: 480, offDelta: 9, ts: 10_000, coord: -1, txnFirst: -1}), false)
	f.Add(handSnapshot(
		handEntry{pid: 3, epoch: 0, lastSeq: 4, lastOff: 490, offDelta: 4, ts: 1, coord: 2, txnFirst: 470},
		handEntry{pid: 3, epoch: 1, lastSeq: -1, lastOff: -1, offDelta: 0, ts: 1, coord: 2, txnFirst: 480},
	), true)
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 1}, true)
	f.Fuzz(func(t *testing.T, b []byte, fixCRC bool) {
		// With fixCRC the fuzzer explores the entries behind a valid CRC.
		if fixCRC && len(b) >= snapshotEntriesStart {
			binary.BigEndian.PutUint32(b[snapshotCRCOffset:], crc32.Checksum(b[snapshotEntriesStart:], crc32.MakeTable(crc32.Castagnoli)))
		}
		entries, parseErr := ParseSnapshot(b)
		if parseErr != nil {
			if !errors.Is(parseErr, ErrCorruptSnapshot) {
				t.Fatalf("error does not wrap ErrCorruptSnapshot: %v", parseErr)
			}
		} else if got := AppendSnapshot(nil, entries); !bytes.Equal(got, b) {
			t.Fatal("accepted snapshot does not re-encode to its bytes")
		}
		// Loading through the state: a corrupt file is deleted, a valid
		// one yields a consistent state; never a panic.
		fsys := newStateTestFS()
		fsys.write("p/"+SnapshotFileName(100), b)
		s, err := OpenProducerState(fsys, "p", ProducerStateConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.TruncateAndReload(0, 200, 0); err != nil {
			t.Fatal(err)
		}
		_, exists := fsys.read("p/" + SnapshotFileName(100))
		if exists != (parseErr == nil) || (len(s.SnapshotOffsets()) == 1) != (parseErr == nil) {
			t.Fatalf("file kept=%v, known %v, parse error %v", exists, s.SnapshotOffsets(), parseErr)
		}
		if parseErr == nil {
			if s.MapEndOffset() != 100 {
				t.Fatalf("map end %d", s.MapEndOffset())
			}
			if s.ProducerCount() > len(entries) {
				t.Fatalf("%d producers from %d entries", s.ProducerCount(), len(entries))
			}
		} else if s.ProducerCount() != 0 || s.MapEndOffset() != 0 {
			t.Fatalf("state from a rejected snapshot: %d producers, map end %d", s.ProducerCount(), s.MapEndOffset())
		}
		for _, o := range s.OngoingTxns() {
			p, ok := s.Producer(o.ProducerID)
			if !ok || p.CurrentTxnFirstOffset != o.FirstOffset {
				t.Fatalf("ongoing %+v does not match producer %+v", o, p)
			}
		}
		// The loaded state keeps working.
		h := dataHeader(1, 0, 0, 200, 1, 1, false)
		if _, err := s.Prepare(h, ControlRecord{}, OriginVerbatim); err != nil {
			t.Fatal(err)
		}
		s.Commit(nil)
	})
}

func TestSnapshotWithoutFilesystem(t *testing.T) {
	s := newTestProducerState(t)
	if err := s.TakeSnapshot(); err != nil { // nothing to write yet
		t.Fatal(err)
	}
	mustApply(t, s, dataHeader(1, 0, 0, 0, 1, 1, false), ControlRecord{}, OriginClient)
	if err := s.TakeSnapshot(); err == nil {
		t.Fatal("snapshot without a filesystem succeeded")
	}
	if err := s.TruncateAndReload(0, 5, 0); err != nil {
		t.Fatal(err)
	}
	if s.ProducerCount() != 0 || s.MapEndOffset() != 0 {
		t.Fatal("reload without snapshots kept state")
	}
}
