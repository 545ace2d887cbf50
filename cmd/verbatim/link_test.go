package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/admin"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// memLinks is an in-memory LinkService: links by name, the mirror
// partitions it reports, and the requests it was given.
type memLinks struct {
	mu       sync.Mutex
	links    map[string]wireext.LinkConfig
	statuses []wireext.MirrorPartitionStatus
	asked    []string
}

func (m *memLinks) note(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.asked = append(m.asked, fmt.Sprintf(format, args...))
}

func (m *memLinks) CreateLink(_ context.Context, _ string, c wireext.LinkConfig, validate bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.links[c.Name]; ok {
		return fmt.Errorf("%w: link %s exists", kerr.InvalidRequest, c.Name)
	}
	if !validate {
		m.links[c.Name] = c
	}
	return nil
}

func (m *memLinks) DeleteLink(_ context.Context, _ string, name string, force bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.links[name]; !ok {
		return fmt.Errorf("%w: no link %s", kerr.InvalidRequest, name)
	}
	delete(m.links, name)
	return nil
}

func (m *memLinks) DescribeLinks(_ context.Context, names []string) ([]wireext.LinkDescription, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(names) == 0 {
		for n := range m.links {
			names = append(names, n)
		}
		sort.Strings(names)
	}
	var out []wireext.LinkDescription
	for _, n := range names {
		c, ok := m.links[n]
		if !ok {
			out = append(out, wireext.LinkDescription{ErrorCode: kerr.InvalidRequest.Code, ErrorMessage: "no link " + n, Config: wireext.LinkConfig{Name: n}})
			continue
		}
		out = append(out, wireext.LinkDescription{Config: c, State: "ACTIVE", LinkID: [16]byte{0xab},
			Topics: []wireext.LinkTopic{{Topic: "orders.a", State: wireext.StateMirroring}, {Topic: "orders.b", State: wireext.StateSkipped, Reason: "an ordinary topic exists"}}})
	}
	return out, nil
}

func results(topics []string, fail string) []wireext.MirrorTopicResult {
	out := make([]wireext.MirrorTopicResult, len(topics))
	for i, t := range topics {
		out[i].Topic = t
		if t == fail {
			out[i].ErrorCode, out[i].ErrorMessage = kerr.PolicyViolation.Code, "refused by policy"
		}
	}
	return out
}

func (m *memLinks) StartMirrorTopics(_ context.Context, _ string, r wireext.StartMirrorTopicsRequest) ([]wireext.MirrorTopicResult, error) {
	m.note("start %s %v truncate=%v keep=%s", r.Link, r.Topics, r.TruncateToCommon, r.KeepTopic)
	return results(r.Topics, "bad"), nil
}

func (m *memLinks) PauseMirrorTopics(_ context.Context, _ string, r wireext.PauseMirrorTopicsRequest) ([]wireext.MirrorTopicResult, error) {
	m.note("pause=%v %s %v", r.Pause, r.Link, r.Topics)
	return results(r.Topics, "bad"), nil
}

func (m *memLinks) DescribeMirrors(_ context.Context, r wireext.DescribeMirrorsRequest) ([]wireext.MirrorPartitionStatus, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []wireext.MirrorPartitionStatus
	for _, s := range m.statuses {
		if r.Link == "" || s.Link == r.Link {
			out = append(out, s)
		}
	}
	return out, nil
}

func (m *memLinks) TruncateMirrorTopics(_ context.Context, _ string, r wireext.TruncateMirrorTopicsRequest) ([]wireext.MirrorTopicResult, error) {
	m.note("truncate %v keep=%s", r.Topics, r.KeepTopic)
	res := results(r.Topics, "")
	for i := range res {
		res[i].Partitions = []wireext.TruncatedPartition{{Partition: 0, TruncatedTo: 40, RemovedBatches: 2, RemovedBytes: 512, KeptIn: res[i].Topic + ".truncated"}}
	}
	return res, nil
}

