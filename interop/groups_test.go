package interop

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// verifiableEvents reads the JSON events a verifiable client wrote to its
// log so far (other lines skipped; a partial last line ignored).
func verifiableEvents(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var ev map[string]any
		if json.Unmarshal([]byte(l), &ev) == nil {
			evs = append(evs, ev)
		}
	}
	return evs
}

// TestGroupsJavaVerifiableConsumers: a VerifiableProducer and three
// VerifiableConsumers in one group against verbatim serve; one consumer is
// killed (SIGKILL) mid-run and restarted. Every acknowledged record must be
// consumed, each consumer's committed offsets must never go backwards, and
// the group ends with committed offsets at the log end. Then
// kafka-consumer-groups --describe, --reset-offsets and --delete, and
// ConsumerPerformance with a group.
func TestGroupsJavaVerifiableConsumers(t *testing.T) {
	bin := BuildVerbatim(t)
	v := StartVerbatim(t, bin, VerbatimOptions{})
	adm := kadm.NewClient(verbatimClient(t, v.Addr))
	const topic, parts, n = "vgroups", 6, 3000
	createTopicOn(t, adm, topic, parts, nil)

	dir := t.TempDir()
	consumer := func(i, gen int) *Proc {
		name := "consumer-" + strconv.Itoa(i) + "-" + strconv.Itoa(gen)
		argv := javaArgv(t, Cmd{}, "kafka-verifiable-consumer", []string{"--bootstrap-server", v.Addr, "--topic", topic,
			"--group-id", "vgroup", "--group-protocol", "classic", "--session-timeout", "10000", "--reset-policy", "earliest"})
		return StartProc(t, name, filepath.Join(dir, name+".log"), dir, nil, argv...)
	}
	cons := []*Proc{consumer(0, 0), consumer(1, 0), consumer(2, 0)}
	t.Cleanup(func() { StopAll(10*time.Second, cons...) })
	prodArgv := javaArgv(t, Cmd{}, "kafka-verifiable-producer", []string{"--bootstrap-server", v.Addr, "--topic", topic,
		"--max-messages", strconv.Itoa(n), "--throughput", "500", "--acks", "-1"})
	prod := StartProc(t, "producer", filepath.Join(dir, "producer.log"), dir, nil, prodArgv...)
	t.Cleanup(func() { StopAll(10*time.Second, prod) })

	// Kill one consumer once the producer is well under way, restart it.
	time.Sleep(3 * time.Second)
	cons[1].Signal(syscall.SIGKILL)
	cons[1].Wait(10 * time.Second)
	time.Sleep(2 * time.Second)
	cons = append(cons, consumer(1, 1))
	if !prod.Wait(2 * time.Minute) {
		t.Fatalf("producer did not finish\n%s", prod.LogTail(20))
	}
	acked := map[[2]int64]bool{}
	for _, ev := range verifiableEvents(t, prod.LogPath) {
		if ev["name"] == "producer_send_success" {
			acked[[2]int64{int64(ev["partition"].(float64)), int64(ev["offset"].(float64))}] = true
		}
	}
	if len(acked) != n {
		t.Fatalf("producer acknowledged %d of %d records\n%s", len(acked), n, prod.LogTail(20))
	}
	// Wait until the group has committed the log end of every partition.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for {
		offs, err := adm.FetchOffsets(ctx, "vgroup")
		total := int64(0)
		if err == nil {
			offs.Each(func(o kadm.OffsetResponse) { total += o.At })
		}
		if total == n {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("group committed %d of %d (err %v)", total, n, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// Every acknowledged record was consumed by some consumer; committed
	// offsets per consumer and partition never went backwards.
	consumed := map[[2]int64]bool{}
	for _, p := range cons {
		lastCommit := map[int64]int64{}
		for _, ev := range verifiableEvents(t, p.LogPath) {
			switch ev["name"] {
			case "records_consumed":
				for _, pa := range ev["partitions"].([]any) {
					m := pa.(map[string]any)
					part := int64(m["partition"].(float64))
					for o := int64(m["minOffset"].(float64)); o <= int64(m["maxOffset"].(float64)); o++ {
						consumed[[2]int64{part, o}] = true
					}
				}
			case "offsets_committed":
				if ev["success"] != true {
					continue
				}
				for _, oa := range ev["offsets"].([]any) {
					m := oa.(map[string]any)
					part, off := int64(m["partition"].(float64)), int64(m["offset"].(float64))
					if off < lastCommit[part] {
						t.Errorf("%s: committed offset of partition %d went back from %d to %d", p.Name, part, lastCommit[part], off)
					}
					lastCommit[part] = off
				}
			}
		}
	}
	for k := range acked {
		if !consumed[k] {
			t.Errorf("acknowledged record partition %d offset %d was never consumed", k[0], k[1])
		}
	}

	// The killed consumer's session expires 10 s after the kill and
	// rebalances the group; describe shows members only once the group is
	// stable again, so wait for a stable generation of the three live
	// consumers (describing again if a rebalance slipped in between).
	res := &Result{}
	for deadline := time.Now().Add(60 * time.Second); ; {
		dg, err := adm.DescribeGroups(context.Background(), "vgroup")
		if err == nil && dg["vgroup"].State == "Stable" && len(dg["vgroup"].Members) == 3 {
			res = JavaTool(t, "kafka-consumer-groups", "--bootstrap-server", v.Addr, "--describe", "--group", "vgroup")
			if strings.Contains(res.Stdout, topic) && strings.Count(res.Stdout, "consumer-vgroup") >= 3 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("describe lacks the topic or the three consumers (group %+v, %v):\n%s", dg["vgroup"], err, res.Stdout)
		}
		time.Sleep(500 * time.Millisecond)
	}
	StopAll(10*time.Second, cons...)
	waitGroupEmpty(t, adm, "vgroup")
	res = JavaTool(t, "kafka-consumer-groups", "--bootstrap-server", v.Addr, "--reset-offsets", "--group", "vgroup",
		"--topic", topic, "--to-earliest", "--execute")
	offs, err := adm.FetchOffsets(context.Background(), "vgroup")
	if err != nil {
		t.Fatal(err)
	}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.At != 0 {
			t.Errorf("after --reset-offsets --to-earliest: partition %d at %d\n%s", o.Partition, o.At, res.Stdout)
		}
	})
	JavaTool(t, "kafka-consumer-groups", "--bootstrap-server", v.Addr, "--delete", "--group", "vgroup")
	lg, err := adm.ListGroups(context.Background())
	if err != nil || len(lg) != 0 && lg["vgroup"].Group != "" {
		t.Errorf("group still listed after --delete: %v %v", lg, err)
	}

	res = JavaTool(t, "kafka-consumer-perf-test", "--bootstrap-server", v.Addr, "--topic", topic,
		"--num-records", strconv.Itoa(n), "--group", "perf-group")
	if got := consumerPerfMessages(t, res.Stdout); got != n {
		t.Errorf("consumer perf consumed %d, want %d:\n%s", got, n, res.Stdout)
	}
}

