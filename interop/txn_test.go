package interop

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceNumbered writes values "0".."n-1" to topic (round robin over its
// partitions) and waits for the acknowledgements.
func produceNumbered(t *testing.T, addr, topic string, n int) {
	t.Helper()
	cl := verbatimClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Value: []byte(strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// readCommittedValues consumes topic with read_committed until it has seen
// want records and nothing more arrives for a while, and counts each value.
func readCommittedValues(t *testing.T, addr, topic string, want int) map[string]int {
	t.Helper()
	cl := verbatimClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	seen := map[string]int{}
	total := 0
	deadline := time.Now().Add(60 * time.Second)
	quietUntil := time.Time{}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		for _, r := range fs.Records() {
			seen[string(r.Value)]++
			total++
		}
		if total >= want && quietUntil.IsZero() {
			quietUntil = time.Now().Add(2 * time.Second)
		}
		if !quietUntil.IsZero() && time.Now().After(quietUntil) || time.Now().After(deadline) {
			return seen
		}
	}
}

func checkExactlyOnce(t *testing.T, seen map[string]int, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if c := seen[strconv.Itoa(i)]; c != 1 {
			t.Errorf("value %d seen %d times by read_committed, want exactly once", i, c)
		}
	}
	if len(seen) != n {
		t.Errorf("read_committed saw %d distinct values, want %d", len(seen), n)
	}
}

// lsoAtEnd reports whether every partition's last stable offset equals
// its log end.
func lsoAtEnd(t *testing.T, addr, topic string, parts int32) bool {
	t.Helper()
	cl := verbatimClient(t, addr)
	for p := int32(0); p < parts; p++ {
		var ends [2]int64
		for i, iso := range []int8{0, 1} {
			req := kmsg.NewPtrListOffsetsRequest()
			req.IsolationLevel = iso
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp = p, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			resp, err := req.RequestWith(ctx, cl)
			cancel()
			if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
				return false
			}
			ends[i] = resp.Topics[0].Partitions[0].Offset
		}
		if ends[0] != ends[1] {
			return false
		}
	}
	return true
}

const pyEOS = `
import sys
from confluent_kafka import Consumer, Producer, TopicPartition, KafkaException
bootstrap, src, dst, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-py-group", "enable.auto.commit": False,
              "auto.offset.reset": "earliest", "isolation.level": "read_committed", "group.protocol": "classic"})
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "eos-py", "transaction.timeout.ms": 30000})
p.init_transactions(30)
c.subscribe([src])
done, txn, aborts, idle = 0, 0, 0, 0
while done < n and idle < 60:
    msgs = c.consume(num_messages=25, timeout=1.0)
    msgs = [m for m in msgs if m.error() is None]
    if not msgs:
        idle += 1
        continue
    idle = 0
    txn += 1
    p.begin_transaction()
    for m in msgs:
        p.produce(dst, value=m.value(), key=m.key())
    p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
    if txn % 3 == 0:
        p.abort_transaction(30)
        aborts += 1
        # Rewind to the last committed offsets and process again.
        for tp in c.committed(c.assignment(), timeout=30):
            c.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))
    else:
        p.commit_transaction(30)
        done += len(msgs)
print("processed", done, "aborted", aborts, flush=True)
c.close()
sys.exit(0 if done == n else 1)
`

// startCopyLoop starts verbatim serve for a read-process-write loop: topic
// in with n numbered records over inParts partitions and an empty topic out
// of outParts; it returns the server and an admin client of it.
func startCopyLoop(t *testing.T, in string, inParts int32, out string, outParts int32, n int) (*Verbatim, *kadm.Client) {
	t.Helper()
	v := StartVerbatim(t, BuildVerbatim(t), VerbatimOptions{})
	adm := kadm.NewClient(verbatimClient(t, v.Addr))
	createTopicOn(t, adm, in, inParts, nil)
	createTopicOn(t, adm, out, outParts, nil)
	produceNumbered(t, v.Addr, in, n)
	return v, adm
}

// TestTxnConfluentKafkaEOS: a transactional read-process-write loop with
// confluent-kafka (librdkafka) against verbatim serve, aborting every third
// transaction and reprocessing it; a read_committed consumer sees every
// input record exactly once in the output and no aborted one.
func TestTxnConfluentKafkaEOS(t *testing.T) {
	const n = 300
	v, _ := startCopyLoop(t, "eos-in", 3, "eos-out", 3, n)
	res, err := RunPython(t, Cmd{Timeout: 4 * time.Minute}, pyEOS, v.Addr, "eos-in", "eos-out", strconv.Itoa(n))
	if err != nil {
		t.Fatalf("confluent-kafka EOS loop: %v\n%s", err, res.describe())
	}
	t.Log(res.Stdout)
	checkExactlyOnce(t, readCommittedValues(t, v.Addr, "eos-out", n), n)
	if !lsoAtEnd(t, v.Addr, "eos-out", 3) {
		t.Error("an output partition's LSO is below its log end after the loop")
	}
}