func (m *memLinks) took() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.asked
	m.asked = nil
	return a
}

// TestLinkCommands drives the link and mirror-link commands against an
// in-process broker with an in-memory link service: exit 0 for what it
// did, 1 with Kafka's error name for its refusals, 2 for usage and for a
// broker without cluster links; `mirror status --json` has the documented
// shape.
func TestLinkCommands(t *testing.T) {
	d := testkit.StartDest(t, t.TempDir())
	dest := "--dest=" + d.Addr
	wantExit(t, 2, "does not serve cluster links", "link", "list", dest)
	wantExit(t, 2, "--dest HOST:PORT is required", "link", "list")

	links := &memLinks{links: map[string]wireext.LinkConfig{}, statuses: []wireext.MirrorPartitionStatus{
		{Topic: "orders.a", Partition: 0, Link: "east", State: wireext.StateMirroring, SourceHighWatermark: 100, LogEndOffset: 90, Lag: 10, LagMs: 1500,
			LastMirroredOffset: 89, LastMirroredEpoch: 3, BytesPerSec: 4096, DivergenceOffset: -1},
		{Topic: "orders.a", Partition: 1, Link: "east", State: wireext.StateFailed, Reason: "divergence at offset 7", SourceHighWatermark: -1,
			LogEndOffset: 9, Lag: -1, LagMs: -1, LastMirroredOffset: 8, LastMirroredEpoch: 2, DivergenceOffset: 7},
	}}
	d.Srv.SetLinkService(links)

	srcCfg := filepath.Join(t.TempDir(), "source.properties")
	if err := os.WriteFile(srcCfg, []byte("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"u\" password=\"hunter2\";\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantExit(t, 2, "--source HOST:PORT is required", "link", "create", "east", dest)
	wantExit(t, 0, "is valid", "link", "create", "east", dest, "--source", "src:9092", "--validate-only")
	wantExit(t, 0, "created link east", "link", "create", "east", dest, "--source", "src:9092", "--source-config", srcCfg,
		"--topics", `orders\..*`, "--exclude", "orders.tmp", "--groups", "billing", "--sync-configs", "--sync-interval", "30s", "--throttle", "1000000")
	want := wireext.LinkConfig{Name: "east", SourceBootstrap: "src:9092", Topics: `orders\..*`, Exclude: "orders.tmp", Groups: "billing",
		SyncConfigs: true, SyncIntervalMs: 30000, ThrottleBytesPerSec: 1000000, SourceConfig: map[string]string{"security.protocol": "SASL_SSL",
			"sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="hunter2";`}}
	if got := links.links["east"]; !reflect.DeepEqual(got, want) {
		t.Fatalf("link stored as %+v", got)
	}
	wantExit(t, 1, "INVALID_REQUEST", "link", "create", "east", dest, "--source", "src:9092")

	var list []map[string]any
	out := wantExit(t, 0, "", "link", "list", dest, "--json")
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 || list[0]["name"] != "east" {
		t.Fatalf("link list: %v\n%s", err, out)
	}
	if strings.Contains(out, "hunter2") || !strings.Contains(out, `"sasl.jaas.config": "[hidden]"`) {
		t.Fatalf("secret shown:\n%s", out)
	}
	if out := wantExit(t, 0, "orders.b", "link", "describe", "east", dest); !strings.Contains(out, "an ordinary topic exists") || !strings.Contains(out, "30s") {
		t.Fatalf("link describe:\n%s", out)
	}
	wantExit(t, 1, "no link west", "link", "describe", "west", dest)

	// mirror status: the JSON shape, the table.
	out = wantExit(t, 0, "", "mirror", "status", dest, "--link", "east", "--json")
	var st map[string][]map[string]any
	if err := json.Unmarshal([]byte(out), &st); err != nil || len(st["partitions"]) != 2 {
		t.Fatalf("status: %v\n%s", err, out)
	}
	for _, k := range []string{"topic", "partition", "link", "state", "reason", "source_high_watermark", "log_end_offset", "lag", "lag_ms", "last_mirrored_offset", "last_mirrored_epoch"} {
		if _, ok := st["partitions"][1][k]; !ok {
			t.Fatalf("status lacks %q:\n%s", k, out)
		}
	}
	if p := st["partitions"][0]; p["lag"] != 10.0 || p["state"] != "MIRRORING" || p["last_mirrored_epoch"] != 3.0 {
		t.Fatalf("status row %v", p)
	}
	if out := wantExit(t, 0, "FAILED (divergence at offset 7)", "mirror", "status", dest, "--once"); !strings.HasPrefix(out, "TOPIC") {
		t.Fatalf("status table:\n%s", out)
	}

	// pause, resume, create, truncate.
	wantExit(t, 2, "give --topics a,b or --link NAME", "mirror", "pause", dest)
	wantExit(t, 0, "OK", "mirror", "pause", dest, "--topics", "orders.a")
	wantExit(t, 1, "POLICY_VIOLATION", "mirror", "resume", dest, "--link", "east", "--topics", "orders.a,bad")
	wantExit(t, 0, "orders.c", "mirror", "create", dest, "--link", "east", "--topics", "orders.c", "--truncate-to-common", "--keep-topic", "kept")
	wantExit(t, 2, "--to-divergence are required", "mirror", "truncate", dest, "--topics", "orders.a")
	wantExit(t, 0, "kept in orders.a.truncated", "mirror", "truncate", dest, "--topics", "orders.a", "--to-divergence")
	if got := links.took(); !reflect.DeepEqual(got, []string{"pause=true  [orders.a]", "pause=false east [orders.a bad]",
		"start east [orders.c] truncate=true keep=kept", "truncate [orders.a] keep="}) {
		t.Fatalf("service asked %q", got)
	}

	// mirror stop --link: the link's topics are stopped (orders.a does
	// not exist on this broker, which the existing stop reports).
	wantExit(t, 2, "not both", "mirror", "stop", dest, "--link", "east", "--topics", "x")
	wantExit(t, 2, "link west has no mirror topics", "mirror", "stop", dest, "--link", "west")
	wantExit(t, 2, "orders.a", "mirror", "stop", dest, "--link", "east")

	wantExit(t, 0, "deleted link east", "link", "delete", "east", dest, "--force")
	wantExit(t, 1, "INVALID_REQUEST", "link", "delete", "east", dest)
	for _, args := range [][]string{{"link", "create", "-h"}, {"link", "help"}, {"mirror", "status", "--help"}, {"mirror", "truncate", "-h"}} {
		if c, out, errs := runAdmin(args...); c != 0 || !strings.Contains(out+errs, "dest") {
			t.Fatalf("%v: exit %d\n%s%s", args, c, out, errs)
		}
	}
}

// TestWatchStatus: the live table is redrawn (screen cleared, table
// written) on every fetch until the context ends, which is a clean end;
// a failed fetch ends it with the error.
func TestWatchStatus(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out strings.Builder
	fetches := 0
	fetch := func(context.Context) (*admin.MirrorStatus, error) {
		fetches++
		if fetches == 3 {
			cancel()
		}
		return &admin.MirrorStatus{Partitions: []admin.MirrorPartition{{Topic: "t", State: fmt.Sprint("S", fetches)}}}, nil
	}
	if err := watchStatus(ctx, &out, fetch, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), clearScreen); fetches != 3 || n != 2 || !strings.Contains(out.String(), "S2") {
		t.Fatalf("%d fetches, %d redraws:\n%q", fetches, n, out.String())
	}
	boom := fmt.Errorf("broker gone")
	err := watchStatus(context.Background(), &out, func(context.Context) (*admin.MirrorStatus, error) { return nil, boom }, time.Millisecond)
	if err != boom {
		t.Fatalf("got %v", err)
	}
}
