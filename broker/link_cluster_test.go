package broker

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The link meta files are cluster store records in cluster mode: a write
// through one broker is read by another, a write with a stale version is
// refused with ErrLinkMetaConflict, and nothing lands in a data
// directory.
func TestLinkMetaInClusterStore(t *testing.T) {
	c := newReplCluster(t, 2, nil)
	a, b := c.nodes[1].srv(), c.nodes[2].srv()
	if !a.LinkClustered() || a.ClusterApplied() == nil {
		t.Fatal("cluster mode not reported to the link manager")
	}
	ctx := ctxT(t)
	if _, _, err := b.ReadLinkMetaVersion(ctx, "link-x.json", false); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("absent record: %v", err)
	}
	v1, err := a.WriteLinkMetaIf(ctx, "link-x.json", []byte("one"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteLinkMetaIf(ctx, "link-x.json", []byte("dup"), 0); !errors.Is(err, ErrLinkMetaConflict) {
		t.Fatalf("second create: %v, want a conflict", err)
	}
	got, v, err := b.ReadLinkMetaVersion(ctx, "link-x.json", true)
	if err != nil || string(got) != "one" || v != v1 {
		t.Fatalf("read through the other broker: %q v%d (%v), want %q v%d", got, v, err, "one", v1)
	}
	v2, err := b.WriteLinkMetaIf(ctx, "link-x.json", []byte("two"), v1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.WriteLinkMetaIf(ctx, "link-x.json", []byte("stale"), v1); !errors.Is(err, ErrLinkMetaConflict) {
		t.Fatalf("stale write: %v, want a conflict", err)
	}
	// The writer applied its own write before returning: its snapshot
	// read sees it.
	if got, v, err := b.ReadLinkMetaVersion(ctx, "link-x.json", false); err != nil || string(got) != "two" || v != v2 {
		t.Fatalf("read-your-write: %q v%d (%v)", got, v, err)
	}
	// The plain file API goes to the store too.
	if err := a.WriteLinkMeta("links.json", []byte(`["x"]`)); err != nil {
		t.Fatal(err)
	}
	c.sync(mustRevision(t, c))
	if got, err := b.ReadLinkMeta("links.json"); err != nil || string(got) != `["x"]` {
		t.Fatalf("index through the other broker: %q (%v)", got, err)
	}
	if _, err := a.fs.Stat(linkMetaDir + "/links.json"); err == nil {
		t.Fatal("a link meta file was written to the data directory in cluster mode")
	}
	if err := b.RemoveLinkMetaIf(ctx, "link-x.json", v1); !errors.Is(err, ErrLinkMetaConflict) {
		t.Fatalf("remove with a stale version: %v", err)
	}
	if err := b.RemoveLinkMetaIf(ctx, "link-x.json", v2); err != nil {
		t.Fatal(err)
	}
	if err := a.RemoveLinkMeta("link-x.json"); err != nil {
		t.Fatalf("removing an absent record: %v", err)
	}
	if _, _, err := a.ReadLinkMetaVersion(ctx, "link-x.json", true); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after the removal: %v", err)
	}
	// A link meta name is still a plain name.
	if _, err := a.WriteLinkMetaIf(ctx, "../x", nil, 0); !errors.Is(err, ErrLinkMetaName) {
		t.Fatalf("bad name: %v", err)
	}
}

// Only a partition's leader runs its copy; the links' cluster-wide work
// runs on the controller's broker; repair refuses on a cluster.
func TestLinkRolesInCluster(t *testing.T) {
	c := newReplCluster(t, 2, nil)
	c.createTopic("m", []int32{1, 2}, map[string]string{"mirror.mode": "pull", "mirror.link": "l", "mirror.source.cluster.id": "src"})
	a, b := c.nodes[1].srv(), c.nodes[2].srv()
	if !a.LinkLeads("m", 0) || b.LinkLeads("m", 0) || a.LinkLeads("m", 1) || a.LinkLeads("nope", 0) {
		t.Fatal("LinkLeads does not follow the leadership")
	}
	applied := b.ClusterApplied()
	c.elect("m", 2, []int32{1, 2})
	select {
	case <-applied:
	default:
		t.Fatal("ClusterApplied not closed after a leader change")
	}
	if a.LinkLeads("m", 0) || !b.LinkLeads("m", 0) {
		t.Fatal("LinkLeads after the leader change")
	}
	// No controller in this harness: nobody coordinates.
	if a.LinkCoordinator() || b.LinkCoordinator() {
		t.Fatal("a link coordinator without a controller")
	}
	if _, err := b.TruncateKeepingCut(ctxT(t), "m", 0, 0, ""); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("truncation on a cluster: %v", err)
	}
	if err := b.ConvertToPullMirror(ctxT(t), "m", "l", "src"); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("conversion on a cluster: %v", err)
	}
}

func mustRevision(t *testing.T, c *replCluster) int64 {
	t.Helper()
	snap, err := c.store.Snapshot(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return snap.Revision
}
