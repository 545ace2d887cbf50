package interop

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/authz"
	"github.com/verbatim-kafka/verbatim/broker"
)

// startAuthorizedBroker serves an in-process Verbatim on a PLAINTEXT
// loopback listener with the authorizer on and the anonymous principal
// (every PLAINTEXT client) a super user, so Kafka's tools may manage ACLs.
func startAuthorizedBroker(t *testing.T, dir string) (*broker.Server, string) {
	t.Helper()
	srv, err := broker.Open(broker.Config{
		DataDir: dir, NodeID: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Authorizer: true, SuperUsers: []string{broker.AnonymousPrincipal},
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	})
	return srv, ln.Addr().String()
}

// TestKafkaAclsTool runs Kafka 4.4's kafka-acls.sh unchanged against
// Verbatim: --add (literal and prefixed, allow and deny, --allow-host),
// --list (all, and by resource with MATCH), --remove; the ACLs it adds
// are the ones the broker enforces.
func TestKafkaAclsTool(t *testing.T) {
	srv, bs := startAuthorizedBroker(t, t.TempDir())
	acls := func(args ...string) string {
		t.Helper()
		return JavaTool(t, "kafka-acls", append([]string{"--bootstrap-server", bs}, args...)...).Stdout
	}
	acls("--add", "--allow-principal", "User:alice", "--allow-host", "10.0.0.1",
		"--operation", "Read", "--operation", "Write", "--topic", "orders")
	acls("--add", "--allow-principal", "User:alice", "--allow-host", "10.0.0.1",
		"--operation", "Read", "--group", "billing")
	acls("--add", "--deny-principal", "User:bob", "--operation", "All",
		"--topic", "orders-", "--resource-pattern-type", "prefixed")
	acls("--add", "--allow-principal", "User:pusher", "--operation", "ClusterAction", "--cluster")

	all := acls("--list")
	for _, want := range []string{
		"ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)",
		"(principal=User:alice, host=10.0.0.1, operation=READ, permissionType=ALLOW)",
		"(principal=User:alice, host=10.0.0.1, operation=WRITE, permissionType=ALLOW)",
		"ResourcePattern(resourceType=GROUP, name=billing, patternType=LITERAL)",
		"ResourcePattern(resourceType=TOPIC, name=orders-, patternType=PREFIXED)",
		"(principal=User:bob, host=*, operation=ALL, permissionType=DENY)",
		"ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)",
		"(principal=User:pusher, host=*, operation=CLUSTER_ACTION, permissionType=ALLOW)",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("kafka-acls --list lacks %s:\n%s", want, all)
		}
	}
	// What the tool added is what the broker enforces.
	checks := []struct {
		principal, host string
		op              authz.Operation
		rt              authz.ResourceType
		name            string
		want            bool
	}{
		{"User:alice", "10.0.0.1", authz.OpRead, authz.ResourceTopic, "orders", true},
		{"User:alice", "10.0.0.2", authz.OpRead, authz.ResourceTopic, "orders", false},
		{"User:alice", "10.0.0.1", authz.OpDescribe, authz.ResourceGroup, "billing", true},
		{"User:bob", "10.0.0.1", authz.OpRead, authz.ResourceTopic, "orders-eu", false},
		{"User:pusher", "10.0.0.9", authz.OpClusterAction, authz.ResourceCluster, authz.ClusterName, true},
	}
	for _, c := range checks {
		if got := srv.Authorizer().Authorize(c.principal, c.host, c.op, c.rt, c.name, true); got != c.want {
			t.Errorf("%s from %s %s on %s %s: %v, want %v", c.principal, c.host, c.op, c.rt, c.name, got, c.want)
		}
	}

	// --list of a topic with MATCH shows the prefixed deny that applies.
	matched := acls("--list", "--topic", "orders-eu", "--resource-pattern-type", "match")
	if !strings.Contains(matched, "name=orders-, patternType=PREFIXED") || strings.Contains(matched, "name=orders, patternType=LITERAL") {
		t.Errorf("kafka-acls --list --resource-pattern-type match for orders-eu:\n%s", matched)
	}

	acls("--remove", "--force", "--deny-principal", "User:bob", "--operation", "All",
		"--topic", "orders-", "--resource-pattern-type", "prefixed")
	acls("--remove", "--force", "--topic", "orders")
	left := acls("--list")
	if strings.Contains(left, "User:bob") || strings.Contains(left, "name=orders, patternType=LITERAL") {
		t.Errorf("removed ACLs still listed:\n%s", left)
	}
	if !strings.Contains(left, "name=billing") || !strings.Contains(left, "User:pusher") {
		t.Errorf("ACLs not removed are gone:\n%s", left)
	}
}
