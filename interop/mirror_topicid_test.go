package interop

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/client"
)

// topicIDOf reads a topic's id (KIP-516) through kadm's Metadata.
func topicIDOf(t *testing.T, adm *kadm.Client, topic string) [16]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatalf("metadata %s: %v", topic, err)
	}
	d, ok := td[topic]
	if !ok || d.Err != nil {
		t.Fatalf("metadata %s: %+v", topic, d)
	}
	return d.ID
}

// TestMirrorTopicIDFromKafka: `mirror push --create-topics` from Apache
// Kafka 4.4 gives the Verbatim topic the id Kafka assigned (KIP-516), kept
// across a Verbatim restart, and `verify --json` reports the ids equal.
func TestMirrorTopicIDFromKafka(t *testing.T) {
	bin := BuildVerbatim(t)
	k := StartKafka(t, KafkaOptions{})
	v := StartVerbatim(t, bin, VerbatimOptions{})
	k.CreateTopic(t, "ids", 2, 1, nil)
	produceSync(t, k.Client(t, kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), keyed("ids", 20, "id")...)
	runPush(t, bin, k.Bootstrap(), v.Addr, 0, "--topics", "ids", "--create-topics")

	want := topicIDOf(t, k.Admin(t), "ids")
	if want == ([16]byte{}) {
		t.Fatal("Kafka reported no topic id")
	}
	vadm := func(addr string) *kadm.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return kadm.NewClient(cl)
	}
	if got := topicIDOf(t, vadm(v.Addr), "ids"); got != want {
		t.Fatalf("Verbatim topic id %s, Kafka's %s", client.FormatTopicID(got), client.FormatTopicID(want))
	}

	res, _ := RunTool(t, Cmd{Timeout: 2 * time.Minute}, bin, "verify", "--source", k.Bootstrap(), "--dest", v.Addr, "--topics", "ids", "--json")
	if res.ExitCode != 0 {
		t.Fatalf("verify: exit %d\n%s\n%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	var doc struct {
		Exact  bool `json:"exact"`
		Topics []struct {
			Topic         string `json:"topic"`
			SourceTopicID string `json:"source_topic_id"`
			DestTopicID   string `json:"dest_topic_id"`
			TopicIDs      string `json:"topic_ids"`
		} `json:"topics"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &doc); err != nil || !doc.Exact || len(doc.Topics) != 1 {
		t.Fatalf("verify --json: %v\n%s", err, res.Stdout)
	}
	if tr := doc.Topics[0]; tr.TopicIDs != "equal" || tr.SourceTopicID != client.FormatTopicID(want) || tr.DestTopicID != tr.SourceTopicID {
		t.Fatalf("verify topic ids: %+v", tr)
	}

	// The id is persisted: a restarted Verbatim still serves it.
	v.Proc.Stop(10 * time.Second)
	v2 := StartVerbatim(t, bin, VerbatimOptions{DataDir: v.DataDir})
	if got := topicIDOf(t, vadm(v2.Addr), "ids"); got != want {
		t.Fatalf("after a restart: Verbatim topic id %s, Kafka's %s", client.FormatTopicID(got), client.FormatTopicID(want))
	}
}
