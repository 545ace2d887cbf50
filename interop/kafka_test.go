package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// wantRecord is one record as the round-trip test expects to read it back.
type wantRecord struct {
	offset     int
	key, value string
}

func roundTripRecords(n int) []wantRecord {
	var out []wantRecord
	for i := 0; i < n; i++ {
		out = append(out, wantRecord{i, fmt.Sprintf("kcat-%04d", i), fmt.Sprintf("value from kcat #%d", i)})
	}
	for i := 0; i < n; i++ {
		out = append(out, wantRecord{n + i, fmt.Sprintf("java-%04d", i), fmt.Sprintf("value from the console producer #%d", i)})
	}
	return out
}

func producerInput(recs []wantRecord) string {
	var b strings.Builder
	for _, r := range recs {
		b.WriteString(r.key)
		b.WriteByte('|')
		b.WriteString(r.value)
		b.WriteByte('\n')
	}
	return b.String()
}

// checkConsumed compares "offset<TAB>key<TAB>value" lines with want.
func checkConsumed(t *testing.T, who string, lines []string, want []wantRecord) {
	t.Helper()
	if len(lines) != len(want) {
		t.Fatalf("%s: read %d records, want %d; first lines: %q", who, len(lines), len(want), lines[:min(len(lines), 5)])
	}
	for i, l := range lines {
		w := want[i]
		exp := fmt.Sprintf("%d\t%s\t%s", w.offset, w.key, w.value)
		if l != exp {
			t.Fatalf("%s: record %d = %q, want %q", who, i, l, exp)
		}
	}
}

// consoleConsumeKeyed reads n records of partition 0 of topic from the
// start with the Java console consumer and returns its result and its lines
// as checkConsumed takes them ("offset<TAB>key<TAB>value").
func consoleConsumeKeyed(t *testing.T, bootstrap, topic string, n int) (*Result, []string) {
	t.Helper()
	res := JavaTool(t, "kafka-console-consumer", "--bootstrap-server", bootstrap,
		"--topic", topic, "--partition", "0", "--offset", "earliest",
		"--max-messages", strconv.Itoa(n), "--timeout-ms", "60000",
		"--formatter-property", "print.offset=true", "--formatter-property", "print.key=true")
	var lines []string
	for _, l := range res.Lines() {
		// Lines look like "Offset:17<TAB>key<TAB>value".
		rest, ok := strings.CutPrefix(l, "Offset:")
		if !ok {
			t.Fatalf("console consumer: unexpected line %q", l)
		}
		lines = append(lines, rest)
	}
	return res, lines
}

