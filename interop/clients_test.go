package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// verbatimClient returns a franz-go client for addr (a bootstrap list:
// host:port,host:port), closed on cleanup.
func verbatimClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(strings.Split(addr, ",")...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopicOn(t testing.TB, adm *kadm.Client, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	createTopicRF(t, adm, topic, partitions, 1, configs)
}

// createTopicRF is createTopicOn with a replication factor.
func createTopicRF(t testing.TB, adm *kadm.Client, topic string, partitions int32, rf int16, configs map[string]string) {
	t.Helper()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = kadm.StringPtr(v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, rf, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// endOffset is partition 0's log end (ListOffsets latest).
func endOffset(t testing.TB, adm *kadm.Client, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets %s: %v", topic, err)
	}
	o, ok := offs.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("list end offsets %s: %v", topic, o.Err)
	}
	return o.Offset
}

// keyedLines returns n "key|value" lines and the records they stand for,
// at offsets from base.
func keyedLines(prefix string, n int, base int) (string, []wantRecord) {
	var b strings.Builder
	var want []wantRecord
	for i := 0; i < n; i++ {
		k, v := fmt.Sprintf("%s-%04d", prefix, i), fmt.Sprintf("%s value %d %s", prefix, i, strings.Repeat("z", i%13))
		fmt.Fprintf(&b, "%s|%s\n", k, v)
		want = append(want, wantRecord{base + i, k, v})
	}
	return b.String(), want
}

// pyProduceConsume produces N records with keys and headers (zstd,
// idempotent, acks=all) to partition 0, then reads the partition from the
// beginning in assign mode and prints "offset<TAB>key<TAB>value<TAB>headers".
const pyProduceConsume = `
import sys
from confluent_kafka import Producer, Consumer, TopicPartition, OFFSET_BEGINNING

bootstrap, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
              "compression.type": "zstd", "linger.ms": 10})
acked, errs = {}, []
def cb(err, m):
    if err:
        errs.append(str(err))
    else:
        acked[m.offset()] = m.key().decode()
for i in range(n):
    p.produce(topic, key="py-%04d" % i, value="python value %d" % i, partition=0,
              headers=[("i", str(i).encode()), ("src", b"confluent")], on_delivery=cb)
left = p.flush(60)
if errs or left:
    sys.exit("delivery errors %s, %d undelivered" % (errs[:3], left))
if sorted(acked) != list(range(n)):
    sys.exit("acknowledged offsets %s" % sorted(acked)[:10])
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "interop-py-verbatim",
              "enable.auto.commit": False, "enable.partition.eof": False})
c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
got = 0
while got < n:
    m = c.poll(30)
    if m is None:
        sys.exit("timed out after %d records" % got)
    if m.error():
        sys.exit("consume error: %s" % m.error())
    hdrs = ",".join("%s=%s" % (k, v.decode()) for k, v in (m.headers() or []))
    print("%d\t%s\t%s\t%s" % (m.offset(), m.key().decode(), m.value().decode(), hdrs))
    got += 1
c.close()
`

// TestVerbatimRealClients runs ordinary Kafka clients and tools against one
// `verbatim serve --flush always`: kcat (librdkafka 2.0.2) with every codec,
// keys and headers; the Java console producer and consumer; kafka-topics and
// kafka-configs; confluent-kafka; franz-go; an idempotent
// VerifiableProducer; ordinary producers refused fast on a mirror topic;
// and finally a SIGKILL and restart that must lose nothing.
func TestVerbatimRealClients(t *testing.T) {
	bin := BuildVerbatim(t)
	v := StartVerbatim(t, bin, VerbatimOptions{Args: []string{"--flush", "always"}})
	bs := v.Addr
	cl := verbatimClient(t, bs)
	adm := kadm.NewClient(cl)
	rc := realClients{bs: bs, cl: cl, adm: adm, rf: 1}

	t.Run("kafka-topics-and-configs", func(t *testing.T) {
		JavaTool(t, "kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "tool-topic",
			"--partitions", "3", "--replication-factor", "1", "--config", "retention.ms=3600000")
		JavaTool(t, "kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "tool-kept",
			"--partitions", "2", "--replication-factor", "1")
		res := JavaTool(t, "kafka-topics", "--bootstrap-server", bs, "--describe", "--topic", "tool-topic")
		out := res.Stdout
		for _, want := range []string{"Topic: tool-topic", "TopicId: ", "PartitionCount: 3", "ReplicationFactor: 1", "retention.ms=3600000"} {
			if !strings.Contains(out, want) {
				t.Errorf("kafka-topics --describe lacks %q:\n%s", want, out)
			}
		}
		parts := 0
		for _, l := range strings.Split(out, "\n") {
			f := dumpFields(l)
			if f["Partition"] != "" && f["Leader"] == "1" && f["Replicas"] == "1" && f["Isr"] == "1" {
				parts++
			}
		}
		if parts != 3 {
			t.Errorf("kafka-topics --describe: %d partitions led by node 1 with ISR [1], want 3:\n%s", parts, out)
		}

		JavaTool(t, "kafka-configs", "--bootstrap-server", bs, "--entity-type", "topics", "--entity-name", "tool-kept",
			"--alter", "--add-config", "retention.ms=86400000,cleanup.policy=compact,max.message.bytes=2000000")
		res = JavaTool(t, "kafka-configs", "--bootstrap-server", bs, "--entity-type", "topics", "--entity-name", "tool-kept", "--describe")
		for _, want := range []string{"retention.ms=86400000", "cleanup.policy=compact", "max.message.bytes=2000000"} {
			if !strings.Contains(res.Stdout, want) {
				t.Errorf("kafka-configs --describe lacks %s:\n%s", want, res.Stdout)
			}
		}
		JavaTool(t, "kafka-configs", "--bootstrap-server", bs, "--entity-type", "topics", "--entity-name", "tool-kept",
			"--alter", "--delete-config", "max.message.bytes")
		res = JavaTool(t, "kafka-configs", "--bootstrap-server", bs, "--entity-type", "topics", "--entity-name", "tool-kept", "--describe")
		if strings.Contains(res.Stdout, "max.message.bytes=") || !strings.Contains(res.Stdout, "cleanup.policy=compact") {
			t.Errorf("after --delete-config max.message.bytes:\n%s", res.Stdout)
		}
		// An invalid value is refused by the broker, as Kafka refuses it.
		bad, err := RunJavaTool(t, Cmd{}, "kafka-configs", "--bootstrap-server", bs, "--entity-type", "topics", "--entity-name", "tool-kept",
			"--alter", "--add-config", "cleanup.policy=sometimes")
		if err == nil || !strings.Contains(bad.Stdout+bad.Stderr, "InvalidConfigurationException") {
			t.Errorf("invalid cleanup.policy accepted or refused without InvalidConfigurationException:\n%s", bad.describe())
		}

		JavaTool(t, "kafka-topics", "--bootstrap-server", bs, "--delete", "--topic", "tool-topic")
		deadline := time.Now().Add(30 * time.Second)
		for {
			res = JavaTool(t, "kafka-topics", "--bootstrap-server", bs, "--list")
			listed := map[string]bool{}
			for _, l := range res.Lines() {
				listed[strings.TrimSpace(l)] = true
			}
			if !listed["tool-kept"] {
				t.Fatalf("kafka-topics --list lacks tool-kept:\n%s", res.Stdout)
			}
			if !listed["tool-topic"] {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("tool-topic still listed 30s after --delete:\n%s", res.Stdout)
			}
			time.Sleep(500 * time.Millisecond)
		}
	})

	t.Run("kcat-every-codec", rc.kcatEveryCodec)

	t.Run("java-console", rc.javaConsole)

	t.Run("confluent-kafka", rc.confluentKafka)

	t.Run("confluent-kafka-transactions", func(t *testing.T) {
		const topic = "pytxn"
		createTopicOn(t, adm, topic, 1, nil)
		if res := Python(t, pyTxnProduce, bs, topic); strings.TrimSpace(res.Stdout) != "done" {
			t.Fatalf("transactional producer: %s", res.describe())
		}
		// The same layout as on Kafka (see the capture test): data 0-4,
		// COMMIT 5, aborted data 6-8, ABORT 9, data 10-13, COMMIT 14.
		var layout []string
		for _, b := range fetchAllRaw(t, cl, topic) {
			h, _ := kbatch.ParseHeader(b)
			kind := "data"
			if typ, ok := kbatch.ControlType(b); ok && h.IsControl() {
				kind = map[int16]string{kbatch.ControlAbort: "ABORT", kbatch.ControlCommit: "COMMIT"}[typ]
			}
			layout = append(layout, fmt.Sprintf("%d-%d:%s", h.BaseOffset, h.LastOffset(), kind))
		}
		if want := "[0-4:data 5-5:COMMIT 6-8:data 9-9:ABORT 10-13:data 14-14:COMMIT]"; fmt.Sprint(layout) != want {
			t.Errorf("stored layout %v, want %s", layout, want)
		}
		if got := abortedFromFetch(t, cl, topic); len(got) != 1 || got[0].First != 6 {
			t.Errorf("read_committed fetch lists aborted transactions %v, want one starting at 6", got)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		ccl := verbatimClient(t, bs, kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		var got []string
		for len(got) < 9 {
			fs := ccl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("read_committed: %d records %v", len(got), got)
			}
			fs.EachRecord(func(r *kgo.Record) { got = append(got, fmt.Sprintf("%d:%s", r.Offset, r.Key)) })
		}
		want := "[0:first-0 1:first-1 2:first-2 3:first-3 4:first-4 10:second-0 11:second-1 12:second-2 13:second-3]"
		if fmt.Sprint(got) != want {
			t.Errorf("read_committed records %v, want %s", got, want)
		}
	})

	t.Run("franz-go", rc.franzGo)

	t.Run("verifiable-idempotent", func(t *testing.T) {
		const topic, n = "verif-idem", 500
		createTopicOn(t, adm, topic, 1, nil)
		cfg := filepath.Join(t.TempDir(), "producer.properties")
		if err := os.WriteFile(cfg, []byte("enable.idempotence=true\nretries=2147483647\nmax.in.flight.requests.per.connection=5\nlinger.ms=2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		res := JavaTool(t, "kafka-verifiable-producer", "--bootstrap-server", bs, "--topic", topic,
			"--max-messages", strconv.Itoa(n), "--acks", "-1", "--command-config", cfg)
		acked := map[int64]string{}
		var errs []string
		for _, ev := range jsonEvents(t, res.Stdout) {
			switch ev["name"] {
			case "producer_send_success":
				acked[int64(ev["offset"].(float64))] = fmt.Sprint(ev["value"])
			case "producer_send_error":
				errs = append(errs, fmt.Sprint(ev["exception"], ": ", ev["message"]))
			}
		}
		if len(acked) != n || len(errs) > 0 {
			t.Fatalf("verifiable producer: %d distinct offsets acked of %d, errors %v", len(acked), n, errs)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		ccl := verbatimClient(t, bs, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		seen := 0
		idempotent := true
		for seen < n {
			fs := ccl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("read back %d of %d acknowledged records", seen, n)
			}
			fs.EachRecord(func(r *kgo.Record) {
				if want, ok := acked[r.Offset]; !ok || want != string(r.Value) {
					t.Fatalf("offset %d holds %q; acknowledged %q (%v)", r.Offset, r.Value, want, ok)
				}
				idempotent = idempotent && r.ProducerID >= 0
				seen++
			})
		}
		if !idempotent {
			t.Errorf("records stored without a producer id: the producer was not idempotent")
		}
		if end := endOffset(t, adm, topic); end != n {
			t.Errorf("log end %d after %d acknowledged records, want %d (nothing duplicated)", end, n, n)
		}
	})

	t.Run("mirror-topic-refuses-ordinary-producers", func(t *testing.T) {
		const topic = "mirrored"
		createTopicOn(t, adm, topic, 1, map[string]string{"mirror.mode": "push"})
		in, _ := keyedLines("ordinary", 3, 0)

		// Java producer: retries would run until delivery.timeout.ms (120 s);
		// a non-retriable error fails the send at once.
		res, _ := RunJavaTool(t, Cmd{Stdin: strings.NewReader(in), Timeout: 3 * time.Minute}, "kafka-console-producer",
			"--bootstrap-server", bs, "--topic", topic,
			"--reader-property", "parse.key=true", "--reader-property", "key.separator=|",
			"--producer-property", "acks=all", "--producer-property", "delivery.timeout.ms=120000",
			"--producer-property", "request.timeout.ms=30000")
		if !strings.Contains(res.Stderr, "PolicyViolationException") || !strings.Contains(res.Stderr, "mirror") {
			t.Errorf("Java producer on a mirror topic: no PolicyViolationException naming the mirror:\n%s", res.describe())
		}
		if res.Elapsed > 60*time.Second { // JVM start included; a retrying producer takes 120 s
			t.Errorf("Java producer took %v to fail (retried instead of failing fast)", res.Elapsed)
		}
		t.Logf("Java producer failed after %v", res.Elapsed.Round(time.Millisecond))

		// librdkafka (kcat): message.timeout.ms 120 s bounds its retries.
		kres, _ := RunKcat(t, Cmd{Stdin: strings.NewReader(in), Timeout: 3 * time.Minute}, "-P", "-b", bs, "-t", topic,
			"-p", "0", "-K", "|", "-X", "acks=all", "-X", "message.timeout.ms=120000")
		if !strings.Contains(kres.Stderr, "Delivery failed") || !strings.Contains(strings.ToLower(kres.Stderr), "policy violation") {
			t.Errorf("kcat on a mirror topic: no delivery failure with a policy violation:\n%s", kres.describe())
		}
		if kres.Elapsed > 60*time.Second {
			t.Errorf("kcat took %v to fail (retried instead of failing fast)", kres.Elapsed)
		}
		t.Logf("kcat failed after %v (exit %d)", kres.Elapsed.Round(time.Millisecond), kres.ExitCode)

		if end := endOffset(t, adm, topic); end != 0 {
			t.Errorf("mirror topic log end %d after refused produces, want 0", end)
		}
	})

	t.Run("restart-after-sigkill", func(t *testing.T) {
		// Its own acks=-1 data and config, besides what earlier subtests left.
		const topic = "restart"
		createTopicOn(t, adm, topic, 2, map[string]string{"retention.ms": "7200000", "cleanup.policy": "compact"})
		pcl := verbatimClient(t, bs, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for i := 0; i < 50; i++ {
			r := &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i%10)), Value: []byte(fmt.Sprintf("v%d", i)), Partition: int32(i % 2)}
			if err := pcl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce before the restart: %v", err)
			}
		}
		before := captureBrokerState(t, cl, adm)
		if before.ends[topic+"/0"]+before.ends[topic+"/1"] != 50 || before.configs[topic] != "cleanup.policy=compact,retention.ms=7200000" {
			t.Fatalf("before the restart: ends %v, configs %v", before.ends, before.configs)
		}
		v.Proc.Signal(syscall.SIGKILL)
		if !v.Proc.Wait(20 * time.Second) {
			t.Fatalf("verbatim did not die on SIGKILL")
		}
		v2 := StartVerbatim(t, bin, VerbatimOptions{DataDir: v.DataDir, Args: []string{"--flush", "always"}})
		cl2 := verbatimClient(t, v2.Addr)
		after := captureBrokerState(t, cl2, kadm.NewClient(cl2))
		compareState(t, before, after)
	})
	t.Run("kafka-dump-log-reads-served-data", func(t *testing.T) {
		// The partition directories the broker wrote (after the restart,
		// if it ran) are Kafka's format: DumpLogSegments decodes every
		// batch and record the way they were acknowledged, and the indexes
		// pass its checks.
		dirs, err := filepath.Glob(filepath.Join(v.DataDir, "*-[0-9]*"))
		if err != nil {
			t.Fatal(err)
		}
		var logs, idx []string
		var want [][]byte
		for _, d := range dirs {
			if strings.HasPrefix(filepath.Base(d), "__") {
				continue // internal topics hold binary keys and values
			}
			bs := readLogBatches(t, d)
			if len(bs) == 0 {
				continue
			}
			want = append(want, bs...)
			logs = append(logs, segmentFiles(t, d, ".log")...)
			for _, f := range append(segmentFiles(t, d, ".index"), segmentFiles(t, d, ".timeindex")...) {
				if st, err := os.Stat(f); err == nil && st.Size() > 0 {
					idx = append(idx, f)
				}
			}
		}
		if len(want) == 0 {
			t.Fatalf("no partition with data under %s", v.DataDir)
		}
		res := JavaTool(t, "kafka-dump-log", "--files", strings.Join(logs, ","), "--print-data-log", "--deep-iteration")
		checkDumpedBatches(t, res.Stdout, want)
		if len(idx) > 0 {
			res = JavaTool(t, "kafka-dump-log", "--files", strings.Join(idx, ","), "--index-sanity-check")
			checkIndexDump(t, "--index-sanity-check", res, idx)
		}
		// The transactional subtest's aborted transaction (6-9) is in the
		// broker's transaction index, as Kafka writes it.
		if txn := segmentFiles(t, filepath.Join(v.DataDir, "pytxn-0"), ".txnindex"); len(readLogBatches(t, filepath.Join(v.DataDir, "pytxn-0"))) > 0 {
			if len(txn) == 0 {
				t.Fatalf("pytxn-0 holds an aborted transaction but no .txnindex")
			}
			res = JavaTool(t, "kafka-dump-log", "--files", strings.Join(txn, ","))
			var entries []string
			for _, l := range strings.Split(res.Stdout, "\n") {
				if f := dumpFields(l); f["firstOffset"] != "" {
					entries = append(entries, f["firstOffset"]+"-"+f["lastOffset"])
				}
			}
			if fmt.Sprint(entries) != "[6-9]" {
				t.Errorf("pytxn-0 transaction index entries %v, want [6-9]:\n%s", entries, res.Stdout)
			}
		}
		t.Logf("DumpLogSegments agrees on %d batches in %d segment files; %d non-empty index files pass", len(want), len(logs), len(idx))
	})
}

// realClients runs the real-client checks shared by the single node
// (TestVerbatimRealClients) and the cluster (TestVerbatimCluster) against
// a bootstrap list, creating their topics with replication factor rf.
type realClients struct {
	bs  string
	cl  *kgo.Client
	adm *kadm.Client
	rf  int16
}

// create creates topic with rc's replication factor.
func (rc realClients) create(t testing.TB, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	createTopicRF(t, rc.adm, topic, partitions, rc.rf, configs)
}

// kcatEveryCodec produces with kcat (librdkafka) in every codec with keys
// and headers, reads it back, and checks the batches are stored as sent.
func (rc realClients) kcatEveryCodec(t *testing.T) {
	const topic, per = "kcat", 40
	rc.create(t, topic, 1, nil)
	var want []string
	for ci, z := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		in, recs := keyedLines("kcat-"+z, per, ci*per)
		if _, err := RunKcat(t, Cmd{Stdin: strings.NewReader(in)}, "-P", "-b", rc.bs, "-t", topic, "-p", "0",
			"-K", "|", "-z", z, "-H", "codec="+z, "-H", "origin=kcat", "-X", "acks=all"); err != nil {
			t.Fatalf("kcat produce -z %s: %v", z, err)
		}
		for _, r := range recs {
			want = append(want, fmt.Sprintf("%d\t%s\t%s\tcodec=%s,origin=kcat", r.offset, r.key, r.value, z))
		}
	}
	res := Kcat(t, "-C", "-b", rc.bs, "-t", topic, "-p", "0", "-o", "beginning", "-c", strconv.Itoa(len(want)), "-e",
		"-f", "%o\t%k\t%s\t%h\n")
	if got := res.Lines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("kcat consumed %d lines, want %d; first difference:\n%s", len(got), len(want), firstLineDiff(got, want))
	}
	// Stored as sent: one codec per producer run.
	codecs := map[kbatch.Codec]bool{}
	for _, b := range fetchAllRaw(t, rc.cl, topic) {
		h, _ := kbatch.ParseHeader(b)
		codecs[h.Codec()] = true
	}
	if len(codecs) != 5 {
		t.Errorf("stored batches use codecs %v, want all five", codecs)
	}
}

