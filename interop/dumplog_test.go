package interop

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
	"github.com/verbatim-kafka/verbatim/storage"
)

const dumpBaseTs = int64(1_764_000_000_000)

// dumpLogSpec is one batch the DumpLogSegments test writes.
type dumpLogSpec struct {
	name   string
	leader bool // AppendLeader (offset and epoch assigned) instead of AppendVerbatim
	b      kbatch.Batch
}

// dumpRecords returns n records with keys, values and (every other
// record) headers; no spaces, so DumpLogSegments' output stays tokenisable.
func dumpRecords(tag string, n int, offsetStep int32) []kbatch.Record {
	recs := make([]kbatch.Record, n)
	for i := range recs {
		r := kbatch.Record{
			TimestampDelta: int64(i),
			OffsetDelta:    int32(i) * offsetStep,
			Key:            []byte(fmt.Sprintf("%s-key-%d", tag, i)),
			Value:          []byte(fmt.Sprintf("%s-value-%d-%s", tag, i, strings.Repeat("x", 20+i))),
		}
		if i%2 == 1 {
			r.Headers = []kbatch.RecordHeader{{Key: "h1", Value: []byte("v1")}, {Key: "h2"}}
		}
		recs[i] = r
	}
	return recs
}

// dumpLogSpecs is the log written by TestDumpLogSegmentsReadsVerbatimLog:
// every codec, idempotent and transactional data, COMMIT and ABORT markers,
// an empty batch and a compacted batch (gaps), three leader epochs, and
// leader appends mixed in.
func dumpLogSpecs() []dumpLogSpec {
	var specs []dumpLogSpec
	next := int64(0)
	ts := dumpBaseTs
	add := func(name string, epoch int32, b kbatch.Batch) {
		b.BaseOffset = next
		b.LeaderEpoch = epoch
		b.BaseTimestamp = ts
		specs = append(specs, dumpLogSpec{name: name, b: b})
		lod := b.LastOffsetDelta
		if lod < 0 {
			lod = b.Records[len(b.Records)-1].OffsetDelta
		}
		next += int64(lod) + 1
		ts += 1000
	}
	plain := func(tag string, codec kbatch.Codec, n int) kbatch.Batch {
		b := kbatch.NewBatch(0, dumpRecords(tag, n, 1)...)
		b.Attributes = int16(codec)
		return b
	}
	idem := func(b kbatch.Batch, pid int64, pe int16, seq int32, txn bool) kbatch.Batch {
		b.ProducerID, b.ProducerEpoch, b.BaseSequence = pid, pe, seq
		if txn {
			b.Attributes |= kbatch.TransactionalBit
		}
		return b
	}
	marker := func(typ int16, pid int64, pe int16) kbatch.Batch {
		b := kbatch.NewBatch(0, kbatch.Record{Key: kbatch.ControlKey(typ), Value: kbatch.EndTxnMarkerValue(7)})
		b.Attributes = kbatch.ControlBit | kbatch.TransactionalBit
		b.ProducerID, b.ProducerEpoch, b.BaseSequence = pid, pe, -1
		return b
	}

	add("plain", 0, plain("plain", kbatch.CodecNone, 5))
	add("gzip", 0, plain("gzip", kbatch.CodecGzip, 10))
	add("snappy", 0, plain("snappy", kbatch.CodecSnappy, 10))
	add("lz4", 0, plain("lz4", kbatch.CodecLZ4, 10))
	add("zstd", 0, plain("zstd", kbatch.CodecZstd, 10))
	add("idempotent", 0, idem(plain("idem1", kbatch.CodecNone, 5), 1000, 0, 0, false))
	add("idempotent-lz4", 0, idem(plain("idem2", kbatch.CodecLZ4, 5), 1000, 0, 5, false))
	add("txn-a", 2, idem(plain("txna", kbatch.CodecNone, 3), 2000, 1, 0, true))
	add("txn-b", 2, idem(plain("txnb", kbatch.CodecGzip, 2), 2001, 0, 0, true))
	add("commit-a", 2, marker(kbatch.ControlCommit, 2000, 1))
	add("abort-b", 2, marker(kbatch.ControlAbort, 2001, 0))
	next += 8 // a gap, as compaction leaves
	empty := idem(kbatch.NewBatch(0), 3000, 0, 10, false)
	empty.LastOffsetDelta = 4
	empty.MaxTimestamp = ts + 4
	add("empty", 2, empty)
	compacted := plain("compacted", kbatch.CodecNone, 3)
	compacted.Records = dumpRecords("compacted", 3, 4) // offset deltas 0, 4, 8
	compacted.LastOffsetDelta = 9
	add("compacted", 2, compacted)
	tomb := kbatch.NewBatch(0, kbatch.Record{Key: []byte("compacted-key-1")}) // a tombstone
	tomb.Attributes = kbatch.DeleteHorizonBit                                 // BaseTimestamp is the delete horizon
	add("tombstone-horizon", 2, tomb)
	add("txn-c-zstd", 5, idem(plain("txnc", kbatch.CodecZstd, 3), 2002, 0, 0, true))
	add("abort-c", 5, marker(kbatch.ControlAbort, 2002, 0))
	add("txn-d-open", 5, idem(plain("txnd", kbatch.CodecSnappy, 2), 2003, 0, 0, true))
	for i := 0; i < 3; i++ {
		b := plain(fmt.Sprintf("leader%d", i), kbatch.Codec(i%5), 4)
		add(fmt.Sprintf("leader-%d", i), 5, b)
		specs[len(specs)-1].leader = true
	}
	return specs
}

