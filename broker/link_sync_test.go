package broker

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// SetLinkTopicConfigs changes only its link's pull-mode topics, keeps
// their mirror.* configs as they are, and validates like AlterConfigs.
func TestSetLinkTopicConfigs(t *testing.T) {
	s := startBroker(t, t.TempDir(), nil).srv
	if _, err := s.CreatePullTopic("l1", "p", 1, [16]byte{1}, map[string]string{"retention.ms": "1000"}, "src"); err != nil {
		t.Fatal(err)
	}
	cfg, err := s.topicConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.cluster.createTopic("plain", 1, cfg, false); err != nil {
		t.Fatal(err)
	}
	info, _ := s.LinkTopic("p")
	next := map[string]string{}
	for k, v := range info.Configs {
		next[k] = v
	}
	next["retention.ms"] = "2000"
	if err := s.SetLinkTopicConfigs("other", "p", next); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("another link: %v", err)
	}
	if err := s.SetLinkTopicConfigs("l1", "plain", map[string]string{"retention.ms": "2000"}); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("an ordinary topic: %v", err)
	}
	bad := map[string]string{}
	for k, v := range next {
		bad[k] = v
	}
	bad["segment.bytes"] = "10"
	if err := s.SetLinkTopicConfigs("l1", "p", bad); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("an invalid value: %v", err)
	}
	delete(bad, "segment.bytes")
	delete(bad, "mirror.link")
	if err := s.SetLinkTopicConfigs("l1", "p", bad); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("mirror.link removed: %v", err)
	}
	if err := s.SetLinkTopicConfigs("l1", "p", next); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.LinkTopic("p"); got.Configs["retention.ms"] != "2000" || got.Configs["mirror.mode"] != "pull" || got.Configs["mirror.link"] != "l1" {
		t.Fatalf("configs after the sync: %v", got.Configs)
	}
}