// TestKafkaSingleNodeRoundTrip starts a real Kafka 4.4 single node, writes
// 1,000 records with kcat and 1,000 with the Java console producer, and
// reads all 2,000 back with kcat and with the Java console consumer.
func TestKafkaSingleNodeRoundTrip(t *testing.T) {
	const n = 1000
	const topic = "roundtrip"
	k := StartKafka(t, KafkaOptions{})
	node := k.Nodes[0]
	t.Logf("Kafka node 1 up at %s (pid %d, cluster %s)", node.Addr, node.PID(), k.ClusterID)

	// The ApiVersions expectations used against Verbatim hold for Kafka.
	assertApiVersions(t, node.Addr)
	if res := assertKcatSawApiVersions(t, node.Addr); res.ExitCode != 0 {
		t.Fatalf("kcat -L against Kafka failed: %s", res.describe())
	}

	JavaTool(t, "kafka-topics", "--bootstrap-server", k.Bootstrap(), "--create",
		"--topic", topic, "--partitions", "1", "--replication-factor", "1")

	want := roundTripRecords(n)

	_, err := RunKcat(t, Cmd{Stdin: strings.NewReader(producerInput(want[:n]))},
		"-P", "-b", k.Bootstrap(), "-t", topic, "-p", "0", "-K", "|",
		"-X", "acks=all", "-X", "enable.idempotence=true")
	if err != nil {
		t.Fatalf("kcat produce: %v", err)
	}
	_, err = RunJavaTool(t, Cmd{Stdin: strings.NewReader(producerInput(want[n:]))}, "kafka-console-producer",
		"--bootstrap-server", k.Bootstrap(), "--topic", topic,
		"--reader-property", "parse.key=true", "--reader-property", "key.separator=|",
		"--producer-property", "acks=all")
	if err != nil {
		t.Fatalf("console producer: %v", err)
	}

	// kcat reads everything back with offsets.
	res := Kcat(t, "-C", "-b", k.Bootstrap(), "-t", topic, "-p", "0", "-o", "beginning",
		"-c", fmt.Sprint(2*n), "-e", "-f", "%o\t%k\t%s\n")
	checkConsumed(t, "kcat", res.Lines(), want)

	// The Java console consumer does the same.
	res, lines := consoleConsumeKeyed(t, k.Bootstrap(), topic, 2*n)
	checkConsumed(t, "console consumer", lines, want)
	if !strings.Contains(res.Stderr, fmt.Sprintf("Processed a total of %d messages", 2*n)) {
		t.Errorf("console consumer stderr lacks the processed count:\n%s", tail(res.Stderr, 10))
	}

	// The offset tool and the segment dumper agree on the log end.
	res = JavaTool(t, "kafka-get-offsets", "--bootstrap-server", k.Bootstrap(), "--topic", topic)
	if got, exp := strings.TrimSpace(res.Stdout), fmt.Sprintf("%s:0:%d", topic, 2*n); got != exp {
		t.Errorf("GetOffsetShell = %q, want %q", got, exp)
	}
	segs, _ := filepath.Glob(filepath.Join(node.DataDir, topic+"-0", "*.log"))
	if len(segs) != 1 {
		t.Fatalf("want one segment file in %s, found %v", node.DataDir, segs)
	}
	res = JavaTool(t, "kafka-dump-log", "--files", segs[0])
	if !strings.Contains(res.Stdout, "baseOffset: 0 ") || !strings.Contains(res.Stdout, fmt.Sprintf("lastOffset: %d ", 2*n-1)) {
		t.Errorf("DumpLogSegments output lacks baseOffset 0 / lastOffset %d:\n%s", 2*n-1, tail(res.Stdout, 10))
	}

	// confluent-kafka (bundled modern librdkafka) reads the first records too.
	res = Python(t, pyConsumeFirst, k.Bootstrap(), topic, "5")
	pyLines := res.Lines()
	if len(pyLines) != 6 || !strings.HasPrefix(pyLines[0], "librdkafka ") {
		t.Fatalf("python consumer output = %q", pyLines)
	}
	checkConsumed(t, "confluent-kafka", pyLines[1:], want[:5])

	// Restart on the same ports and data: the records survive and the
	// partition leader epoch goes up (the lever for epoch bumps on one node).
	epochBefore := leaderEpoch(t, k, topic)
	node.Restart(t)
	epochAfter := leaderEpoch(t, k, topic)
	if epochAfter <= epochBefore {
		t.Errorf("leader epoch %d after restart, want > %d", epochAfter, epochBefore)
	}
	t.Logf("leader epoch %d -> %d across a restart", epochBefore, epochAfter)
	res = JavaTool(t, "kafka-get-offsets", "--bootstrap-server", k.Bootstrap(), "--topic", topic)
	if got, exp := strings.TrimSpace(res.Stdout), fmt.Sprintf("%s:0:%d", topic, 2*n); got != exp {
		t.Errorf("after restart GetOffsetShell = %q, want %q", got, exp)
	}

	// Stop by PID: SIGTERM is enough for a clean shutdown.
	start := time.Now()
	if !node.Stop() {
		t.Errorf("Kafka node did not exit on SIGTERM within the grace period")
	}
	if node.Running() {
		t.Errorf("Kafka node still running after Stop")
	}
	t.Logf("Kafka stopped in %v", time.Since(start).Round(time.Millisecond))
	if _, err := os.Stat(node.LogPath); err != nil {
		t.Errorf("server log missing: %v", err)
	}
}

// leaderEpoch waits until partition 0 of topic has a leader and returns its
// leader epoch.
func leaderEpoch(t *testing.T, k *Kafka, topic string) int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := k.Admin(t)
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			if p, ok := md.Topics[topic].Partitions[0]; ok && p.Leader >= 0 && p.Err == nil {
				return p.LeaderEpoch
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("partition %s-0 has no leader: %v", topic, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// pyConsumeFirst prints the librdkafka version, then the first N records of
// partition 0 as "offset<TAB>key<TAB>value".
const pyConsumeFirst = `
import sys
from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING, libversion

bootstrap, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
print("librdkafka", libversion()[0])
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "interop-py",
              "enable.auto.commit": False, "enable.partition.eof": False})
c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
got = 0
while got < n:
    m = c.poll(30)
    if m is None:
        sys.exit("timed out waiting for records")
    if m.error():
        sys.exit("consume error: %s" % m.error())
    print("%d\t%s\t%s" % (m.offset(), m.key().decode(), m.value().decode()))
    got += 1
c.close()
`