// javaConsole moves keyed records through the Java console producer
// (acks=all, lz4) and console consumer.
func (rc realClients) javaConsole(t *testing.T) {
	const topic, n = "console", 300
	rc.create(t, topic, 1, nil)
	in, want := keyedLines("java", n, 0)
	if _, err := RunJavaTool(t, Cmd{Stdin: strings.NewReader(in)}, "kafka-console-producer",
		"--bootstrap-server", rc.bs, "--topic", topic, "--compression-codec", "lz4",
		"--reader-property", "parse.key=true", "--reader-property", "key.separator=|",
		"--producer-property", "acks=all"); err != nil {
		t.Fatalf("console producer: %v", err)
	}
	res, lines := consoleConsumeKeyed(t, rc.bs, topic, n)
	t.Logf("console consumer ran %v", res.Elapsed.Round(time.Millisecond))
	checkConsumed(t, "console consumer", lines, want)
}

// confluentKafka produces idempotently with confluent-kafka (zstd, acks=all)
// and reads the partition back.
func (rc realClients) confluentKafka(t *testing.T) {
	const topic, n = "pyck", 200
	rc.create(t, topic, 1, nil)
	res := Python(t, pyProduceConsume, rc.bs, topic, strconv.Itoa(n))
	lines := res.Lines()
	if len(lines) != n {
		t.Fatalf("confluent-kafka read %d records, want %d:\n%s", len(lines), n, res.describe())
	}
	for i, l := range lines {
		want := fmt.Sprintf("%d\tpy-%04d\tpython value %d\ti=%d,src=confluent", i, i, i, i)
		if l != want {
			t.Fatalf("confluent-kafka record %d = %q, want %q", i, l, want)
		}
	}
}

