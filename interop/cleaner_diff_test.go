package interop

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/kbatch"
)

// cleanerCheckpoint reads partition 0 of topic from a
// cleaner-offset-checkpoint file (Kafka's format: Kafka keeps one per log
// directory, Verbatim one per partition directory); -1 when absent.
func cleanerCheckpoint(t testing.TB, path, topic string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		var name string
		var part int32
		var off int64
		if n, _ := fmt.Sscanf(l, "%s %d %d", &name, &part, &off); n == 3 && name == topic && part == 0 {
			return off
		}
	}
	return -1
}

// activeBase is the base offset of a partition directory's newest segment.
func activeBase(t testing.TB, dir string) int64 {
	t.Helper()
	logs := segmentFiles(t, dir, ".log")
	if len(logs) == 0 {
		return -1
	}
	var base int64
	if _, err := fmt.Sscanf(filepath.Base(logs[len(logs)-1]), "%d.log", &base); err != nil {
		t.Fatalf("segment name %s: %v", logs[len(logs)-1], err)
	}
	return base
}

// keptRecord is a record as read raw from a partition, with the view of
// its batch a consumer has.
type keptRecord struct {
	offset  int64
	key     string
	value   []byte
	ts      int64
	headers string
	control bool
	txn     bool
}

func (r keptRecord) same(o keptRecord) bool {
	return r.offset == o.offset && r.key == o.key && bytes.Equal(r.value, o.value) && (r.value == nil) == (o.value == nil) &&
		r.ts == o.ts && r.headers == o.headers && r.control == o.control && r.txn == o.txn
}

// batchRecords decodes a batch's records with their absolute offsets and
// timestamps.
func batchRecords(t testing.TB, b []byte) []keptRecord {
	t.Helper()
	h, _ := kbatch.ParseHeader(b)
	recs, err := kbatch.Records(b)
	if err != nil {
		t.Fatalf("records of %s: %v", describeBatch(b), err)
	}
	out := make([]keptRecord, 0, len(recs))
	for _, r := range recs {
		var hs []string
		for _, rh := range r.Headers {
			hs = append(hs, rh.Key+"="+string(rh.Value))
		}
		out = append(out, keptRecord{offset: h.BaseOffset + int64(r.OffsetDelta), key: string(r.Key), value: bytes.Clone(r.Value),
			ts: h.BaseTimestamp + r.TimestampDelta, headers: strings.Join(hs, ","), control: h.IsControl(), txn: h.IsTransactional()})
	}
	return out
}

// rawRecords reads every record of partition 0 from the log start, control
// records included, and the raw batches.
func rawRecords(t *testing.T, addr, topic string) ([]keptRecord, [][]byte) {
	t.Helper()
	var out []keptRecord
	var batches [][]byte
	eachBatch(t, addr, topic, func(b []byte) {
		batches = append(batches, bytes.Clone(b))
		out = append(out, batchRecords(t, b)...)
	})
	return out, batches
}

