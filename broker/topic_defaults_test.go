package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func describeTopicConfig(t *testing.T, b *testBroker, topic, name string) kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, []string{name}
	req.Resources = append(req.Resources, r)
	req.IncludeSynonyms = true
	resp, err := req.RequestWith(ctxT(t), b.client())
	if err != nil || len(resp.Resources) != 1 || len(resp.Resources[0].Configs) != 1 {
		t.Fatalf("DescribeConfigs: %v %+v", err, resp)
	}
	return resp.Resources[0].Configs[0]
}

// TestTopicDefaults: the broker's log.retention.ms (Config.TopicDefaults)
// applies to topics without an override, is reported as a static broker
// config, survives a restart for topics created before it was set, and
// an override still wins.
func TestTopicDefaults(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir, nil)
	if _, err := b.admin().CreateTopic(ctxT(t), 1, 1, nil, "old"); err != nil {
		t.Fatal(err)
	}
	b.stop()
	defaults := map[string]string{"retention.ms": "3600000", "segment.bytes": "2097152"}
	b = startBroker(t, dir, func(c *Config) { c.TopicDefaults = defaults })
	over := "60000"
	if _, err := b.admin().CreateTopic(ctxT(t), 1, 1, map[string]*string{"retention.ms": &over}, "overridden"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.admin().CreateTopic(ctxT(t), 1, 1, nil, "new"); err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]string{"old": "3600000", "new": "3600000", "overridden": "60000"} {
		c := describeTopicConfig(t, b, topic, "retention.ms")
		if c.Value == nil || *c.Value != want {
			t.Fatalf("%s retention.ms = %v, want %s", topic, c.Value, want)
		}
		wantSource := kmsg.ConfigSourceStaticBrokerConfig
		if topic == "overridden" {
			wantSource = kmsg.ConfigSourceDynamicTopicConfig
		}
		if c.Source != wantSource {
			t.Fatalf("%s retention.ms source %v, want %v", topic, c.Source, wantSource)
		}
		if got := b.srv.cluster.topic(topic).Config().SegmentBytes; got != 2097152 {
			t.Fatalf("%s segment bytes %d, want the broker default", topic, got)
		}
	}
	if _, err := Open(Config{DataDir: t.TempDir(), TopicDefaults: map[string]string{"segment.bytes": "10"}}); err == nil {
		t.Fatal("Open accepted segment.bytes=10 as a default")
	}
}
