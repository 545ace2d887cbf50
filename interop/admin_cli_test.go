package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/verbatim-kafka/verbatim/internal/testkit"
)

// TestAdminCLIAgainstKafka: the admin CLI's `topic describe` and `group
// describe` give the same --json answers on Verbatim and on Apache Kafka
// 4.4 for the same state (a topic created by `topic create` with a config,
// records in one partition, a standalone group's committed offset and a
// live consumer group's member, assignment and offset, each with its lag)
// and of `group reset-offsets --execute` (refused for the live group),
// topic ids aside; `topic create` of an existing topic is refused by
// both with the same error name.
func TestAdminCLIAgainstKafka(t *testing.T) {
	bin := BuildVerbatim(t)
	k := StartKafka(t, KafkaOptions{})
	v := StartVerbatim(t, bin, VerbatimOptions{})
	cli := func(addr string, args ...string) *Result {
		t.Helper()
		res, _ := RunTool(t, Cmd{Timeout: time.Minute}, append([]string{bin}, append(args, "--bootstrap-server", addr)...)...)
		return res
	}
	answers := map[string][]map[string]any{} // by command: Kafka, then Verbatim
	for _, addr := range []string{k.Addrs()[0], v.Addr} {
		if res := cli(addr, "topic", "create", "t", "--partitions", "2", "--config", "retention.ms=3600000"); res.ExitCode != 0 {
			t.Fatalf("topic create on %s:\n%s", addr, res.describe())
		}
		if res := cli(addr, "topic", "create", "t", "--partitions", "2"); res.ExitCode != 1 || !strings.Contains(res.Stderr, "TOPIC_ALREADY_EXISTS (error code 36)") {
			t.Fatalf("second topic create on %s:\n%s", addr, res.describe())
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.MaxVersions(kversion.V3_9_0())) // OffsetCommit by topic name, not id (v10)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		for i := range 5 {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				t.Fatalf("produce to %s: %v", addr, err)
			}
		}
		err = testkit.CommitStandalone(ctx, cl, "g1", "t", 1, 2)
		cancel()
		cl.Close()
		if err != nil {
			t.Fatalf("OffsetCommit on %s: %v", addr, err)
		}
		joinLive(t, addr)
		for _, what := range []string{"topic describe t", "group describe g1", "group describe live"} {
			res := cli(addr, append(strings.Fields(what), "--json")...)
			var m map[string]any
			if res.ExitCode != 0 || json.Unmarshal([]byte(res.Stdout), &m) != nil {
				t.Fatalf("%s on %s:\n%s", what, addr, res.describe())
			}
			normalize(m)
			answers[what] = append(answers[what], m)
		}
		if res := cli(addr, "group", "reset-offsets", "live", "--all-topics", "--to-earliest", "--execute"); res.ExitCode != 1 || !strings.Contains(res.Stderr, "inactive, but its state is Stable") {
			t.Fatalf("reset-offsets of a live group on %s:\n%s", addr, res.describe())
		}
		reset := "group reset-offsets g1 --topic t --to-offset 3 --execute"
		res := cli(addr, append(strings.Fields(reset), "--json")...)
		var m map[string]any
		if res.ExitCode != 0 || json.Unmarshal([]byte(res.Stdout), &m) != nil {
			t.Fatalf("%s on %s:\n%s", reset, addr, res.describe())
		}
		answers[reset] = append(answers[reset], m)
	}
	for what, a := range answers {
		if !reflect.DeepEqual(a[0], a[1]) {
			ka, _ := json.Marshal(a[0])
			va, _ := json.Marshal(a[1])
			t.Errorf("%s differs:\nKafka:    %s\nVerbatim: %s", what, ka, va)
		}
	}
}

// joinLive joins a consumer to group "live" on topic t (classic protocol)
// and commits offset 4 of partition 1 as its member; the member stays
// until the test ends.
func joinLive(t *testing.T, addr string) {
	t.Helper()
	assigned := make(chan struct{}, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("live"), kgo.ConsumeTopics("t"), kgo.DisableAutoCommit(),
		kgo.MaxVersions(kversion.V3_9_0()), kgo.ClientID("admin-cli-test"),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			select {
			case assigned <- struct{}{}:
			default:
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	t.Cleanup(func() { cancel(); <-polled; cl.Close() })
	select {
	case <-assigned:
	case <-time.After(30 * time.Second):
		t.Fatalf("group live on %s: no assignment", addr)
	}
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	defer ccancel()
	var cerr error
	cl.CommitOffsetsSync(cctx, map[string]map[int32]kgo.EpochOffset{"t": {1: {Epoch: -1, Offset: 4}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, _ *kmsg.OffsetCommitResponse, err error) { cerr = err })
	if cerr != nil {
		t.Fatalf("commit as a member of live on %s: %v", addr, cerr)
	}
}

// normalize drops what is each cluster's own from a --json answer: the
// topic id, and member ids (generated by the coordinator) in members and
// offsets.
func normalize(m map[string]any) {
	delete(m, "id")
	for _, key := range []string{"members", "offsets"} {
		list, _ := m[key].([]any)
		for _, e := range list {
			if em, ok := e.(map[string]any); ok && em["member_id"] != "" {
				em["member_id"] = "MEMBER"
			}
		}
	}
}