// latestCommitted reads topic with a read_committed kgo consumer up to the
// log end and returns the latest value of every live key. The test's last
// record is a plain data record (the latest of its key), so it is read.
func latestCommitted(t *testing.T, addr, topic string) map[string]string {
	t.Helper()
	// readToEnd reads to the high watermark; the LSO is there too (no open
	// transaction).
	got := map[string]string{}
	readToEnd(t, addr, topic, func(r *kgo.Record) {
		if r.Value == nil {
			delete(got, string(r.Key))
		} else {
			got[string(r.Key)] = string(r.Value)
		}
	}, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	return got
}

// cleanerValue is a record value of the differential test: no spaces (so
// DumpLogSegments' payload lines stay tokenisable), ~900 bytes of hex
// that compress to about half, so that the rounds fill several 1 MiB
// segments.
func cleanerValue(tag string, round, key int) []byte {
	rng := rand.New(rand.NewPCG(uint64(round), uint64(key)))
	raw := make([]byte, 440+key%20)
	for i := range raw {
		raw[i] = byte(rng.Uint32())
	}
	return []byte(fmt.Sprintf("%s-r%d-k%d-%x", tag, round, key, raw))
}

// TestCleanerMatchesKafka is the differential test of the log cleaner:
// the same raw batches (1,000 keys rewritten over rounds, tombstones, a
// committed and an aborted transaction, two idempotent producers, one
// plain, lz4 and gzip batches) are written to Apache Kafka 4.4 and copied
// byte for byte to Verbatim by `mirror push` while neither may clean
// (min.compaction.lag.ms of an hour); then both topics are released to
// their cleaners (1 MiB segments, min.cleanable.dirty.ratio 0.01,
// delete.retention.ms 1 s) and more rounds are written and copied until
// both have removed the tombstones past their horizon. Then: the latest
// value per key under read_committed is the same; every record below both
// cleaner checkpoints is the same on both (except keys written again above
// the lower checkpoint, which one side may not have deduplicated yet); no
// aborted record remains below them; `verify` accepts the pair; and
// Kafka's DumpLogSegments reads Verbatim's cleaned segments.
func TestCleanerMatchesKafka(t *testing.T) {
	k := StartKafka(t, KafkaOptions{Props: map[string]string{"log.cleaner.backoff.ms": "100"}})
	bin := BuildVerbatim(t)
	v := StartVerbatim(t, bin, VerbatimOptions{Args: []string{"--log-cleaner-backoff-ms", "100"}})
	const topic, keys = "cdiff", 1000
	k.CreateTopic(t, topic, 1, 1, map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "1048576", "min.cleanable.dirty.ratio": "0.01",
		"min.compaction.lag.ms": "3600000", "delete.retention.ms": "1000",
	})
	bs := k.Bootstrap()
	opts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(48 << 10), kgo.ProducerLinger(2 * time.Millisecond)}
	producers := []*kgo.Client{
		k.Client(t, append(opts, kgo.ProducerBatchCompression(kgo.NoCompression()))...),                                 // idempotent, uncompressed
		k.Client(t, append(opts, kgo.ProducerBatchCompression(kgo.Lz4Compression()))...),                                // idempotent, lz4
		k.Client(t, append(opts, kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(kgo.GzipCompression()))...), // plain, gzip
	}
	round := func(r int, lo, hi int, skip func(int) bool, tombstone func(int) bool) {
		t.Helper()
		for p, cl := range producers {
			var rs []*kgo.Record
			for i := lo; i < hi; i++ {
				if (i+r)%len(producers) != p || (skip != nil && skip(i)) {
					continue
				}
				rec := &kgo.Record{Key: []byte(fmt.Sprintf("k%04d", i)), Value: cleanerValue("v", r, i)}
				if tombstone != nil && tombstone(i) {
					rec.Value = nil
				}
				if i%7 == 0 {
					rec.Headers = []kgo.RecordHeader{{Key: "round", Value: []byte(fmt.Sprint(r))}}
				}
				rs = append(rs, rec)
			}
			produceSync(t, cl, rs...)
		}
	}
	deadKeys := func(i int) bool { return i < 50 } // tombstoned in round 2, never written again
	for r := 0; r < 6; r++ {
		switch r {
		case 2:
			round(r, 0, keys, nil, deadKeys)
		case 3:
			round(r, 50, keys, nil, func(i int) bool { return i < 100 }) // 50-99 deleted, written again later
		default:
			round(r, 0, keys, func(i int) bool { return r > 2 && (deadKeys(i) || i >= 900) }, nil)
		}
		if r == 3 {
			txnCommit := k.Client(t, append(opts, kgo.TransactionalID("cdiff-commit"))...)
			txnAbort := k.Client(t, append(opts, kgo.TransactionalID("cdiff-abort"))...)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			for _, tc := range []struct {
				cl     *kgo.Client
				lo, hi int
				tag    string
				commit kgo.TransactionEndTry
			}{{txnCommit, 900, keys, "committed", kgo.TryCommit}, {txnAbort, 100, 150, "aborted", kgo.TryAbort}} {
				if err := tc.cl.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				var rs []*kgo.Record
				for i := tc.lo; i < tc.hi; i++ {
					rs = append(rs, &kgo.Record{Key: []byte(fmt.Sprintf("k%04d", i)), Value: cleanerValue(tc.tag, r, i)})
					if tc.tag == "aborted" {
						rs = append(rs, &kgo.Record{Key: []byte(fmt.Sprintf("aborted-%d", i)), Value: cleanerValue(tc.tag, r, i)})
					}
				}
				if err := tc.cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
					t.Fatalf("%s transaction: %v", tc.tag, err)
				}
				if err := tc.cl.EndTransaction(ctx, tc.commit); err != nil {
					t.Fatalf("ending the %s transaction: %v", tc.tag, err)
				}
			}
			cancel()
		}
	}
	// The same raw batches on both sides, before either cleaned.
	runPush(t, bin, bs, v.Addr, 0, "--topics", topic, "--create-topics")
	if v := runVerify(t, bin, bs, v.Addr, topic, 0); v.Partitions[0].Status != "identical" {
		t.Fatalf("before cleaning: %+v", v.Partitions[0])
	}
	// Release both cleaners.
	for _, addr := range []string{bs, v.Addr} {
		adm := kadm.NewClient(testkit.Client(t, addr))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.compaction.lag.ms", Value: kadm.StringPtr("0")}}, topic)
		cancel()
		if err == nil {
			err = rs[0].Err
		}
		if err != nil {
			t.Fatalf("releasing the cleaner on %s: %v", addr, err)
		}
	}
	kDir, vDir := filepath.Join(k.Nodes[0].DataDir, topic+"-0"), filepath.Join(v.DataDir, topic+"-0")
	kCP := func() int64 {
		return cleanerCheckpoint(t, filepath.Join(k.Nodes[0].DataDir, "cleaner-offset-checkpoint"), topic)
	}
	vCP := func() int64 { return cleanerCheckpoint(t, filepath.Join(vDir, "cleaner-offset-checkpoint"), topic) }
	hasDead := func(recs []keptRecord) bool {
		for _, r := range recs {
			var i int
			if n, _ := fmt.Sscanf(r.key, "k%04d", &i); n == 1 && deadKeys(i) {
				return true
			}
		}
		return false
	}
	// More rounds (keys 200-899), copied, until both cleaned up to their
	// active segments and removed the tombstones past their horizon.
	deadline := time.Now().Add(90 * time.Second)
	var kRecs, vRecs []keptRecord
	var kBatches, vBatches [][]byte
	for r := 6; ; r++ {
		time.Sleep(1500 * time.Millisecond) // past the horizons of the last cleans
		round(r, 200, 900, nil, nil)
		runPush(t, bin, bs, v.Addr, 0, "--topics", topic)
		for time.Now().Before(deadline) && (kCP() < activeBase(t, kDir) || vCP() < activeBase(t, vDir)) {
			time.Sleep(200 * time.Millisecond)
		}
		kRecs, kBatches = rawRecords(t, bs, topic)
		vRecs, vBatches = rawRecords(t, v.Addr, topic)
		if !hasDead(kRecs) && !hasDead(vRecs) && kCP() >= activeBase(t, kDir) && vCP() >= activeBase(t, vDir) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d rounds: tombstones left on Kafka %v, on Verbatim %v; checkpoints Kafka %d (active %d), Verbatim %d (active %d)",
				r+1, hasDead(kRecs), hasDead(vRecs), kCP(), activeBase(t, kDir), vCP(), activeBase(t, vDir))
		}
	}
	t.Logf("cleaner checkpoints: Kafka %d, Verbatim %d; records kept: Kafka %d, Verbatim %d", kCP(), vCP(), len(kRecs), len(vRecs))

	// The latest value per key, read_committed.
	kLatest, vLatest := latestCommitted(t, bs, topic), latestCommitted(t, v.Addr, topic)
	if len(kLatest) != keys-50 {
		t.Errorf("Kafka: %d live keys, want %d", len(kLatest), keys-50)
	}
	if len(kLatest) != len(vLatest) {
		t.Errorf("live keys: Kafka %d, Verbatim %d", len(kLatest), len(vLatest))
	}
	for key, val := range kLatest {
		if vLatest[key] != val {
			t.Fatalf("key %s: Kafka %.24q..., Verbatim %.24q...", key, val, vLatest[key])
		}
	}

	// Below both checkpoints: the same records, but for keys written again
	// at or above the lower checkpoint (one side may not have mapped that
	// later record yet). No aborted record remains.
	below := min(kCP(), vCP())
	again := map[string]bool{}
	for _, rs := range [][]keptRecord{kRecs, vRecs} {
		for _, r := range rs {
			if r.offset >= below && !r.control {
				again[r.key] = true
			}
		}
	}
	pick := func(who string, rs []keptRecord) []keptRecord {
		var out []keptRecord
		for _, r := range rs {
			if r.offset >= below || r.control || again[r.key] {
				continue
			}
			if strings.HasPrefix(string(r.value), "aborted") {
				t.Errorf("%s keeps aborted record %d (%s) below the checkpoint %d", who, r.offset, r.key, below)
			}
			out = append(out, r)
		}
		return out
	}
	kb, vb := pick("Kafka", kRecs), pick("Verbatim", vRecs)
	if len(kb) == 0 {
		t.Fatalf("no record below both checkpoints (%d) to compare", below)
	}
	for i := 0; i < max(len(kb), len(vb)); i++ {
		switch {
		case i >= len(kb):
			t.Fatalf("below %d Verbatim keeps record %d (%s), Kafka does not", below, vb[i].offset, vb[i].key)
		case i >= len(vb):
			t.Fatalf("below %d Kafka keeps record %d (%s), Verbatim does not", below, kb[i].offset, kb[i].key)
		case !kb[i].same(vb[i]):
			t.Fatalf("below %d: Kafka keeps %+v, Verbatim %+v", below, kb[i].offset, vb[i].offset)
		}
	}
	t.Logf("%d records below both checkpoints compared", len(kb))
	// Batch bytes differ where each side set its own delete horizon or
	// recompressed what it re-encoded (Java's and Go's gzip differ).
	vAt := map[int64][]byte{}
	for _, b := range vBatches {
		vAt[kbatch.BaseOffset(b)] = b
	}
	same, differ := 0, 0
	for _, b := range kBatches {
		if vb, ok := vAt[kbatch.BaseOffset(b)]; ok && bytes.Equal(vb, b) {
			same++
		} else if ok {
			differ++
			if differ <= 3 {
				t.Logf("batch differs: Kafka %s, Verbatim %s: %s", describeBatch(b), describeBatch(vb), firstDiff(b, vb))
			}
		}
	}
	t.Logf("batches at the same offset: %d byte-identical, %d different", same, differ)

	// verify accepts the pair: both are compactions of one history.
	vj := runVerify(t, bin, bs, v.Addr, topic, 0)
	if st := vj.Partitions[0].Status; st != "compacted-equivalent" && st != "source-compacted-since" && st != "identical" {
		t.Fatalf("verify: %+v", vj.Partitions[0])
	}
	t.Logf("verify: %s", vj.Partitions[0].Status)

	// Kafka's DumpLogSegments reads Verbatim's cleaned segments.
	v.Proc.Stop(10 * time.Second)
	logs := segmentFiles(t, vDir, ".log")
	res := JavaTool(t, "kafka-dump-log", "--files", strings.Join(logs, ","), "--print-data-log", "--deep-iteration")
	checkDumpedBatches(t, res.Stdout, vBatches)
	horizons := 0
	for _, b := range vBatches {
		if h, _ := kbatch.ParseHeader(b); h.HasDeleteHorizon() {
			horizons++
		}
	}
	sort.Strings(logs)
	t.Logf("DumpLogSegments read %d Verbatim segments (%d batches, %d with a delete horizon)", len(logs), len(vBatches), horizons)
}
