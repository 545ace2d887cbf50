package interop

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// TestKafkaJavaTools runs the Java tools later issues lean on (configs, the
// perf tools, the verifiable clients) against a real Kafka 4.4 node with the
// option names 4.4 expects, and checks what each reports.
func TestKafkaJavaTools(t *testing.T) {
	k := StartKafka(t, KafkaOptions{})
	b := k.Bootstrap()

	JavaTool(t, "kafka-topics", "--bootstrap-server", b, "--create", "--topic", "perf",
		"--partitions", "1", "--replication-factor", "1")
	JavaTool(t, "kafka-configs", "--bootstrap-server", b, "--entity-type", "topics", "--entity-name", "perf",
		"--alter", "--add-config", "retention.ms=86400000")
	res := JavaTool(t, "kafka-configs", "--bootstrap-server", b, "--entity-type", "topics", "--entity-name", "perf", "--describe")
	if !strings.Contains(res.Stdout, "retention.ms=86400000") {
		t.Errorf("kafka-configs --describe lacks the altered config:\n%s", res.Stdout)
	}

	const perfN = 2000
	res = JavaTool(t, "kafka-producer-perf-test", "--bootstrap-server", b, "--topic", "perf",
		"--num-records", strconv.Itoa(perfN), "--record-size", "100", "--throughput", "-1",
		"--command-property", "acks=all")
	lines := res.Lines()
	if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], strconv.Itoa(perfN)+" records sent") {
		t.Errorf("producer perf summary missing:\n%s", res.Stdout)
	}
	res = JavaTool(t, "kafka-consumer-perf-test", "--bootstrap-server", b, "--topic", "perf",
		"--num-records", strconv.Itoa(perfN))
	if got := consumerPerfMessages(t, res.Stdout); got != perfN {
		t.Errorf("consumer perf consumed %d messages, want %d:\n%s", got, perfN, res.Stdout)
	}

	const verifN = 20
	res = JavaTool(t, "kafka-verifiable-producer", "--bootstrap-server", b, "--topic", "verif",
		"--max-messages", strconv.Itoa(verifN))
	acked := map[int64]bool{}
	var summary struct{ Sent, Acked int }
	for _, ev := range jsonEvents(t, res.Stdout) {
		switch ev["name"] {
		case "producer_send_success":
			acked[int64(ev["offset"].(float64))] = true
		case "tool_data":
			summary.Sent, summary.Acked = int(ev["sent"].(float64)), int(ev["acked"].(float64))
		}
	}
	if len(acked) != verifN || summary.Sent != verifN || summary.Acked != verifN {
		t.Errorf("verifiable producer: %d distinct offsets acked, summary %+v; want %d", len(acked), summary, verifN)
	}
	for o := int64(0); o < verifN; o++ {
		if !acked[o] {
			t.Errorf("verifiable producer: offset %d never acknowledged", o)
		}
	}

	res = JavaTool(t, "kafka-verifiable-consumer", "--bootstrap-server", b, "--topic", "verif",
		"--group-id", "interop-verifiable", "--max-messages", strconv.Itoa(verifN))
	consumed, committed := 0, int64(-1)
	for _, ev := range jsonEvents(t, res.Stdout) {
		switch ev["name"] {
		case "records_consumed":
			consumed += int(ev["count"].(float64))
		case "offsets_committed":
			if ev["success"] == true {
				for _, o := range ev["offsets"].([]any) {
					committed = int64(o.(map[string]any)["offset"].(float64))
				}
			}
		}
	}
	if consumed != verifN || committed != verifN {
		t.Errorf("verifiable consumer: consumed %d, committed offset %d; want %d and %d\n%s", consumed, committed, verifN, verifN, res.Stdout)
	}
}

// jsonEvents decodes the one-JSON-object-per-line output of the verifiable
// clients, ignoring other lines.
func jsonEvents(t *testing.T, out string) []map[string]any {
	t.Helper()
	var evs []map[string]any
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("bad JSON event %q: %v", l, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// consumerPerfMessages reads data.consumed.in.nMsg from ConsumerPerformance's
// CSV output (-1 when absent).
func consumerPerfMessages(t *testing.T, out string) int {
	t.Helper()
	var header []string
	for _, l := range strings.Split(out, "\n") {
		cols := strings.Split(l, ", ")
		if header == nil {
			if len(cols) > 1 && cols[0] == "start.time" {
				header = cols
			}
			continue
		}
		for i, h := range header {
			if h == "data.consumed.in.nMsg" && i < len(cols) {
				n, err := strconv.Atoi(strings.TrimSpace(cols[i]))
				if err != nil {
					t.Fatalf("consumer perf: bad message count %q", cols[i])
				}
				return n
			}
		}
	}
	return -1
}