// TestDumpLogSegmentsReadsVerbatimLog writes a partition log with storage
// (the OS filesystem, several segments) and checks that Kafka 4.4's
// DumpLogSegments reads every file back as written: batches field by field,
// records, the offset and time indexes (sanity check and verification
// against the log), the transaction index and the producer snapshot. The
// leader-epoch checkpoint is not a DumpLogSegments input; it is parsed.
func TestDumpLogSegmentsReadsVerbatimLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dumped-0")
	cfg := storage.Config{SegmentBytes: 1400, IndexIntervalBytes: 100, NowMs: func() int64 { return dumpBaseTs + 500_000 }}
	l, err := storage.Open(storage.OSFS{}, dir, cfg)
	if err != nil {
		t.Fatalf("storage.Open: %v", err)
	}
	specs := dumpLogSpecs()
	var want [][]byte // the batches as they must be stored
	for _, s := range specs {
		raw, err := kbatch.Encode(s.b)
		if err != nil {
			t.Fatalf("%s: encode: %v", s.name, err)
		}
		if s.leader {
			// A client batch: base offset 0, the log assigns offset and epoch.
			stored := bytes.Clone(raw)
			kbatch.SetBaseOffset(raw, 0)
			kbatch.SetLeaderEpoch(raw, -1)
			res, err := l.AppendLeader(raw, s.b.LeaderEpoch, dumpBaseTs+500_000)
			if err != nil {
				t.Fatalf("%s: AppendLeader: %v", s.name, err)
			}
			if res.FirstOffset != s.b.BaseOffset {
				t.Fatalf("%s: AppendLeader assigned %d, want %d", s.name, res.FirstOffset, s.b.BaseOffset)
			}
			want = append(want, stored)
			continue
		}
		res, err := l.AppendVerbatim(raw)
		if err != nil {
			t.Fatalf("%s: AppendVerbatim at %d: %v", s.name, s.b.BaseOffset, err)
		}
		if res.FirstOffset != s.b.BaseOffset || res.AlreadyPresent {
			t.Fatalf("%s: AppendVerbatim = %+v, want first offset %d", s.name, res, s.b.BaseOffset)
		}
		want = append(want, bytes.Clone(raw))
	}
	leo := l.LogEndOffset()
	if l.NumSegments() < 3 {
		t.Fatalf("only %d segments; the test needs rolls", l.NumSegments())
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	// What storage put on disk is exactly what was appended.
	sameBatches(t, "segment files", readLogBatches(t, dir), want)

	logs := segmentFiles(t, dir, ".log")
	t.Logf("%d segments, log end %d", len(logs), leo)

	// --- the .log files, deep iteration with payloads ---
	args := []string{"--files", strings.Join(logs, ","), "--print-data-log", "--deep-iteration"}
	res := JavaTool(t, "kafka-dump-log", args...)
	checkDumpedBatches(t, res.Stdout, want)

	// --- offset and time indexes ---
	idx := append(segmentFiles(t, dir, ".index"), segmentFiles(t, dir, ".timeindex")...)
	if len(idx) != 2*len(logs) {
		t.Fatalf("want an .index and a .timeindex per segment, found %v", idx)
	}
	res = JavaTool(t, "kafka-dump-log", "--files", strings.Join(idx, ","), "--index-sanity-check")
	checkIndexDump(t, "--index-sanity-check", res, idx)
	res = JavaTool(t, "kafka-dump-log", "--files", strings.Join(idx, ","), "--verify-index-only")
	checkIndexDump(t, "--verify-index-only", res, idx)
	res = JavaTool(t, "kafka-dump-log", "--files", strings.Join(idx, ","))
	checkIndexEntries(t, res.Stdout, want)

	// --- transaction index: the two aborted transactions ---
	txn := segmentFiles(t, dir, ".txnindex")
	if len(txn) == 0 {
		t.Fatalf("no .txnindex written for a log with ABORT markers")
	}
	res = JavaTool(t, "kafka-dump-log", "--files", strings.Join(txn, ","))
	checkTxnIndexDump(t, res.Stdout, specs)

	// --- producer snapshot at the log end ---
	snaps := segmentFiles(t, dir, storage.SnapshotSuffix)
	if len(snaps) == 0 || filepath.Base(snaps[len(snaps)-1]) != storage.SnapshotFileName(leo) {
		t.Fatalf("snapshots %v: want one at the log end %d after a clean close", snaps, leo)
	}
	res = JavaTool(t, "kafka-dump-log", "--files", snaps[len(snaps)-1])
	checkSnapshotDump(t, res.Stdout, specs)

	// --- leader-epoch checkpoint (not a DumpLogSegments input) ---
	cp, err := os.ReadFile(filepath.Join(dir, storage.LeaderEpochCheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := storage.ParseEpochCheckpoint(cp)
	if err != nil {
		t.Fatalf("leader-epoch-checkpoint %q: %v", cp, err)
	}
	var wantEpochs []storage.EpochEntry
	for _, s := range specs {
		if n := len(wantEpochs); n == 0 || wantEpochs[n-1].Epoch != s.b.LeaderEpoch {
			wantEpochs = append(wantEpochs, storage.EpochEntry{Epoch: s.b.LeaderEpoch, StartOffset: s.b.BaseOffset})
		}
	}
	if fmt.Sprint(entries) != fmt.Sprint(wantEpochs) {
		t.Fatalf("leader-epoch-checkpoint = %v, want %v (file %q)", entries, wantEpochs, cp)
	}
	if !strings.HasPrefix(string(cp), "0\n"+strconv.Itoa(len(wantEpochs))+"\n") {
		t.Fatalf("leader-epoch-checkpoint header: %q", cp)
	}
}

// checkDumpedBatches compares DumpLogSegments' batch and record lines with
// the batches written.
func checkDumpedBatches(t *testing.T, out string, want [][]byte) {
	t.Helper()
	if strings.Contains(out, "isvalid: false") || strings.Contains(strings.ToLower(out), "exception") {
		t.Fatalf("DumpLogSegments reports invalid batches:\n%s", tail(out, 40))
	}
	var batchLines [][]string // per batch: header line then record lines
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimLeft(l, " \t") // payloads may end in spaces: keep them
		switch {
		case strings.HasPrefix(l, "baseOffset:"):
			batchLines = append(batchLines, []string{l})
		case strings.HasPrefix(l, "| offset:"):
			if len(batchLines) == 0 {
				t.Fatalf("record line before any batch: %q", l)
			}
			batchLines[len(batchLines)-1] = append(batchLines[len(batchLines)-1], l)
		}
	}
	if len(batchLines) != len(want) {
		t.Fatalf("DumpLogSegments printed %d batches, want %d:\n%s", len(batchLines), len(want), tail(out, 60))
	}
	for i, raw := range want {
		h, _ := kbatch.ParseHeader(raw)
		got := dumpFields(batchLines[i][0])
		exp := map[string]string{
			"baseOffset":           strconv.FormatInt(h.BaseOffset, 10),
			"lastOffset":           strconv.FormatInt(h.LastOffset(), 10),
			"count":                strconv.Itoa(int(h.RecordCount)),
			"baseSequence":         strconv.Itoa(int(h.BaseSequence)),
			"producerId":           strconv.FormatInt(h.ProducerID, 10),
			"producerEpoch":        strconv.Itoa(int(h.ProducerEpoch)),
			"partitionLeaderEpoch": strconv.Itoa(int(h.LeaderEpoch)),
			"isTransactional":      strconv.FormatBool(h.IsTransactional()),
			"isControl":            strconv.FormatBool(h.IsControl()),
			"compresscodec":        codecName(h.Codec()),
			"crc":                  strconv.FormatUint(uint64(h.CRC), 10),
			"isvalid":              "true",
			"size":                 strconv.Itoa(h.Size()),
			"magic":                "2",
			"CreateTime":           strconv.FormatInt(h.MaxTimestamp, 10),
		}
		if h.HasDeleteHorizon() {
			exp["deleteHorizonMs"] = fmt.Sprintf("OptionalLong[%d]", h.BaseTimestamp)
		} else {
			exp["deleteHorizonMs"] = "OptionalLong.empty"
		}
		if h.BaseSequence >= 0 {
			exp["lastSequence"] = strconv.Itoa(int(h.LastSequence()))
		} else {
			exp["lastSequence"] = "-1"
		}
		for k, v := range exp {
			if got[k] != v {
				t.Errorf("batch %d (%s): %s = %q, want %q\n%s", i, describeBatch(raw), k, got[k], v, batchLines[i][0])
			}
		}
		recs, err := kbatch.Records(raw)
		if err != nil {
			t.Fatalf("batch %d: records: %v", i, err)
		}
		recLines := batchLines[i][1:]
		if len(recLines) != len(recs) {
			t.Errorf("batch %d (%s): %d record lines, want %d", i, describeBatch(raw), len(recLines), len(recs))
			continue
		}
		for j, r := range recs {
			f := dumpFields(recLines[j])
			off := h.BaseOffset + int64(r.OffsetDelta)
			if f["offset"] != strconv.FormatInt(off, 10) {
				t.Errorf("batch %d record %d: offset %q, want %d", i, j, f["offset"], off)
			}
			if f["CreateTime"] != strconv.FormatInt(h.BaseTimestamp+r.TimestampDelta, 10) {
				t.Errorf("batch %d record %d: CreateTime %q, want %d", i, j, f["CreateTime"], h.BaseTimestamp+r.TimestampDelta)
			}
			if h.IsControl() {
				typ, _ := kbatch.ControlType(raw)
				name := map[int16]string{kbatch.ControlAbort: "ABORT", kbatch.ControlCommit: "COMMIT"}[typ]
				coord := "?"
				if len(r.Value) >= 6 { // version int16, coordinator epoch int32
					coord = strconv.Itoa(int(int32(binary.BigEndian.Uint32(r.Value[2:6]))))
				}
				if f["endTxnMarker"] != name || f["coordinatorEpoch"] != coord {
					t.Errorf("batch %d: control record %q, want endTxnMarker %s coordinatorEpoch %s", i, recLines[j], name, coord)
				}
				continue
			}
			valueSize := len(r.Value)
			if r.Value == nil {
				valueSize = -1 // a tombstone: no payload printed
			}
			keySize := len(r.Key)
			if r.Key == nil {
				keySize = -1 // a null key: no key printed
			}
			if f["keySize"] != strconv.Itoa(keySize) || f["valueSize"] != strconv.Itoa(valueSize) {
				t.Errorf("batch %d record %d: sizes in %q, want key %d value %d", i, j, recLines[j], keySize, valueSize)
			}
			_, hasKey := f["key"]
			if _, has := f["payload"]; f["key"] != string(r.Key) || f["payload"] != string(r.Value) || has != (r.Value != nil) || hasKey != (r.Key != nil) {
				t.Errorf("batch %d record %d: key/payload in %q, want %q/%q", i, j, recLines[j], r.Key, r.Value)
			}
			var hk []string
			for _, rh := range r.Headers {
				hk = append(hk, rh.Key)
			}
			if f["headerKeys"] != "["+strings.Join(hk, ",")+"]" {
				t.Errorf("batch %d record %d: headerKeys %q, want %v", i, j, f["headerKeys"], hk)
			}
			seq := int64(-1)
			if h.BaseSequence >= 0 {
				seq = int64(h.BaseSequence) + int64(r.OffsetDelta)
			}
			if f["sequence"] != strconv.FormatInt(seq, 10) {
				t.Errorf("batch %d record %d: sequence %q, want %d", i, j, f["sequence"], seq)
			}
		}
	}
}

// checkIndexDump fails when DumpLogSegments reports a problem with an index.
func checkIndexDump(t *testing.T, mode string, res *Result, files []string) {
	t.Helper()
	all := res.Stdout + res.Stderr
	low := strings.ToLower(all)
	for _, bad := range []string{"mismatch", "corrupt", "error", "exception", "failed", "invalid"} {
		if strings.Contains(low, bad) {
			t.Errorf("DumpLogSegments %s reports %q:\n%s", mode, bad, tail(all, 40))
		}
	}
	for _, f := range files {
		if !strings.Contains(all, "Dumping "+f) {
			t.Errorf("DumpLogSegments %s did not dump %s:\n%s", mode, f, tail(all, 40))
		}
	}
	if mode != "--index-sanity-check" {
		return
	}
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		verdict := f + " passed sanity check."
		if st.Size() == 0 {
			verdict = f + " is empty."
		}
		if !strings.Contains(all, verdict) {
			t.Errorf("DumpLogSegments %s: no %q:\n%s", mode, verdict, tail(all, 40))
		}
	}
}