func waitGroupEmpty(t *testing.T, adm *kadm.Client, group string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		dg, err := adm.DescribeGroups(context.Background(), group)
		if err == nil && dg[group].State == "Empty" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s not empty: %+v %v", group, dg, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// TestGroupsInternalTopicsReadByKafkaFormatters reads __consumer_offsets
// and __transaction_state of verbatim serve with Kafka's own formatters
// (the classes kafka-console-consumer uses to dump a Kafka cluster's
// internal topics): the records are in Kafka's schemas.
func TestGroupsInternalTopicsReadByKafkaFormatters(t *testing.T) {
	bin := BuildVerbatim(t)
	v := StartVerbatim(t, bin, VerbatimOptions{})
	cl := verbatimClient(t, v.Addr)
	adm := kadm.NewClient(cl)
	createTopicOn(t, adm, "fmt", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "fmt", Partition: 0, At: 42, LeaderEpoch: 0, Metadata: "from-verbatim"})
	if resp, err := adm.CommitOffsets(ctx, "fmt-group", offs); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	produceTxn := verbatimClient(t, v.Addr, kgo.TransactionalID("fmt-txn"), kgo.DefaultProduceTopic("fmt"))
	if err := produceTxn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := produceTxn.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := produceTxn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	// Read only the partition that holds the key, in assign mode: the
	// console consumer's own group writes GroupMetadata records (which the
	// offsets formatter prints as nothing) to __consumer_offsets, and with
	// every partition assigned it may read one of those first.
	dump := func(topic, key, formatter string, n int) string {
		res := JavaTool(t, "kafka-console-consumer", "--bootstrap-server", v.Addr, "--topic", topic,
			"--partition", strconv.Itoa(javaKeyPartition(key, partitionCount(t, adm, topic))),
			"--offset", "earliest", "--max-messages", strconv.Itoa(n), "--timeout-ms", "30000",
			"--formatter", formatter)
		return res.Stdout
	}
	out := dump("__consumer_offsets", "fmt-group", "org.apache.kafka.tools.consumer.OffsetsMessageFormatter", 1)
	for _, want := range []string{`"group":"fmt-group"`, `"topic":"fmt"`, `"offset":42`, `"metadata":"from-verbatim"`} {
		if !strings.Contains(out, want) {
			t.Errorf("OffsetsMessageFormatter output lacks %s:\n%s", want, out)
		}
	}
	// Init (Empty), add partition (Ongoing), PrepareCommit, CompleteCommit.
	out = dump("__transaction_state", "fmt-txn", "org.apache.kafka.tools.consumer.TransactionLogMessageFormatter", 4)
	for _, want := range []string{`"transactionalId":"fmt-txn"`, `"transactionStatus":"Ongoing"`, `"transactionStatus":"PrepareCommit"`, `"transactionStatus":"CompleteCommit"`, `"topic":"fmt"`} {
		if !strings.Contains(out, want) {
			t.Errorf("TransactionLogMessageFormatter output lacks %s:\n%s", want, out)
		}
	}
}

func partitionCount(t *testing.T, adm *kadm.Client, topic string) int {
	t.Helper()
	td, err := adm.ListTopicsWithInternal(context.Background(), topic)
	if err != nil || td[topic].Err != nil || len(td[topic].Partitions) == 0 {
		t.Fatalf("metadata of %s: %v %+v", topic, err, td[topic])
	}
	return len(td[topic].Partitions)
}

// javaKeyPartition is Kafka's coordinator partitioning: Utils.abs of Java's
// String.hashCode (over UTF-16 code units), modulo the partition count.
func javaKeyPartition(key string, n int) int {
	var h int32
	for _, u := range utf16.Encode([]rune(key)) {
		h = 31*h + int32(u)
	}
	if h == math.MinInt32 {
		return 0
	}
	if h < 0 {
		h = -h
	}
	return int(h) % n
}
