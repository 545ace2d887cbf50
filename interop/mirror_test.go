package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/mirror"
)

// verifyJSON is the contract's `verbatim verify --json` document.
type verifyJSON struct {
	Exact      *bool `json:"exact"`
	Partitions []struct {
		Topic         string `json:"topic"`
		Partition     *int32 `json:"partition"`
		Batches       *int64 `json:"batches"`
		Bytes         *int64 `json:"bytes"`
		Status        string `json:"status"`
		FirstMismatch *struct {
			Offset *int64  `json:"offset"`
			Field  *string `json:"field"`
		} `json:"first_mismatch"`
	} `json:"partitions"`
}

func runVerify(t *testing.T, bin, src, dst, topic string, wantExit int) verifyJSON {
	t.Helper()
	res, _ := RunTool(t, Cmd{Timeout: 2 * time.Minute}, bin, "verify", "--source", src, "--dest", dst, "--topics", topic, "--json")
	if res.ExitCode != wantExit {
		t.Fatalf("verify %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", topic, res.ExitCode, wantExit, res.Stdout, res.Stderr)
	}
	var v verifyJSON
	if err := json.Unmarshal([]byte(res.Stdout), &v); err != nil || v.Exact == nil || len(v.Partitions) == 0 {
		t.Fatalf("verify %s --json: %v\n%s", topic, err, res.Stdout)
	}
	for _, p := range v.Partitions {
		if p.Partition == nil || p.Batches == nil || p.Bytes == nil || p.Status == "" {
			t.Fatalf("verify %s --json: partition entry lacks contract fields:\n%s", topic, res.Stdout)
		}
	}
	return v
}

func runPush(t *testing.T, bin, src, dst string, wantExit int, args ...string) *Result {
	t.Helper()
	argv := append([]string{bin, "mirror", "push", "--source", src, "--dest", dst, "--log-format", "json"}, args...)
	res, _ := RunTool(t, Cmd{Timeout: 3 * time.Minute}, argv...)
	if res.ExitCode != wantExit {
		t.Fatalf("mirror push %v: exit %d, want %d\nstderr:\n%s", args, res.ExitCode, wantExit, tail(res.Stderr, 30))
	}
	return res
}

// pushAndVerify copies topic and proves the copy exact; statuses lists
// the acceptable partition statuses.
func pushAndVerify(t *testing.T, bin, src, dst, topic string, statuses ...string) {
	t.Helper()
	runPush(t, bin, src, dst, 0, "--topics", topic, "--create-topics")
	v := runVerify(t, bin, src, dst, topic, 0)
	if !*v.Exact {
		t.Fatalf("%s: not exact: %+v", topic, v)
	}
	if len(statuses) == 0 {
		statuses = []string{"identical"}
	}
	for _, p := range v.Partitions {
		ok := false
		for _, s := range statuses {
			ok = ok || p.Status == s
		}
		if !ok || p.FirstMismatch != nil || *p.Batches == 0 {
			t.Fatalf("%s/%d: status %s, %d batches, want one of %v", topic, *p.Partition, p.Status, *p.Batches, statuses)
		}
	}
}

func produceSync(t *testing.T, cl *kgo.Client, rs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// produceTxn writes one transaction of ten records over partitions 0
// and 1 of topic with the transactional client tx (a manual
// partitioner), committed or aborted.
func produceTxn(t *testing.T, tx *kgo.Client, topic, tag string, commit bool) {
	t.Helper()
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	rs := keyed(topic, 10, tag)
	for j, r := range rs {
		r.Partition = int32(j % 2)
	}
	produceSync(t, tx, rs...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tx.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
}

func keyed(topic string, n int, tag string) []*kgo.Record {
	var rs []*kgo.Record
	for i := 0; i < n; i++ {
		rs = append(rs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("key-%d", i%13)),
			Value:   []byte(strings.Repeat(fmt.Sprintf("%s-%d ", tag, i), 1+i%5)),
			Headers: []kgo.RecordHeader{{Key: "tag", Value: []byte(tag)}, {Key: "i", Value: []byte(fmt.Sprint(i))}}})
	}
	return rs
}