// TestTxnJavaEOS: Kafka's TransactionalMessageCopier (the Java producer and
// consumer of Kafka's own EOS system tests) copies a partition
// transactionally with random aborts; read_committed sees each record once.
func TestTxnJavaEOS(t *testing.T) {
	const n = 1000
	v, adm := startCopyLoop(t, "jeos-in", 1, "jeos-out", 2, n)
	res, err := RunJavaTool(t, Cmd{Timeout: 4 * time.Minute}, "TransactionalMessageCopier",
		"--broker-list", v.Addr, "--input-topic", "jeos-in", "--input-partition", "0", "--output-topic", "jeos-out",
		"--transactional-id", "jeos", "--consumer-group", "jeos-group", "--max-messages", strconv.Itoa(n),
		"--transaction-size", "50", "--enable-random-aborts", "--use-group-metadata")
	if err != nil {
		t.Fatalf("TransactionalMessageCopier: %v\n%s", err, res.describe())
	}
	checkExactlyOnce(t, readCommittedValues(t, v.Addr, "jeos-out", n), n)
	offs, err := adm.FetchOffsets(context.Background(), "jeos-group")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("jeos-in", 0); !ok || o.At != n {
		t.Errorf("copier's committed input offset %+v, want %d", o, n)
	}
	// Kafka's kafka-transactions tool reads the coordinator's state.
	res = JavaTool(t, "kafka-transactions", "--bootstrap-server", v.Addr, "list")
	if !strings.Contains(res.Stdout, "jeos") {
		t.Errorf("kafka-transactions list lacks jeos:\n%s", res.Stdout)
	}
	res = JavaTool(t, "kafka-transactions", "--bootstrap-server", v.Addr, "describe", "--transactional-id", "jeos")
	if !strings.Contains(res.Stdout, "CompleteCommit") && !strings.Contains(res.Stdout, "CompleteAbort") {
		t.Errorf("kafka-transactions describe:\n%s", res.Stdout)
	}
	res = JavaTool(t, "kafka-transactions", "--bootstrap-server", v.Addr, "describe-producers", "--topic", "jeos-out", "--partition", "0")
	if !strings.Contains(res.Stdout, "ProducerId") {
		t.Errorf("kafka-transactions describe-producers:\n%s", res.Stdout)
	}
}

const pyOpenTxn = `
import sys, time
from confluent_kafka import Producer
bootstrap, topic = sys.argv[1], sys.argv[2]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "mid-txn", "transaction.timeout.ms": 5000})
p.init_transactions(30)
p.begin_transaction()
for i in range(10):
    p.produce(topic, value=str(i).encode())
p.flush(30)
print("open", flush=True)
time.sleep(120)
`

// TestTxnRestartMidTransaction: a confluent-kafka producer leaves a
// transaction open; verbatim serve is killed (SIGKILL) and restarted on the
// same data dir. After recovery the transaction aborts at its timeout
// (Kafka's semantics for an Ongoing transaction), the LSO reaches the log
// end, and read_committed sees none of its records.
func TestTxnRestartMidTransaction(t *testing.T) {
	bin := BuildVerbatim(t)
	v := StartVerbatim(t, bin, VerbatimOptions{})
	adm := kadm.NewClient(verbatimClient(t, v.Addr))
	createTopicOn(t, adm, "mid", 1, nil)
	dir := t.TempDir()
	py := StartProc(t, "open-txn", filepath.Join(dir, "py.log"), dir, nil, PythonBinary(t), "-c", pyOpenTxn, v.Addr, "mid")
	t.Cleanup(func() { StopAll(5*time.Second, py) })
	if err := WaitForLog(py, "open", time.Minute); err != nil {
		t.Fatalf("producer did not open its transaction: %v\n%s", err, py.LogTail(20))
	}
	if lsoAtEnd(t, v.Addr, "mid", 1) {
		t.Fatal("LSO at the log end while a transaction is open")
	}
	v.Proc.Signal(syscall.SIGKILL)
	v.Proc.Wait(10 * time.Second)
	StopAll(5*time.Second, py)
	v2 := StartVerbatim(t, bin, VerbatimOptions{DataDir: v.DataDir})
	deadline := time.Now().Add(30 * time.Second)
	for !lsoAtEnd(t, v2.Addr, "mid", 1) {
		if time.Now().After(deadline) {
			t.Fatal("LSO still below the log end 30 s after the restart (transaction timeout 5 s)")
		}
		time.Sleep(250 * time.Millisecond)
	}
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{"mid-txn"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, verbatimClient(t, v2.Addr))
	if err != nil {
		t.Fatal(err)
	}
	if s := resp.TransactionStates[0]; s.State != "CompleteAbort" {
		t.Errorf("transaction after recovery: %+v", s)
	}
	if seen := readCommittedValues(t, v2.Addr, "mid", 0); len(seen) != 0 {
		t.Errorf("read_committed sees %d values of the aborted transaction", len(seen))
	}
}
