package link

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/storage"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// fsCounts counts a MemFS's durable writes by the file they replace
// (atomic writes end in a rename) and its syncs of leader-epoch
// checkpoints.
type fsCounts struct {
	mu      sync.Mutex
	renames map[string]int // by target's last two path elements
	epochs  int            // syncs of a leader-epoch checkpoint
	syncs   int            // all file and directory syncs
}

func (c *fsCounts) hook(op storage.Op, name string) storage.Fault {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch op {
	case storage.OpRename: // named by the temporary file
		parts := strings.Split(strings.TrimSuffix(name, ".tmp"), "/")
		if len(parts) >= 2 {
			name = parts[len(parts)-2] + "/" + parts[len(parts)-1]
		}
		c.renames[name]++
	case storage.OpSync, storage.OpSyncDir:
		c.syncs++
		if strings.Contains(name, storage.LeaderEpochCheckpointFile) {
			c.epochs++
		}
	}
	return storage.Fault{}
}

// renamesUnder sums the renames whose target's directory is dir.
func (c *fsCounts) renamesUnder(dir string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, v := range c.renames {
		if strings.HasPrefix(k, dir+"/") {
			n += v
		}
	}
	return n
}

// TestLinkDiscoveryMetadataWrites: a link discovering 4 source topics of
// 25 partitions, a few records each, creates all their pull-mode topics
// with one topic metadata write and raises all their leader epochs for
// the source's with one more (not one per partition's first append),
// records them with one link meta write besides the link's creation, and
// its copies' first appends sync no leader-epoch checkpoint.
func TestLinkDiscoveryMetadataWrites(t *testing.T) {
	const topics, parts = 4, 25
	var names []string
	for i := 0; i < topics; i++ {
		names = append(names, fmt.Sprintf("d%d", i))
	}
	src := testkit.StartSource(t, kfake.SeedTopics(parts, names...))
	cl := testkit.Client(t, src.ListenAddrs()[0], kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, n := range names {
		for p := int32(0); p < parts; p++ {
			produce(t, cl, n, p, 2, "x")
		}
	}
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fs := storage.NewMemFS()
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d := testkit.StartDestConfig(t, broker.Config{DataDir: dir, FS: fs, NodeID: 1})
	m := openManager(t, d)
	counts := &fsCounts{renames: map[string]int{}}
	fs.SetFault(counts.hook)
	if err := m.CreateLink(context.Background(), "User:admin", wireext.LinkConfig{Name: "l1", SourceBootstrap: src.ListenAddrs()[0], Topics: "d.*"}, false); err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, n := range names {
		for p := 0; p < parts; p++ {
			all = append(all, fmt.Sprintf("%s/%d", n, p))
		}
	}
	waitState(t, m, "l1", wireext.StateMirroring, all...)
	fs.SetFault(nil)
	if n := counts.renames["verbatim-meta/topics.json"]; n != 2 {
		t.Errorf("discovering %d topics and mirroring their first batches wrote the topic metadata %d times, want 2 (their creation, their epochs)", topics, n)
	}
	for _, n := range names {
		for _, p := range d.Srv.Topic(n).Partitions() {
			if e := p.LeaderEpoch(); e != storage.MirrorLeaderEpoch(0, 0) {
				t.Fatalf("%s/%d: leader epoch %d after mirroring epoch 0, want %d", n, p.Index, e, storage.MirrorLeaderEpoch(0, 0))
			}
		}
	}
	// links.json (the list) and link-l1.json at the creation, then
	// link-l1.json once for the created topics; the copies' starts clear
	// no failure, so they write nothing.
	if n := counts.renamesUnder("links"); n != 3 {
		t.Errorf("creating the link and adopting %d topics wrote the link meta %d times, want 3 (%v)", topics, n, counts.renames)
	}
	// The writer registration: one mirror state file per topic.
	if n := counts.renamesUnder("mirror"); n != topics {
		t.Errorf("registering the link on %d topics wrote mirror state %d times, want %d", topics, n, topics)
	}
	if counts.epochs != 0 {
		t.Errorf("%d new partitions synced leader-epoch checkpoints %d times, want 0", topics*parts, counts.epochs)
	}
	t.Logf("syncs %d, renames %v", counts.syncs, counts.renames)
}
