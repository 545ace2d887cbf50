package interop

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/budget"
	"github.com/verbatim-kafka/verbatim/hotpath"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/storage"
)

// pyTxnProduce writes, with one transactional confluent-kafka producer, a
// committed transaction, an aborted one and another committed one to
// partition 0 (keys and headers, lz4), then prints "done".
const pyTxnProduce = `
import sys
from confluent_kafka import Producer

bootstrap, topic = sys.argv[1], sys.argv[2]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "interop-capture",
              "compression.type": "lz4", "linger.ms": 5})
p.init_transactions(60)
for name, commit, n in (("first", True, 5), ("aborted", False, 3), ("second", True, 4)):
    p.begin_transaction()
    for i in range(n):
        p.produce(topic, key="%s-%d" % (name, i), value="%s value %d" % (name, i),
                  partition=0, headers=[("txn", name.encode())])
    p.flush(30)
    if commit:
        p.commit_transaction(60)
    else:
        p.abort_transaction(60)
print("done")
`

// kafkaCapture is what one topic of the capture test must show.
type kafkaCapture struct {
	topic string
	check func(t *testing.T, batches [][]byte)
}

// TestCapturedKafkaBatchesPassVerbatimPath produces into a real Kafka 4.4
// node with kcat (every codec, keys, headers, idempotence), the Java
// console producer (zstd), a transactional confluent-kafka producer
// (committed and aborted), onto a compacted topic after the cleaner ran, and
// onto a LogAppendTime topic; then reads the segment files from the node's
// data directory and checks that every batch passes hotpath's verbatim
// validation, that storage.AppendVerbatim stores it and serves it back byte
// for byte (with the same leader-epoch cache and aborted transactions), and
// that a raw Fetch from Kafka returns the same bytes as the files.
func TestCapturedKafkaBatchesPassVerbatimPath(t *testing.T) {
	k := StartKafka(t, KafkaOptions{Props: map[string]string{"log.cleaner.backoff.ms": "100"}})
	node := k.Nodes[0]
	bs := k.Bootstrap()

	kcatProduce := func(topic string, input string, args ...string) {
		t.Helper()
		argv := append([]string{"-P", "-b", bs, "-t", topic, "-p", "0", "-K", "|", "-X", "acks=all"}, args...)
		if _, err := RunKcat(t, Cmd{Stdin: strings.NewReader(input)}, argv...); err != nil {
			t.Fatalf("kcat produce to %s %v: %v", topic, args, err)
		}
	}
	lines := func(prefix string, n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "%s-key-%d|%s value %d %s\n", prefix, i, prefix, i, strings.Repeat("v", i%7*10))
		}
		return b.String()
	}

	// --- every codec, keys and headers, idempotence, Java zstd ---
	k.CreateTopic(t, "cap-codecs", 1, 1, nil)
	for _, z := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		kcatProduce("cap-codecs", lines("kcat-"+z, 20), "-z", z, "-H", "codec="+z, "-H", "origin=kcat")
	}
	kcatProduce("cap-codecs", lines("idem", 15), "-X", "enable.idempotence=true", "-z", "snappy")
	_, err := RunJavaTool(t, Cmd{Stdin: strings.NewReader(lines("java-zstd", 25))}, "kafka-console-producer",
		"--bootstrap-server", bs, "--topic", "cap-codecs",
		"--reader-property", "parse.key=true", "--reader-property", "key.separator=|",
		"--compression-codec", "zstd", "--producer-property", "linger.ms=50")
	if err != nil {
		t.Fatalf("console producer: %v", err)
	}

	// --- transactions: committed and aborted ---
	k.CreateTopic(t, "cap-txn", 1, 1, nil)
	if res := Python(t, pyTxnProduce, bs, "cap-txn"); strings.TrimSpace(res.Stdout) != "done" {
		t.Fatalf("transactional producer: %s", res.describe())
	}

	// --- LogAppendTime ---
	k.CreateTopic(t, "cap-lat", 1, 1, map[string]string{"message.timestamp.type": "LogAppendTime"})
	kcatProduce("cap-lat", lines("lat", 10), "-z", "gzip")
	kcatProduce("cap-lat", lines("lat-plain", 5))

	// --- a restart raises the leader epochs: later batches carry a new one ---
	node.Restart(t)
	kcatProduce("cap-codecs", lines("after-restart", 5), "-z", "lz4")

	// --- compaction: two idempotent producers write the same keys (the
	// first one's last batch survives empty), a tombstone, then a roll ---
	k.CreateTopic(t, "cap-compact", 1, 1, map[string]string{
		"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
		"min.compaction.lag.ms": "0",
		// Tombstones and markers keep their delete horizon (set by the first
		// cleaning) for the whole test instead of vanishing on a later pass.
		"delete.retention.ms": "3600000",
	})
	kcatProduce("cap-compact", lines("c", 10), "-X", "enable.idempotence=true")
	kcatProduce("cap-compact", lines("c", 10), "-X", "enable.idempotence=true", "-z", "lz4")
	kcatProduce("cap-compact", "c-key-3|\n", "-Z")
	// Transactions on a compacted topic: the cleaner drops the aborted
	// records and keeps the markers.
	if res := Python(t, pyTxnProduce, bs, "cap-compact"); strings.TrimSpace(res.Stdout) != "done" {
		t.Fatalf("transactional producer on the compacted topic: %s", res.describe())
	}
	time.Sleep(300 * time.Millisecond) // > segment.ms: the next append rolls
	kcatProduce("cap-compact", lines("roll", 1))
	compactDir := filepath.Join(node.DataDir, "cap-compact-0")
	deadline := time.Now().Add(90 * time.Second)
	for !hasGaps(readLogBatches(t, compactDir)) || !cleanedUpToActive(t, node.DataDir, "cap-compact", compactDir) {
		if time.Now().After(deadline) {
			t.Fatalf("the cleaner did not clean %s up to its active segment within 90s; batches:\n%s", compactDir, describeAll(readLogBatches(t, compactDir)))
		}
		time.Sleep(250 * time.Millisecond)
	}

	captures := []kafkaCapture{
		{"cap-codecs", func(t *testing.T, batches [][]byte) {
			codecs := map[kbatch.Codec]bool{}
			idem, headers, javaZstd := false, false, false
			for _, b := range batches {
				h, _ := kbatch.ParseHeader(b)
				codecs[h.Codec()] = true
				// The Java producer is idempotent by default; kcat's zstd run is not.
				javaZstd = javaZstd || (h.Codec() == kbatch.CodecZstd && h.HasProducerID())
				idem = idem || (h.HasProducerID() && !h.IsTransactional())
				recs, err := kbatch.Records(b)
				if err != nil {
					t.Fatalf("records of %s: %v", describeBatch(b), err)
				}
				for _, r := range recs {
					headers = headers || (len(r.Headers) == 2 && r.Key != nil)
				}
				// What librdkafka and the Java producer compressed passes
				// normal-mode validation (every record decompressed and
				// walked) untouched, as a produce of it would.
				if h.Codec() != kbatch.CodecNone {
					c := bytes.Clone(b)
					kbatch.SetBaseOffset(c, 0)
					var res hotpath.Result
					o := hotpath.Options{Mode: hotpath.Normal, Topic: hotpath.DefaultTopicConfig(), NowMs: h.MaxTimestamp, Decode: budget.New(64 << 20)}
					if err := hotpath.Validate(c, &o, &res); err != nil || res.Patched || !bytes.Equal(c[kbatch.LengthOffset:], b[kbatch.LengthOffset:]) {
						t.Fatalf("normal-mode validation of %s: %v (patched %v)", describeBatch(b), err, res.Patched)
					}
				}
			}
			first, _ := kbatch.ParseHeader(batches[0])
			last, _ := kbatch.ParseHeader(batches[len(batches)-1])
			if last.LeaderEpoch <= first.LeaderEpoch {
				t.Fatalf("leader epoch did not change across the restart: %d -> %d", first.LeaderEpoch, last.LeaderEpoch)
			}
			if len(codecs) != 5 || !idem || !headers || !javaZstd {
				t.Fatalf("capture lacks shapes: codecs %v, idempotent %v, keys+headers %v, Java zstd %v\n%s", codecs, idem, headers, javaZstd, describeAll(batches))
			}
		}},
		{"cap-txn", func(t *testing.T, batches [][]byte) {
			seen := map[int16]int{}
			txnData := 0
			for _, b := range batches {
				h, _ := kbatch.ParseHeader(b)
				if h.IsControl() {
					typ, ok := kbatch.ControlType(b)
					if !ok {
						t.Fatalf("control batch without a decodable type: %s", describeBatch(b))
					}
					seen[typ]++
				} else if h.IsTransactional() {
					txnData++
				}
			}
			if seen[kbatch.ControlCommit] != 2 || seen[kbatch.ControlAbort] != 1 || txnData == 0 {
				t.Fatalf("capture lacks transactions: markers %v, transactional data batches %d\n%s", seen, txnData, describeAll(batches))
			}
		}},
		{"cap-lat", func(t *testing.T, batches [][]byte) {
			for _, b := range batches {
				h, _ := kbatch.ParseHeader(b)
				if !h.LogAppendTime() {
					t.Fatalf("batch without the LogAppendTime bit on a LogAppendTime topic: %s", describeBatch(b))
				}
			}
		}},
		{"cap-compact", func(t *testing.T, batches [][]byte) {
			empty, horizon, abort := false, false, false
			for _, b := range batches {
				h, _ := kbatch.ParseHeader(b)
				empty = empty || h.RecordCount == 0
				horizon = horizon || h.HasDeleteHorizon()
				typ, ok := kbatch.ControlType(b)
				abort = abort || (ok && h.IsControl() && typ == kbatch.ControlAbort)
			}
			// The aborted records are gone; their ABORT marker stays.
			if !abort {
				t.Fatalf("compacted capture lacks the ABORT marker:\n%s", describeAll(batches))
			}
			// The first producer's last batch survives empty (it carries
			// producer state); the cleaned tombstone gets a delete horizon.
			if !hasGaps(batches) || !empty || !horizon {
				t.Fatalf("compacted capture: gaps %v, an empty batch %v, a delete horizon %v\n%s", hasGaps(batches), empty, horizon, describeAll(batches))
			}
		}},
	}

	cl := k.Client(t)
	for _, c := range captures {
		t.Run(c.topic, func(t *testing.T) {
			dir := filepath.Join(node.DataDir, c.topic+"-0")
			fileBatches := readLogBatches(t, dir)
			if len(fileBatches) == 0 {
				t.Fatalf("no batches in %s", dir)
			}
			c.check(t, fileBatches)
			t.Logf("%s: %d batches captured:\n%s", c.topic, len(fileBatches), describeAll(fileBatches))

			// hotpath verbatim mode: each segment file as one set, and each
			// batch alone; nothing may change.
			for _, f := range segmentFiles(t, dir, ".log") {
				set, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				orig := bytes.Clone(set)
				var res hotpath.Result
				if err := hotpath.Validate(set, &hotpath.Options{Mode: hotpath.Verbatim}, &res); err != nil {
					t.Fatalf("verbatim validation of %s: %v", filepath.Base(f), err)
				}
				n := len(splitBatches(t, f, orig))
				if res.Batches != n || res.Bytes != len(set) || !bytes.Equal(set, orig) {
					t.Fatalf("verbatim validation of %s: %+v for %d batches / %d bytes (modified: %v)", filepath.Base(f), res, n, len(orig), !bytes.Equal(set, orig))
				}
			}
			for i, b := range fileBatches {
				var res hotpath.Result
				h, _ := kbatch.ParseHeader(b)
				if err := hotpath.Validate(bytes.Clone(b), &hotpath.Options{Mode: hotpath.Verbatim}, &res); err != nil {
					t.Fatalf("batch %d (%s): verbatim validation: %v", i, describeBatch(b), err)
				}
				if res.FirstOffset != h.BaseOffset || res.LastOffset != h.LastOffset() || res.Records != int64(h.RecordCount) {
					t.Fatalf("batch %d (%s): validation result %+v", i, describeBatch(b), res)
				}
			}

			// storage: verbatim append of each segment's batches, read back.
			logDir := filepath.Join(t.TempDir(), c.topic+"-0")
			l, err := storage.Open(storage.OSFS{}, logDir, storage.Config{})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range segmentFiles(t, dir, ".log") {
				set, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if len(set) == 0 {
					continue
				}
				res, err := l.AppendVerbatim(set)
				if err != nil {
					t.Fatalf("AppendVerbatim of %s: %v", filepath.Base(f), err)
				}
				if res.FirstOffset != kbatch.BaseOffset(set) || res.AlreadyPresent {
					t.Fatalf("AppendVerbatim of %s: %+v", filepath.Base(f), res)
				}
			}
			sameBatches(t, "storage read-back", readStoredBatches(t, l), fileBatches)
			// An identical retry of everything is acknowledged, not appended.
			var all []byte
			for _, b := range fileBatches {
				all = append(all, b...)
			}
			leo := l.LogEndOffset()
			if res, err := l.AppendVerbatim(all); err != nil || !res.AlreadyPresent || l.LogEndOffset() != leo {
				t.Fatalf("identical retry: %+v, %v (log end %d -> %d)", res, err, leo, l.LogEndOffset())
			}

			// The views a mirror must reproduce agree with Kafka's.
			last, _ := kbatch.ParseHeader(fileBatches[len(fileBatches)-1])
			if leo != last.NextOffset() {
				t.Errorf("log end %d, want %d", leo, last.NextOffset())
			}
			var gotAborted []abortedRange
			aborted, err := l.AbortedTransactions(0, leo, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range aborted {
				gotAborted = append(gotAborted, abortedRange{a.ProducerID, a.FirstOffset})
			}
			want := abortedFromFetch(t, cl, c.topic)
			t.Logf("%s: aborted transactions: Kafka %v, storage %v", c.topic, want, gotAborted)
			// By meaning, always: the same data batches are aborted.
			if g, w := abortedData(fileBatches, gotAborted), abortedData(fileBatches, want); fmt.Sprint(g) != fmt.Sprint(w) {
				t.Errorf("aborted data batches: %v with storage's list %v, %v with Kafka's %v", g, gotAborted, w, want)
			}
			// Exactly, where the cleaner has not run: once it has removed
			// aborted records, Kafka's transaction index may still name
			// their first offset, which no batch in the log records.
			if c.topic != "cap-compact" && fmt.Sprint(gotAborted) != fmt.Sprint(want) {
				t.Errorf("aborted transactions: storage %v, Kafka's read_committed fetch %v", gotAborted, want)
			}
			if c.topic == "cap-txn" && (len(want) != 1 || len(abortedData(fileBatches, want)) != 1) {
				t.Errorf("Kafka lists aborted transactions %v, want the one aborted (one data batch)", want)
			}
			if lso, hwm := l.LastStableOffset(), l.HighWatermark(); lso != leo || hwm != leo {
				t.Errorf("LSO %d, high watermark %d, want both at the log end %d (no open transaction)", lso, hwm, leo)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			kcp, err := os.ReadFile(filepath.Join(dir, storage.LeaderEpochCheckpointFile))
			if err != nil {
				t.Fatal(err)
			}
			vcp, err := os.ReadFile(filepath.Join(logDir, storage.LeaderEpochCheckpointFile))
			if err != nil {
				t.Fatal(err)
			}
			// Kafka also records epochs in which no batch was written (a
			// leader elected by the restart, with no writes); those cannot
			// be derived from batches (invariant I3, docs/mirroring.md).
			// Every epoch with batches must match.
			kEntries, err := storage.ParseEpochCheckpoint(kcp)
			if err != nil {
				t.Fatalf("Kafka's checkpoint %q: %v", kcp, err)
			}
			vEntries, err := storage.ParseEpochCheckpoint(vcp)
			if err != nil {
				t.Fatalf("storage's checkpoint %q: %v", vcp, err)
			}
			withBatches := map[int32]bool{}
			for _, b := range fileBatches {
				withBatches[kbatch.LeaderEpoch(b)] = true
			}
			var wantEntries []storage.EpochEntry
			for _, e := range kEntries {
				if withBatches[e.Epoch] {
					wantEntries = append(wantEntries, e)
				}
			}
			if fmt.Sprint(vEntries) != fmt.Sprint(wantEntries) {
				t.Errorf("leader-epoch cache: storage %v, Kafka's epochs with batches %v (Kafka's file %q)", vEntries, wantEntries, kcp)
			}

			// Kafka serves the file bytes over the wire.
			sameBatches(t, "Kafka raw fetch vs segment files", fetchAllRaw(t, cl, c.topic), fileBatches)
		})
	}
}

// readStoredBatches reads every batch of l from its start with Read.
func readStoredBatches(t testing.TB, l *storage.Log) [][]byte {
	t.Helper()
	var out [][]byte
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		sl, err := l.Read(off, 1<<20)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		b, err := sl.Bytes(nil)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		bs := splitBatches(t, fmt.Sprintf("read %d", off), b)
		if len(bs) == 0 {
			t.Fatalf("read %d below the log end %d returned no batch", off, l.LogEndOffset())
		}
		for _, b := range bs {
			out = append(out, b)
			h, _ := kbatch.ParseHeader(b)
			off = h.NextOffset()
		}
	}
	return out
}

