package mirror

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
)

// topicIDs reads the topic ids a cluster reports in Metadata.
func topicIDs(t *testing.T, addr string, topics ...string) map[string][16]byte {
	t.Helper()
	cl, err := client.NewCluster(addr, client.Options{ClientID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	md, err := cl.Metadata(testkit.Ctx(t), topics)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][16]byte{}
	for name, tm := range md {
		if tm.Err == nil {
			out[name] = tm.ID
		}
	}
	return out
}

// TestPushCreateTopicsKeepsSourceTopicID: topics created by the push
// (including one created while following) carry the source's topic ids;
// a later push into them is quiet and changes nothing.
func TestPushCreateTopicsKeepsSourceTopicID(t *testing.T) {
	src := testkit.StartSource(t, kfake.SeedTopics(2, "a", "b"))
	sa := src.ListenAddrs()[0]
	dst := testkit.StartDest(t, t.TempDir())
	rr := kgo.RecordPartitioner(kgo.RoundRobinPartitioner())
	produceN(t, testkit.Client(t, sa, rr), "a", 20, false)
	produceN(t, testkit.Client(t, sa, rr), "b", 20, false)
	want := topicIDs(t, sa, "a", "b")
	if len(want) != 2 || want["a"] == ([16]byte{}) || want["a"] == want["b"] {
		t.Fatalf("source ids %x", want)
	}
	if _, err := Push(testkit.Ctx(t), Options{Source: sa, Dest: dst.Addr, Topics: []string{"a", "b"}, CreateTopics: true}); err != nil {
		t.Fatalf("push: %v (exit %d)", err, ExitCode(err))
	}
	if got := topicIDs(t, dst.Addr, "a", "b"); got["a"] != want["a"] || got["b"] != want["b"] {
		t.Fatalf("destination ids %x, source %x", got, want)
	}
	sameLogs(t, sa, dst.Addr, "a", 2)

	// A topic that appears on the destination side only while following
	// is created with its id too.
	if _, err := kadmClient(t, sa).CreateTopic(testkit.Ctx(t), 1, 1, nil, "c"); err != nil {
		t.Fatal(err)
	}
	produceN(t, testkit.Client(t, sa), "c", 5, false)
	_, stop := followInBackground(t, Options{Source: sa, Dest: dst.Addr, Topics: []string{"a", "c"}, CreateTopics: true, Follow: true, MetadataEvery: 50 * time.Millisecond})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if got := topicIDs(t, dst.Addr, "c"); got["c"] != ([16]byte{}) {
			if src := topicIDs(t, sa, "c"); got["c"] != src["c"] {
				t.Fatalf("followed topic c: destination id %x, source %x", got["c"], src["c"])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("topic c was not created")
		}
	}
	stop()
}

// TestPushRefusesTopicIDInUse: when the destination already has the
// source's topic id under another name, --create-topics refuses (exit 1)
// and names the topic holding it.
func TestPushRefusesTopicIDInUse(t *testing.T) {
	src := testkit.StartSource(t, kfake.SeedTopics(1, "a"))
	sa := src.ListenAddrs()[0]
	dst := testkit.StartDest(t, t.TempDir())
	produceN(t, testkit.Client(t, sa), "a", 3, false)
	id := topicIDs(t, sa, "a")["a"]
	// Put the id on a destination topic named "other", as a pusher
	// would have if the source topic had been named so.
	dc, err := client.Dial(testkit.Ctx(t), dst.Addr, client.Options{ClientID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "other", 1, -1
	c := kmsg.NewCreateTopicsRequestTopicConfig()
	c.Name, c.Value = "mirror.mode", kmsg.StringPtr("push")
	rt.Configs = append(rt.Configs, c)
	rt.UnknownTags.Set(mirrorTag, topicIDTag(id))
	req.Topics = append(req.Topics, rt)
	resp, err := dc.Request(testkit.Ctx(t), req, 7)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(*kmsg.CreateTopicsResponse).Topics[0]; r.ErrorCode != 0 || r.TopicID != id {
		t.Fatalf("creating other: %v %x", kerr.ErrorForCode(r.ErrorCode), r.TopicID)
	}
	_, err = Push(testkit.Ctx(t), Options{Source: sa, Dest: dst.Addr, Topics: []string{"a"}, CreateTopics: true})
	if ExitCode(err) != ExitRefused || !strings.Contains(err.Error(), "already used by topic 'other'") {
		t.Fatalf("push: %v (exit %d)", err, ExitCode(err))
	}
}

// TestPushersStartedAtTheSameInstant: two pushers both register on every
// partition before either writes (the test holds them there). Each
// registration covers all partitions and is assigned one epoch; the
// earlier one is fenced, at once when the later was assigned before its
// own answer, else at its first claim or write. Exactly one copies, the
// later registrant, and the other stops with PRODUCER_FENCED, exit 1.
// The copy is exact.
func TestPushersStartedAtTheSameInstant(t *testing.T) {
	for round := 0; round < 3; round++ {
		src := testkit.StartSource(t, kfake.SeedTopics(2, "t"))
		sa := src.ListenAddrs()[0]
		dst := testkit.StartDest(t, t.TempDir())
		produceBatches(t, testkit.Client(t, sa, kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), "t", 60, 2)
		const pushers, parts = 2, 2
		var mu sync.Mutex
		registered := 0
		epochs := make([]int32, pushers)
		regErrs := make([]error, pushers)
		allRegistered := make(chan struct{})
		ps := make([]*Pusher, pushers)
		for i := range ps {
			p, err := NewPusher(Options{Source: sa, Dest: dst.Addr, Topics: []string{"t"}, CreateTopics: true, FetchBytes: 512})
			if err != nil {
				t.Fatal(err)
			}
			p.registered = func(got map[tp]int32, err error) {
				mu.Lock()
				if err == nil && (len(got) != parts || got[tp{"t", 0}] != got[tp{"t", 1}]) {
					t.Errorf("pusher %d registered %v: want one epoch for both partitions", i, got)
				}
				epochs[i], regErrs[i] = got[tp{"t", 0}], err
				registered++
				if registered == pushers {
					close(allRegistered)
				}
				mu.Unlock()
				select {
				case <-allRegistered:
				case <-time.After(30 * time.Second):
				}
			}
			t.Cleanup(p.src.Close)
			t.Cleanup(p.dst.Close)
			ps[i] = p
		}
		errs := make([]error, pushers)
		var wg sync.WaitGroup
		for i, p := range ps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = p.Run(testkit.Ctx(t))
			}()
		}
		wg.Wait()
		var winner int
		switch {
		case regErrs[0] != nil && regErrs[1] != nil:
			t.Fatalf("round %d: both registrations refused: %v; %v", round, regErrs[0], regErrs[1])
		case regErrs[0] != nil:
			winner = 1
		case regErrs[1] != nil:
			winner = 0
		case epochs[0] == epochs[1]:
			t.Fatalf("round %d: both pushers were assigned epoch %d", round, epochs[0])
		case epochs[1] > epochs[0]:
			winner = 1
		}
		for i, err := range errs {
			if i == winner {
				if err != nil {
					t.Fatalf("round %d: the later registrant: %v (exit %d)", round, err, ExitCode(err))
				}
				continue
			}
			if ExitCode(err) != ExitRefused || !errors.Is(err, kerr.ProducerFenced) || !strings.Contains(err.Error(), "took over this partition") {
				t.Fatalf("round %d: the earlier registrant: %v (exit %d), want PRODUCER_FENCED, exit 1", round, err, ExitCode(err))
			}
		}
		sameLogs(t, sa, dst.Addr, "t", parts)
	}
}

// TestPushRefusesDestinationWithoutAssignedEpochs: a destination whose
// verbatim.mirror.produce feature is below version 2 (it would take the
// pusher's clock as the writer epoch) is refused with exit 2 and a message
// saying what is missing, before anything is written.
func TestPushRefusesDestinationWithoutAssignedEpochs(t *testing.T) {
	src := testkit.StartSource(t, kfake.SeedTopics(1, "t"))
	sa := src.ListenAddrs()[0]
	old := startFeatureFake(t, 1)
	_, err := Push(testkit.Ctx(t), Options{Source: sa, Dest: old, Topics: []string{"t"}, CreateTopics: true})
	if ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), "offers verbatim.mirror.produce version 1, but this pusher needs version 2") {
		t.Fatalf("push to a version-1 destination: %v (exit %d)", err, ExitCode(err))
	}
}

// startFeatureFake starts a kfake cluster whose ApiVersions answer lists
// verbatim.mirror.produce up to version vers (a Verbatim from before
// broker-assigned writer epochs) and Produce v9+.
func startFeatureFake(t *testing.T, vers int16) string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	c.ControlKey(kmsg.ApiVersions.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
		resp.Version = req.GetVersion()
		for _, k := range []struct{ key, max int16 }{{0, 11}, {3, 12}, {18, 3}, {21, 2}} {
			ak := kmsg.NewApiVersionsResponseApiKey()
			ak.ApiKey, ak.MaxVersion = k.key, k.max
			resp.ApiKeys = append(resp.ApiKeys, ak)
		}
		f := kmsg.NewApiVersionsResponseSupportedFeature()
		f.Name, f.MaxVersion = mirrorFeature, vers
		resp.SupportedFeatures = append(resp.SupportedFeatures, f)
		return resp, nil, true
	})
	return c.ListenAddrs()[0]
}