// partitionGaps reports how many offsets of [log start, log end) hold no
// record on the source (compaction removed them).
func partitionGaps(t *testing.T, addr, topic string) (gaps, end int64) {
	t.Helper()
	var records int64
	end = eachBatch(t, addr, topic, func(b []byte) {
		h, _ := kbatch.ParseHeader(b)
		records += int64(h.RecordCount)
	})
	return end - records, end
}

// eachBatch calls fn with every batch of partition 0 of topic on addr, from
// offset 0 to the log end (read_uncommitted, control batches included), and
// returns the log end. fn must copy a batch it keeps.
func eachBatch(t *testing.T, addr, topic string, fn func(b []byte)) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.NewCluster(addr, client.Options{ClientID: "interop"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	cn, _, err := cl.Leader(ctx, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	e, err := client.ListOffset(ctx, cn, topic, 0, client.Latest, client.ReadUncommitted)
	if err != nil {
		t.Fatal(err)
	}
	for next := int64(0); next < e.Offset; {
		res, err := client.FetchPartition(ctx, cn, client.FetchArgs{Topic: topic, Offset: next, MaxBytes: 1 << 20, CurrentEpoch: -1, LastFetchedEpoch: -1})
		if err == nil {
			err = res.Err
		}
		if err != nil {
			t.Fatal(err)
		}
		bs, _, _, err := mirror.Split(res.Records, next)
		if err != nil || len(bs) == 0 {
			t.Fatalf("reading %s on %s at %d: %d batches, %v", topic, addr, next, len(bs), err)
		}
		for _, b := range bs {
			fn(b)
			next = mirror.LastOffset(b) + 1
		}
	}
	return e.Offset
}

func destEnd(t *testing.T, addr, topic string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cn, err := client.Dial(ctx, addr, client.Options{ClientID: "interop"})
	if err != nil {
		return -1
	}
	defer cn.Close()
	a, err := client.ListOffset(ctx, cn, topic, 0, client.Latest, client.ReadUncommitted)
	if err != nil {
		return -1
	}
	return a.Offset
}

// TestMirrorFromKafka mirrors topics from a real Apache Kafka 4.4 node into
// `verbatim serve` with `verbatim mirror push` and proves each copy exact
// with `verbatim verify`. One Kafka node is shared by every subtest.
func TestMirrorFromKafka(t *testing.T) {
	bin := BuildVerbatim(t)
	k := StartKafka(t, KafkaOptions{})
	src := k.Bootstrap()
	v := StartVerbatim(t, bin, VerbatimOptions{Args: []string{"--flush", "always"}})
	dst := v.Addr
	cl := k.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))

	prepareMirrorSources(t, k, cl)

	for _, topic := range []string{"codecs", "txn", "logappend", "epochs", "compacted"} {
		t.Run(topic, func(t *testing.T) { pushAndVerify(t, bin, src, dst, topic) })
	}
	t.Run("compacted-earliest-epoch", func(t *testing.T) { checkEarliestEpoch(t, bin, src, "compacted") })
	t.Run("java-transactions", func(t *testing.T) {
		// Kafka's TransactionalMessageCopier (the Java producer with
		// transactions, random aborts and offsets committed in the
		// transaction) copies "codecs" into "txnjava".
		k.CreateTopic(t, "txnjava", 1, 1, nil)
		aborts := 0
		for attempt := 0; attempt < 3 && aborts == 0; attempt++ {
			JavaTool(t, "TransactionalMessageCopier", "--broker-list", src, "--input-topic", "codecs", "--input-partition", "0",
				"--output-topic", "txnjava", "--transactional-id", fmt.Sprintf("java-txn-%d", attempt), "--consumer-group", fmt.Sprintf("copier-%d", attempt),
				"--transaction-size", "20", "--enable-random-aborts", "--use-group-metadata")
			aborts = countMarkers(t, src, "txnjava", 0)
		}
		if aborts == 0 {
			t.Fatal("the Java copier aborted no transaction in three runs")
		}
		t.Logf("txnjava: %d aborted transactions", aborts)
		pushAndVerify(t, bin, src, dst, "txnjava")
	})
	t.Run("chain", func(t *testing.T) {
		// Kafka -> Verbatim B -> Verbatim C: C is exact against Kafka.
		c := StartVerbatim(t, bin, VerbatimOptions{})
		for _, topic := range []string{"txn", "epochs"} {
			runPush(t, bin, dst, c.Addr, 0, "--topics", topic, "--create-topics")
			if v := runVerify(t, bin, src, c.Addr, topic, 0); !*v.Exact {
				t.Fatalf("%s at the end of the chain: %+v", topic, v)
			}
		}
	})
	t.Run("compacted-after-copy", func(t *testing.T) {
		// More overwrites, cleaned on the source after the copy: the
		// destination is a superset, not a mismatch.
		_, before := partitionGaps(t, src, "compacted")
		for round := 0; round < 3; round++ {
			produceSync(t, cl, keyed("compacted", 40, fmt.Sprintf("late%d", round))...)
			time.Sleep(150 * time.Millisecond)
		}
		runPush(t, bin, src, dst, 0, "--topics", "compacted")
		gaps0, _ := partitionGaps(t, src, "compacted")
		produceSync(t, cl, keyed("compacted", 40, "last")...)
		runPush(t, bin, src, dst, 0, "--topics", "compacted")
		deadline := time.Now().Add(60 * time.Second)
		for {
			gaps, _ := partitionGaps(t, src, "compacted")
			if gaps > gaps0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no new cleaning after the copy (log end was %d)", before)
			}
			time.Sleep(500 * time.Millisecond)
		}
		v := runVerify(t, bin, src, dst, "compacted", 0)
		if !*v.Exact || v.Partitions[0].Status != "source-compacted-since" {
			t.Fatalf("after cleaning on the source: %+v", v.Partitions[0])
		}
	})
	t.Run("delete-records", func(t *testing.T) {
		// The source's log start (60, inside a batch) is forwarded to the
		// destination by the pusher (docs/mirroring.md).
		pushAndVerify(t, bin, src, dst, "deleted")
	})
	t.Run("reproduced-copy-mismatch", func(t *testing.T) {
		// MirrorMaker-style copy: consume and produce again, keeping keys,
		// values, headers and timestamps. verify must refuse it.
		other := StartVerbatim(t, bin, VerbatimOptions{})
		oc, err := kgo.NewClient(kgo.SeedBrokers(other.Addr), kgo.AllowAutoTopicCreation())
		if err != nil {
			t.Fatal(err)
		}
		defer oc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := kadm.NewClient(oc).CreateTopic(ctx, 1, 1, nil, "codecs"); err != nil {
			t.Fatal(err)
		}
		cons := k.Client(t, kgo.ConsumeTopics("codecs"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		var rs []*kgo.Record
		for len(rs) < 250 {
			fs := cons.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatal(err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				rs = append(rs, &kgo.Record{Topic: "codecs", Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp})
			})
		}
		if err := oc.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		v := runVerify(t, bin, src, other.Addr, "codecs", 1)
		p := v.Partitions[0]
		if *v.Exact || p.Status != "mismatch" || p.FirstMismatch == nil || p.FirstMismatch.Offset == nil || p.FirstMismatch.Field == nil || *p.FirstMismatch.Field == "" {
			t.Fatalf("re-produced copy: %+v", p)
		}
		t.Logf("re-produced copy: first mismatch at offset %d, field %s", *p.FirstMismatch.Offset, *p.FirstMismatch.Field)
	})
	t.Run("repoint-java-consumer", func(t *testing.T) {
		// A Java consumer group reads part of the topic on Kafka and
		// commits; `mirror push --groups` copies the offsets; the same
		// group on Verbatim continues with exactly the remaining records
		// (the client validates its position with OffsetForLeaderEpoch;
		// without a committed offset it would start at the end, as
		// auto.offset.reset=latest, and read nothing).
		k.CreateTopic(t, "repoint", 1, 1, nil)
		rs := keyed("repoint", 200, "rp")
		produceSync(t, cl, rs...)
		consume := func(bootstrap string, n int, extra ...string) []string {
			args := append([]string{"--bootstrap-server", bootstrap, "--topic", "repoint", "--group", "repoint",
				"--max-messages", fmt.Sprint(n), "--timeout-ms", "60000", "--consumer-property", "max.poll.records=1",
				"--formatter-property", "print.offset=true"}, extra...)
			var offsets []string
			for _, l := range JavaTool(t, "kafka-console-consumer", args...).Lines() {
				if strings.HasPrefix(l, "Offset:") {
					offsets = append(offsets, strings.SplitN(strings.TrimPrefix(l, "Offset:"), "\t", 2)[0])
				}
			}
			return offsets
		}
		first := consume(src, 80, "--from-beginning")
		if len(first) != 80 || first[0] != "0" || first[79] != "79" {
			t.Fatalf("source consumer read %d records: %v", len(first), first)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		committed, err := k.Admin(t).FetchOffsets(ctx, "repoint")
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := committed.Lookup("repoint", 0); o.At != 80 {
			t.Fatalf("source group committed %+v, want 80", o.Offset)
		}
		runPush(t, bin, src, dst, 0, "--topics", "repoint", "--create-topics", "--groups", "repoint")
		rest := consume(dst, 120)
		if len(rest) != 120 || rest[0] != "80" || rest[119] != "199" {
			t.Fatalf("the group on Verbatim read %d records (%v ... ); want offsets 80-199", len(rest), rest[:min(len(rest), 5)])
		}
		// A standalone consumer re-pointed by offset and leader epoch (kgo
		// validates the epoch with OffsetForLeaderEpoch before fetching).
		co, _ := committed.Lookup("repoint", 0)
		sc, err := kgo.NewClient(kgo.SeedBrokers(dst), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			"repoint": {0: kgo.NewOffset().At(150).WithEpoch(co.LeaderEpoch)}}))
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		var got []int64
		for len(got) < 50 && ctx.Err() == nil {
			fs := sc.PollFetches(ctx)
			if errs := fs.Errors(); len(errs) > 0 {
				t.Fatalf("standalone consumer: %v", errs)
			}
			fs.EachRecord(func(r *kgo.Record) { got = append(got, r.Offset) })
		}
		if len(got) != 50 || got[0] != 150 || got[49] != 199 {
			t.Fatalf("standalone consumer at 150 (epoch %d) read %d records starting %v", co.LeaderEpoch, len(got), got[:min(len(got), 3)])
		}
		res, _ := RunTool(t, Cmd{}, bin, "verify", "--source", src, "--dest", dst, "--topics", "repoint", "--groups", "repoint")
		if res.ExitCode != 1 || !strings.Contains(res.Stdout, "group repoint repoint/0: mismatch (source 80, expected 80, destination 200)") {
			// The group moved on on Verbatim only: verify must say so.
			t.Fatalf("verify --groups after the destination group advanced: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
		}
	})
	t.Run("stop-failover", func(t *testing.T) {
		// A transaction left open on the source is mirrored; `mirror stop`
		// aborts it and writes the barrier; then Java producers (the
		// console producer, idempotent by default, and the transactional
		// copier) write to the former mirror at new offsets.
		k.CreateTopic(t, "stopme", 1, 1, nil)
		produceSync(t, cl, keyed("stopme", 20, "before")...)
		open := k.Client(t, kgo.TransactionalID("left-open"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err := open.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		produceSync(t, open, keyed("stopme", 3, "open")...)
		pushAndVerify(t, bin, src, dst, "stopme")
		end := destEnd(t, dst, "stopme")
		res, _ := RunTool(t, Cmd{}, bin, "mirror", "stop", "--dest", dst, "--topics", "stopme")
		if res.ExitCode != 0 || !strings.Contains(res.Stdout, fmt.Sprintf("stopme/0: last mirrored offset %d", end-1)) || !strings.Contains(res.Stdout, "1 transactions aborted, barrier true") {
			t.Fatalf("mirror stop: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
		}
		t.Logf("mirror stop: %s", strings.TrimSpace(res.Stdout))
		afterStop := destEnd(t, dst, "stopme")
		var in strings.Builder
		for i := 0; i < 5; i++ {
			fmt.Fprintf(&in, "after-stop-%d\n", i)
		}
		RunJavaTool(t, Cmd{Stdin: strings.NewReader(in.String())}, "kafka-console-producer", "--bootstrap-server", dst, "--topic", "stopme",
			"--producer-property", "enable.idempotence=true", "--producer-property", "acks=all")
		JavaTool(t, "TransactionalMessageCopier", "--broker-list", dst, "--input-topic", "codecs", "--input-partition", "0",
			"--output-topic", "stopme", "--transactional-id", "after-stop", "--consumer-group", "after-stop", "--max-messages", "40",
			"--transaction-size", "10", "--use-group-metadata")
		rc := testkit.Client(t, dst, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"stopme": {0: kgo.NewOffset().At(afterStop)}}),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var plain, copied int
		for plain+copied < 45 && ctx.Err() == nil {
			fs := rc.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset < afterStop {
					t.Errorf("record at %d, below the log end %d after the stop", r.Offset, afterStop)
				}
				if strings.HasPrefix(string(r.Value), "after-stop-") {
					plain++
				} else {
					copied++
				}
			})
		}
		if plain != 5 || copied != 40 {
			t.Fatalf("after the stop: %d console records and %d transactional records readable, want 5 and 40", plain, copied)
		}
		// Kafka's DumpLogSegments reads Verbatim's segment and shows the
		// type-7 barrier right after the stop's ABORT marker.
		segs, _ := filepath.Glob(filepath.Join(v.DataDir, "stopme-0", "*.log"))
		if len(segs) == 0 {
			t.Fatal("no segment file for stopme-0")
		}
		dump := JavaTool(t, "kafka-dump-log", "--deep-iteration", "--files", segs[0]).Stdout
		if !strings.Contains(dump, fmt.Sprintf("| offset: %d ", afterStop-1)) || !strings.Contains(dump, "controlType: UNKNOWN(7)") {
			t.Fatalf("DumpLogSegments shows no type-7 barrier at %d:\n%s", afterStop-1, tail(dump, 20))
		}
	})
	t.Run("kill-pusher", func(t *testing.T) {
		k.CreateTopic(t, "big", 1, 1, nil)
		bc := k.Client(t, kgo.ProducerBatchMaxBytes(2048))
		produceSync(t, bc, keyed("big", 20000, "big")...)
		proc := StartProc(t, "pusher", filepath.Join(t.TempDir(), "push.log"), t.TempDir(), nil,
			bin, "mirror", "push", "--source", src, "--dest", dst, "--topics", "big", "--create-topics", "--fetch-bytes", "1024")
		waitMidCopy(t, proc, dst, "big")
		proc.Signal(syscall.SIGKILL)
		proc.Wait(10 * time.Second)
		t.Logf("pusher killed at destination log end %d", destEnd(t, dst, "big"))
		pushAndVerify(t, bin, src, dst, "big")
	})
	t.Run("kill-serve", func(t *testing.T) {
		k.CreateTopic(t, "big2", 1, 1, nil)
		bc := k.Client(t, kgo.ProducerBatchMaxBytes(2048))
		produceSync(t, bc, keyed("big2", 20000, "big2")...)
		v2 := StartVerbatim(t, bin, VerbatimOptions{Args: []string{"--flush", "always"}})
		proc := StartProc(t, "pusher", filepath.Join(t.TempDir(), "push.log"), t.TempDir(), nil,
			bin, "mirror", "push", "--source", src, "--dest", v2.Addr, "--topics", "big2", "--create-topics", "--fetch-bytes", "1024", "--retry-for", "3s")
		waitMidCopy(t, proc, v2.Addr, "big2")
		v2.Proc.Signal(syscall.SIGKILL)
		v2.Proc.Wait(10 * time.Second)
		proc.Wait(30 * time.Second)
		if proc.ExitCode() != 2 {
			t.Fatalf("pusher after its destination died: exit %d, want 2 (connection)\n%s", proc.ExitCode(), proc.LogTail(20))
		}
		v3 := StartVerbatim(t, bin, VerbatimOptions{DataDir: v2.DataDir, Args: []string{"--flush", "always"}})
		t.Logf("serve killed; restarted with log end %d", destEnd(t, v3.Addr, "big2"))
		pushAndVerify(t, bin, src, v3.Addr, "big2")
	})
}