// cleanedUpToActive reports whether Kafka's cleaner checkpoint for
// partition 0 of topic has reached the base offset of the active (newest)
// segment: every segment that can be cleaned has been, and the files are
// no longer being swapped.
func cleanedUpToActive(t testing.TB, dataDir, topic, partDir string) bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "cleaner-offset-checkpoint"))
	if err != nil {
		return false
	}
	logs := segmentFiles(t, partDir, ".log")
	if len(logs) == 0 {
		return false
	}
	var active int64
	if _, err := fmt.Sscanf(filepath.Base(logs[len(logs)-1]), "%d.log", &active); err != nil {
		t.Fatalf("segment name %s: %v", logs[len(logs)-1], err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		var name string
		var part int32
		var off int64
		if n, _ := fmt.Sscanf(l, "%s %d %d", &name, &part, &off); n == 3 && name == topic && part == 0 {
			return off >= active
		}
	}
	return false
}

// hasGaps reports whether the batches skip offsets: a gap between batches,
// or fewer records than the offset range of a batch.
func hasGaps(batches [][]byte) bool {
	next := int64(-1)
	for _, b := range batches {
		h, err := kbatch.ParseHeader(b)
		if err != nil {
			return false
		}
		if (next >= 0 && h.BaseOffset > next) || int64(h.RecordCount) < int64(h.LastOffsetDelta)+1 {
			return true
		}
		next = h.NextOffset()
	}
	return false
}

func describeAll(batches [][]byte) string {
	var s []string
	for _, b := range batches {
		s = append(s, describeBatch(b))
	}
	return strings.Join(s, "\n")
}
