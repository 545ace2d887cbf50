package client

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestClusterBootstrapList: a bootstrap list is tried in order, so a dead
// first address does not stop the cluster from being reached, and a
// malformed entry is refused up front.
func TestClusterBootstrapList(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now
	cl, err := NewCluster(dead+", "+c.ListenAddrs()[0], Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if cl.Seed() != dead {
		t.Fatalf("seed %q, want the first address %q", cl.Seed(), dead)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	md, err := cl.Metadata(ctx, []string{"t"})
	if err != nil || md["t"] == nil {
		t.Fatalf("metadata through the second bootstrap address: %v %v", md, err)
	}
	for _, bad := range []string{"", " , ", "a:1,nocolon", "a:1,b:2:3"} {
		if _, err := NewCluster(bad, Options{}); err == nil {
			t.Errorf("bootstrap list %q accepted", bad)
		} else if !strings.Contains(err.Error(), "address") {
			t.Errorf("bootstrap list %q: %v", bad, err)
		}
	}
}