// checkIndexEntries checks that every offset index entry printed
// ("offset: N position: P") points at the start of a batch containing N and
// every time index entry ("timestamp: T offset: N") names a batch whose max
// timestamp is T and whose last offset is N.
func checkIndexEntries(t *testing.T, out string, want [][]byte) {
	t.Helper()
	type loc struct {
		first int64
		last  int64
		maxTs int64
	}
	var batches []loc
	for _, b := range want {
		h, _ := kbatch.ParseHeader(b)
		batches = append(batches, loc{first: h.BaseOffset, last: h.LastOffset(), maxTs: h.MaxTimestamp})
	}
	offsetEntries, timeEntries := 0, 0
	for _, l := range strings.Split(out, "\n") {
		f := dumpFields(l)
		switch {
		case f["offset"] != "" && f["position"] != "":
			off, _ := strconv.ParseInt(f["offset"], 10, 64)
			ok := false
			for _, b := range batches {
				ok = ok || (off >= b.first && off <= b.last)
			}
			if !ok {
				t.Errorf("offset index entry %q names no stored offset", l)
			}
			offsetEntries++
		case f["timestamp"] != "" && f["offset"] != "":
			ts, _ := strconv.ParseInt(f["timestamp"], 10, 64)
			off, _ := strconv.ParseInt(f["offset"], 10, 64)
			ok := false
			for _, b := range batches {
				ok = ok || (b.maxTs == ts && b.last == off)
			}
			if !ok {
				t.Errorf("time index entry %q matches no batch (max timestamp, last offset)", l)
			}
			timeEntries++
		}
	}
	if offsetEntries == 0 || timeEntries == 0 {
		t.Errorf("indexes dumped %d offset and %d time entries; the test writes enough bytes for both:\n%s", offsetEntries, timeEntries, tail(out, 30))
	}
}