// prepareMirrorSources writes the source topics every exactness proof
// copies (push and link alike) on the single Kafka node k: "compacted"
// (cleaned by Kafka's cleaner before it returns), "epochs" (2 partitions,
// three leader epochs from two restarts), "codecs" (every codec),
// "logappend" (LogAppendTime), "txn" (2 partitions, committed and aborted
// transactions) and "deleted" (DeleteRecords to 60, inside a batch). cl
// uses a manual partitioner.
func prepareMirrorSources(t *testing.T, k *Kafka, cl *kgo.Client) {
	t.Helper()
	src := k.Bootstrap()
	// Topics that need time (the cleaner, restarts) are prepared first.
	k.CreateTopic(t, "compacted", 1, 1, map[string]string{"cleanup.policy": "compact", "segment.ms": "100",
		"min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0", "delete.retention.ms": "0"})
	for round := 0; round < 4; round++ {
		rs := keyed("compacted", 40, fmt.Sprintf("r%d", round))
		rs = append(rs, &kgo.Record{Topic: "compacted", Key: []byte("key-3")}) // a tombstone
		produceSync(t, cl, rs...)
		time.Sleep(150 * time.Millisecond)
	}
	k.CreateTopic(t, "epochs", 2, 1, nil)
	k.CreateTopic(t, "codecs", 1, 1, nil)
	for _, c := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()} {
		produceSync(t, k.Client(t, kgo.ProducerBatchCompression(c)), keyed("codecs", 50, "codec")...)
	}
	k.CreateTopic(t, "logappend", 1, 1, map[string]string{"message.timestamp.type": "LogAppendTime"})
	produceSync(t, cl, keyed("logappend", 30, "lat")...)
	k.CreateTopic(t, "txn", 2, 1, nil)
	tx := k.Client(t, kgo.TransactionalID("mirror-txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i, commit := range []bool{true, false, true, false} {
		produceTxn(t, tx, "txn", fmt.Sprintf("txn%d", i), commit)
		produceSync(t, cl, &kgo.Record{Topic: "txn", Partition: int32(i % 2), Value: []byte("plain between transactions")})
	}
	k.CreateTopic(t, "deleted", 1, 1, nil)
	produceSync(t, cl, keyed("deleted", 50, "del")...)
	produceSync(t, cl, keyed("deleted", 50, "del2")...)
	off := kadm.Offsets{}
	off.Add(kadm.Offset{Topic: "deleted", Partition: 0, At: 60})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	if _, err := k.Admin(t).DeleteRecords(ctx, off); err != nil {
		t.Fatal(err)
	}
	cancel()
	// Leader epochs: data, restart (new epochs), data, restart, data.
	for i := 0; i < 3; i++ {
		for p := int32(0); p < 2; p++ {
			rs := keyed("epochs", 20, fmt.Sprintf("e%d", i))
			for _, r := range rs {
				r.Partition = p
			}
			produceSync(t, cl, rs...)
		}
		if i < 2 {
			k.Nodes[0].Restart(t)
		}
	}
	// The cleaner must have run on the compacted topic.
	deadline := time.Now().Add(60 * time.Second)
	for {
		gaps, end := partitionGaps(t, src, "compacted")
		if gaps > 0 {
			t.Logf("compacted: %d of %d offsets cleaned away", gaps, end)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Kafka cleaner did not compact the topic within 60s")
		}
		time.Sleep(500 * time.Millisecond)
	}

}

// waitMidCopy waits until the destination holds part of topic.
func waitMidCopy(t *testing.T, proc *Proc, dst, topic string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if proc.Alive() != nil {
			t.Fatalf("the pusher ended before it could be killed mid-copy\n%s", proc.LogTail(20))
		}
		if e := destEnd(t, dst, topic); e > 0 {
			return
		}
	}
	t.Fatalf("the pusher copied nothing within 60s\n%s", proc.LogTail(20))
}

// countMarkers counts the control batches of type typ (0 ABORT, 1 COMMIT)
// in partition 0 of topic.
func countMarkers(t *testing.T, addr, topic string, typ int16) int {
	t.Helper()
	n := 0
	eachBatch(t, addr, topic, func(b []byte) {
		if got, ok := kbatch.ControlType(b); ok && got == typ {
			n++
		}
	})
	return n
}
