//go:build !race

package broker

import (
	"fmt"
	"testing"

	"github.com/verbatim-kafka/verbatim/authz"
)

// TestAllocConnRequestPath bounds the connection machinery's allocations
// per request (framing, header, ordering, response framing; the handler
// answers a constant): one, the pending entry that carries the request to
// the writer. Frame buffers are pooled (hotpath), the handler context is
// lazy (reqctx.go), the client id string is reused.
func TestAllocConnRequestPath(t *testing.T) {
	res := testing.Benchmark(BenchmarkConnPipelinedRawRequests)
	if res.N == 0 {
		t.Fatal("benchmark did not run")
	}
	if got := res.AllocsPerOp(); got > 1 {
		t.Fatalf("%d allocations per request, want at most 1 (%s)", got, res.MemString())
	}
}

// TestAllocProduceConn bounds a whole produce request over a connection,
// normal and mirror, with 8 in flight: the pending entry and nothing more
// (the produce state and its validation options are pooled, the writer
// waits without the request context's timers).
func TestAllocProduceConn(t *testing.T) {
	for _, mirror := range []bool{false, true} {
		res := testing.Benchmark(func(b *testing.B) { benchProduceConn(b, mirror, 8) })
		if res.N == 0 {
			t.Fatal("benchmark did not run")
		}
		t.Logf("mirror=%v: %d allocations per request", mirror, res.AllocsPerOp())
		if got := res.AllocsPerOp(); got > maxProduceAllocs {
			t.Fatalf("mirror=%v: %d allocations per request, want at most %d (%s)", mirror, got, maxProduceAllocs, res.MemString())
		}
	}
}

// TestAllocProduceConnAuthorized is TestAllocProduceConn with the
// authorizer on and a thousand ACLs besides the ones that grant the
// produce (WRITE on the topic; for the mirror, CLUSTER_ACTION): checking
// them allocates nothing.
func TestAllocProduceConnAuthorized(t *testing.T) {
	withGrants := func(c *Config) {
		c.Authorizer = true
		c.testPrincipals = map[string]string{"127.0.0.1": "User:pusher"}
	}
	for _, mirror := range []bool{false, true} {
		res := testing.Benchmark(func(b *testing.B) {
			benchProduceConn(b, mirror, 8, withGrants, func(c *Config) { c.aclSeed = benchACLs() })
		})
		if res.N == 0 {
			t.Fatal("benchmark did not run")
		}
		t.Logf("mirror=%v: %d allocations per request", mirror, res.AllocsPerOp())
		if got := res.AllocsPerOp(); got > maxProduceAllocs {
			t.Fatalf("mirror=%v: %d allocations per request, want at most %d (%s)", mirror, got, maxProduceAllocs, res.MemString())
		}
	}
}

// benchACLs grants User:pusher the produce and the mirror permission on
// "bench" among a thousand ACLs of other principals and topics.
func benchACLs() []authz.Binding {
	bs := []authz.Binding{
		{ResourceType: authz.ResourceTopic, Name: "ben", Pattern: authz.PatternPrefixed, Principal: "User:pusher", Host: "*", Operation: authz.OpWrite, Permission: authz.PermAllow},
		{ResourceType: authz.ResourceCluster, Name: authz.ClusterName, Pattern: authz.PatternLiteral, Principal: "User:pusher", Host: "*", Operation: authz.OpClusterAction, Permission: authz.PermAllow},
	}
	for i := range 1000 {
		bs = append(bs, authz.Binding{ResourceType: authz.ResourceTopic, Name: fmt.Sprintf("t%d", i), Pattern: authz.PatternType(3 + i%2),
			Principal: fmt.Sprintf("User:u%d", i), Host: "*", Operation: authz.OpRead, Permission: authz.PermAllow})
	}
	return bs
}