// checkTxnIndexDump expects exactly the aborted transactions of specs:
// producer id, first offset (the transaction's first batch) and last
// offset (the ABORT marker).
func checkTxnIndexDump(t *testing.T, out string, specs []dumpLogSpec) {
	t.Helper()
	first := map[int64]int64{}
	var want []string
	for _, s := range specs {
		b := s.b
		if b.Attributes&kbatch.TransactionalBit == 0 {
			continue
		}
		if b.Attributes&kbatch.ControlBit == 0 {
			if _, ok := first[b.ProducerID]; !ok {
				first[b.ProducerID] = b.BaseOffset
			}
			continue
		}
		if typ, _ := kbatch.ControlType(kbatchtest.Encode(t, b)); typ == kbatch.ControlAbort {
			want = append(want, fmt.Sprintf("%d %d %d", b.ProducerID, first[b.ProducerID], b.BaseOffset))
		}
		delete(first, b.ProducerID)
	}
	var got []string
	for _, l := range strings.Split(out, "\n") {
		f := dumpFields(l)
		if f["producerId"] != "" && f["firstOffset"] != "" {
			got = append(got, f["producerId"]+" "+f["firstOffset"]+" "+f["lastOffset"])
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("txnindex entries (pid first last) = %v, want %v\n%s", got, want, tail(out, 20))
	}
}

// checkSnapshotDump expects one producer entry per producer id of specs,
// with the epoch, last sequence and last offset of its last data batch, and
// the open transaction (txn-d) with its first offset.
func checkSnapshotDump(t *testing.T, out string, specs []dumpLogSpec) {
	t.Helper()
	type prod struct{ epoch, lastSeq, lastOffset, txnFirst, coordEpoch string }
	want := map[string]prod{}
	open := map[int64]int64{}
	for _, s := range specs {
		b := s.b
		if b.ProducerID < 0 {
			continue
		}
		pid := strconv.FormatInt(b.ProducerID, 10)
		p := want[pid]
		p.epoch = strconv.Itoa(int(b.ProducerEpoch))
		raw := kbatchtest.Encode(t, b)
		h, _ := kbatch.ParseHeader(raw)
		if !h.IsControl() {
			p.lastSeq = strconv.Itoa(int(h.LastSequence()))
			p.lastOffset = strconv.FormatInt(h.LastOffset(), 10)
		}
		if h.IsTransactional() && !h.IsControl() {
			if _, ok := open[b.ProducerID]; !ok {
				open[b.ProducerID] = b.BaseOffset
			}
		}
		if h.IsControl() {
			delete(open, b.ProducerID)
			p.coordEpoch = "7" // the markers' coordinator epoch
		}
		want[pid] = p
	}
	got := map[string]prod{}
	for _, l := range strings.Split(out, "\n") {
		f := dumpFields(l)
		if f["producerId"] == "" {
			continue
		}
		got[f["producerId"]] = prod{f["producerEpoch"], f["lastSequence"], f["lastOffset"], f["currentTxnFirstOffset"], f["coordinatorEpoch"]}
	}
	for pid, w := range want {
		id, _ := strconv.ParseInt(pid, 10, 64)
		if off, ok := open[id]; ok {
			w.txnFirst = fmt.Sprintf("OptionalLong[%d]", off)
		} else {
			w.txnFirst = "OptionalLong.empty"
		}
		if w.coordEpoch == "" {
			w.coordEpoch = "-1"
		}
		g, ok := got[pid]
		if !ok {
			t.Errorf("snapshot lacks producer %s:\n%s", pid, tail(out, 20))
			continue
		}
		if g.epoch != w.epoch || g.txnFirst != w.txnFirst || g.coordEpoch != w.coordEpoch || (w.lastOffset != "" && (g.lastSeq != w.lastSeq || g.lastOffset != w.lastOffset)) {
			t.Errorf("snapshot producer %s = %+v, want %+v", pid, g, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("snapshot has %d producers, want %d:\n%s", len(got), len(want), tail(out, 20))
	}
}