// franzGo produces and consumes 1,000 records with franz-go.
func (rc realClients) franzGo(t *testing.T) {
	const topic, n = "kgo", 1000
	rc.create(t, topic, 1, nil)
	pcl := verbatimClient(t, rc.bs, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.SnappyCompression()), kgo.ProducerLinger(5*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("kgo-%d", i)), Value: []byte(fmt.Sprintf("kgo value %d", i)),
			Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(strconv.Itoa(i))}}})
	}
	if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("kgo produce: %v", err)
	}
	ccl := verbatimClient(t, rc.bs, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	got := 0
	for got < n {
		fs := ccl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("kgo consume: %d of %d records: %v", got, n, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("kgo consume %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			i := got
			if r.Offset != int64(i) || string(r.Key) != fmt.Sprintf("kgo-%d", i) || string(r.Value) != fmt.Sprintf("kgo value %d", i) ||
				len(r.Headers) != 1 || string(r.Headers[0].Value) != strconv.Itoa(i) {
				t.Fatalf("kgo record %d: offset %d key %q value %q headers %v", i, r.Offset, r.Key, r.Value, r.Headers)
			}
			got++
		})
	}
}

// brokerState is what a restart must keep: every partition's start and end
// offsets, leader epochs, every stored batch of partition 0 of each topic,
// and each topic's non-default configs.
type brokerState struct {
	ends, starts map[string]int64 // "topic/partition"
	epochs       map[string]int32
	batches      map[string][][]byte // topic -> partition 0 batches
	configs      map[string]string   // topic -> sorted "k=v" list
	// oflle is OffsetForLeaderEpoch for the last batch's epoch of
	// partition 0: "answered epoch/end offset error".
	oflle map[string]string
}

