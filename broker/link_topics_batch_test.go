package broker

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/storage"
)

// CreatePullTopics creates a link's discovered topics with one topic
// metadata write, each checked as CreatePullTopic checks one (a name
// taken, an invalid name, two of the batch colliding, an id in use):
// the refused ones are answered their error, the others exist with their
// logs open and survive a restart.
func TestCreatePullTopicsOneWrite(t *testing.T) {
	fs := storage.NewMemFS()
	dir := t.TempDir()
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	withFS := func(c *Config) { c.FS = fs }
	b := startBroker(t, dir, withFS)
	s := b.srv
	if _, err := s.CreatePullTopic("l1", "taken", 1, [16]byte{1}, nil, "src"); err != nil {
		t.Fatal(err)
	}
	var writes atomic.Int32
	fs.SetFault(func(op storage.Op, name string) storage.Fault {
		if op == storage.OpRename && strings.HasSuffix(name, "topics.json.tmp") {
			writes.Add(1)
		}
		return storage.Fault{}
	})
	res := s.CreatePullTopics("l1", "src", []PullTopic{
		{Name: "a", Partitions: 3, ID: [16]byte{2}, SourceConfigs: map[string]string{"retention.ms": "-1", "x.unknown": "1"}},
		{Name: "taken", Partitions: 1, ID: [16]byte{3}},
		{Name: "bad/name", Partitions: 1},
		{Name: "b.c", Partitions: 2},
		{Name: "b_c", Partitions: 2},
		{Name: "d", Partitions: 1, ID: [16]byte{1}},
		{Name: "e", Partitions: 0},
		{Name: "f", Partitions: 250},
	})
	fs.SetFault(nil)
	wantErr := map[int]*kerr.Error{1: kerr.TopicAlreadyExists, 2: kerr.InvalidTopicException, 4: kerr.InvalidTopicException, 5: kerr.TopicAlreadyExists, 6: kerr.InvalidPartitions}
	for i, r := range res {
		if want := wantErr[i]; want != nil {
			if !errors.Is(r.Err, want) {
				t.Errorf("topic %d: %v, want %s", i, r.Err, want.Message)
			}
		} else if r.Err != nil {
			t.Errorf("topic %d: %v", i, r.Err)
		}
	}
	if len(res[0].Skipped) != 1 || res[0].Skipped[0] != "x.unknown" {
		t.Errorf("skipped configs %v", res[0].Skipped)
	}
	if n := writes.Load(); n != 1 {
		t.Fatalf("a batch of 8 topics wrote the topic metadata %d times, want 1", n)
	}
	check := func(s *Server) {
		t.Helper()
		for name, parts := range map[string]int32{"a": 3, "b.c": 2, "f": 250} {
			info, ok := s.LinkTopic(name)
			if !ok || info.MirrorMode != "pull" || info.MirrorLink != "l1" || info.Partitions != parts {
				t.Fatalf("topic %s: %+v %v", name, info, ok)
			}
			for _, p := range s.Topic(name).Partitions() {
				if _, err := partitionLog(p); err != nil {
					t.Fatalf("%s/%d has no log: %v", name, p.Index, err)
				}
			}
		}
		if info, _ := s.LinkTopic("a"); info.ID != ([16]byte{2}) || info.Configs["retention.ms"] != "-1" {
			t.Fatalf("topic a: %+v", info)
		}
		for _, name := range []string{"b_c", "d", "e"} {
			if _, ok := s.LinkTopic(name); ok {
				t.Fatalf("refused topic %s exists", name)
			}
		}
	}
	check(s)
	b.stop()
	b = startBroker(t, dir, withFS)
	check(b.srv)
}
