package verify

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
)

// TestVerifyReportsTopicIDs: after `mirror push --create-topics` the ids
// are reported equal; a destination topic created by hand as a mirror
// (fresh id) holding the same data is reported "different" and is still
// exact; the JSON keeps the documented partition fields and adds topics.
func TestVerifyReportsTopicIDs(t *testing.T) {
	src := testkit.StartSource(t, kfake.SeedTopics(1, "a", "b", "c"))
	sa := src.ListenAddrs()[0]
	dst := startDest(t)
	produce(t, testkit.Client(t, sa, kgo.DefaultProduceTopic("a")), &kgo.Record{Value: []byte("x")}, &kgo.Record{Value: []byte("y")})
	produce(t, testkit.Client(t, sa, kgo.DefaultProduceTopic("b")), &kgo.Record{Value: []byte("z")})
	push(t, sa, dst, "a")
	// b is created by hand with mirror.mode=push: a fresh id.
	req := createTopicReq("b")
	c := kmsg.NewCreateTopicsRequestTopicConfig()
	c.Name, c.Value = "mirror.mode", kmsg.StringPtr("push")
	req.Topics[0].Configs = append(req.Topics[0].Configs, c)
	if resp, err := req.RequestWith(testkit.Ctx(t), testkit.Client(t, dst)); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("creating b: %v %+v", err, resp)
	}
	push(t, sa, dst, "b")

	rep := run(t, sa, dst, "a", "b")
	if !rep.Exact || len(rep.Topics) != 2 {
		t.Fatalf("report %+v", rep)
	}
	a, b := rep.Topics[0], rep.Topics[1]
	if a.Topic != "a" || a.TopicIDs != TopicIDsEqual || a.SourceTopicID != a.DestTopicID || a.SourceTopicID == "" {
		t.Fatalf("topic a: %+v", a)
	}
	if b.Topic != "b" || b.TopicIDs != TopicIDsDifferent || b.SourceTopicID == b.DestTopicID || b.DestTopicID == "" {
		t.Fatalf("topic b: %+v", b)
	}
	var text strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "topic a: topic ids equal ("+a.SourceTopicID+")") || !strings.Contains(text.String(), "topic b: topic ids differ (source "+b.SourceTopicID+", destination "+b.DestTopicID) {
		t.Fatalf("text:\n%s", text.String())
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var generic struct {
		Exact      *bool                        `json:"exact"`
		Partitions []map[string]json.RawMessage `json:"partitions"`
		Topics     []map[string]string          `json:"topics"`
	}
	if err := json.Unmarshal(js.Bytes(), &generic); err != nil || generic.Exact == nil || !*generic.Exact || len(generic.Partitions) != 2 || len(generic.Topics) != 2 {
		t.Fatalf("json: %v %s", err, js.String())
	}
	for _, k := range []string{"topic", "partition", "batches", "bytes", "status", "first_mismatch"} {
		if _, ok := generic.Partitions[1][k]; !ok {
			t.Fatalf("json partition lacks %q: %s", k, js.String())
		}
	}
	if generic.Topics[0]["topic_ids"] != "equal" || generic.Topics[1]["topic_ids"] != "different" || generic.Topics[0]["source_topic_id"] != client.FormatTopicID(srcID(t, sa, "a")) || generic.Topics[1]["dest_topic_id"] != b.DestTopicID {
		t.Fatalf("json topics: %s", js.String())
	}

	// A topic the destination lacks: ids "missing", and not exact.
	produce(t, testkit.Client(t, sa, kgo.DefaultProduceTopic("c")), &kgo.Record{Value: []byte("c")})
	rep = run(t, sa, dst, "c")
	if rep.Exact || len(rep.Topics) != 1 || rep.Topics[0].TopicIDs != TopicIDsMissing || rep.Topics[0].DestTopicID != "" {
		t.Fatalf("missing topic: exact %v %+v", rep.Exact, rep.Topics)
	}
}

func srcID(t *testing.T, addr, topic string) [16]byte {
	t.Helper()
	cl, err := client.NewCluster(addr, client.Options{ClientID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	md, err := cl.Metadata(testkit.Ctx(t), []string{topic})
	if err != nil || md[topic] == nil || md[topic].Err != nil {
		t.Fatalf("metadata %s: %v", topic, err)
	}
	return md[topic].ID
}