func captureBrokerState(t *testing.T, cl *kgo.Client, adm *kadm.Client) brokerState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st := brokerState{ends: map[string]int64{}, starts: map[string]int64{}, epochs: map[string]int32{},
		batches: map[string][][]byte{}, configs: map[string]string{}, oflle: map[string]string{}}
	md, err := adm.Metadata(ctx)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	var topics []string
	for name, td := range md.Topics {
		if td.IsInternal || strings.HasPrefix(name, "__") {
			continue
		}
		topics = append(topics, name)
		for p, pd := range td.Partitions {
			st.epochs[fmt.Sprintf("%s/%d", name, p)] = pd.LeaderEpoch
		}
	}
	sort.Strings(topics)
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		t.Fatalf("list start offsets: %v", err)
	}
	ends.Each(func(o kadm.ListedOffset) { st.ends[fmt.Sprintf("%s/%d", o.Topic, o.Partition)] = o.Offset })
	starts.Each(func(o kadm.ListedOffset) { st.starts[fmt.Sprintf("%s/%d", o.Topic, o.Partition)] = o.Offset })
	rcs, err := adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		t.Fatalf("describe configs: %v", err)
	}
	for _, rc := range rcs {
		var kv []string
		for _, c := range rc.Configs {
			if c.Source == 1 { // DYNAMIC_TOPIC_CONFIG: set on the topic
				kv = append(kv, c.Key+"="+c.MaybeValue())
			}
		}
		sort.Strings(kv)
		st.configs[rc.Name] = strings.Join(kv, ",")
	}
	for _, topic := range topics {
		if st.ends[topic+"/0"] > 0 {
			st.batches[topic] = fetchAllRaw(t, cl, topic)
			req := kadm.OffsetForLeaderEpochRequest{}
			bs := st.batches[topic]
			req.Add(topic, 0, kbatch.LeaderEpoch(bs[len(bs)-1]))
			resp, err := adm.OffsetForLeaderEpoch(ctx, req)
			if err != nil {
				t.Fatalf("OffsetForLeaderEpoch %s: %v", topic, err)
			}
			o := resp[topic][0]
			st.oflle[topic] = fmt.Sprintf("%d/%d %v", o.LeaderEpoch, o.EndOffset, o.Err)
			if o.Err != nil || o.EndOffset != st.ends[topic+"/0"] {
				t.Errorf("OffsetForLeaderEpoch %s: %+v, want the log end %d", topic, o, st.ends[topic+"/0"])
			}
		}
	}
	return st
}

func compareState(t *testing.T, before, after brokerState) {
	t.Helper()
	if fmt.Sprint(after.ends) != fmt.Sprint(before.ends) {
		t.Errorf("end offsets: before %v, after %v", before.ends, after.ends)
	}
	if fmt.Sprint(after.starts) != fmt.Sprint(before.starts) {
		t.Errorf("start offsets: before %v, after %v", before.starts, after.starts)
	}
	if fmt.Sprint(after.epochs) != fmt.Sprint(before.epochs) {
		t.Errorf("partition leader epochs: before %v, after %v", before.epochs, after.epochs)
	}
	if fmt.Sprint(after.oflle) != fmt.Sprint(before.oflle) {
		t.Errorf("OffsetForLeaderEpoch answers: before %v, after %v", before.oflle, after.oflle)
	}
	if fmt.Sprint(after.configs) != fmt.Sprint(before.configs) {
		t.Errorf("topic configs: before %v, after %v", before.configs, after.configs)
	}
	for topic, bs := range before.batches {
		sameBatches(t, "batches of "+topic+" after restart", after.batches[topic], bs)
	}
	t.Logf("restart kept %d partitions, %d topics with data, configs %v; epochs before %v after %v",
		len(before.ends), len(before.batches), before.configs, before.epochs, after.epochs)
}

// firstLineDiff shows where two line lists first differ.
func firstLineDiff(got, want []string) string {
	for i := 0; i < min(len(got), len(want)); i++ {
		if got[i] != want[i] {
			return fmt.Sprintf("line %d: got %q\n         want %q", i, got[i], want[i])
		}
	}
	if len(got) < len(want) {
		return fmt.Sprintf("missing from line %d: %q", len(got), want[len(got)])
	}
	if len(got) > len(want) {
		return fmt.Sprintf("extra from line %d: %q", len(want), got[len(want)])
	}
	return "none"
}
