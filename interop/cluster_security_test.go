package interop

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestVerbatimClusterACLsAndSCRAM: Kafka 4.4's kafka-acls.sh and
// kafka-configs.sh against a 3-broker Verbatim cluster whose one listener
// speaks SASL_PLAINTEXT: an ACL added with the tools is enforced by every
// broker, a SCRAM user added with them authenticates on every broker
// (each broker probed alone), and the tools read both back bootstrapped
// from another broker. (The Java admin client sends each request to a
// broker of its choice, so which broker wrote is not fixed here: the
// broker tests fix it. No topic is created: replication is not what this
// tests.)
func TestVerbatimClusterACLsAndSCRAM(t *testing.T) {
	bin := BuildVerbatim(t)
	c := StartVCluster(t, bin, 3, VClusterOptions{Props: []string{
		"listener.security.protocol.map=PLAINTEXT:SASL_PLAINTEXT",
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
		// The brokers talk to each other on this listener too, as the
		// super user admin (Kafka's inter-broker SASL settings).
		"sasl.mechanism.inter.broker.protocol=PLAIN",
		`listener.name.plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret";`,
		"listener.name.plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;",
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:admin",
	}})
	one := c.Node(t, 1).Addr
	dir := t.TempDir()
	props := func(name, mech, user, pass string) string {
		module := "org.apache.kafka.common.security.plain.PlainLoginModule"
		if mech != "PLAIN" {
			module = "org.apache.kafka.common.security.scram.ScramLoginModule"
		}
		f := filepath.Join(dir, name)
		body := "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=" + mech + "\n" +
			"sasl.jaas.config=" + module + ` required username="` + user + `" password="` + pass + `";` + "\n"
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	admin := props("admin.properties", "PLAIN", "admin", "admin-secret")
	carolProps := props("carol.properties", "SCRAM-SHA-256", "carol", "carol-secret")
	carol := scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha256Mechanism()

	// SCRAM: the user authenticates on every broker once its snapshot has
	// the credential.
	JavaTool(t, "kafka-configs", "--bootstrap-server", one, "--command-config", admin,
		"--alter", "--entity-type", "users", "--entity-name", "carol", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=carol-secret]")
	for _, nd := range c.Nodes {
		eventually(t, "carol authenticates on node "+nd.Addr, func() error { return describeAclsOn(nd.Addr, carol) },
			func(err error) bool { return errors.Is(err, kerr.ClusterAuthorizationFailed) })
	}
	res := JavaTool(t, "kafka-configs", "--bootstrap-server", c.Node(t, 3).Addr, "--command-config", admin,
		"--describe", "--entity-type", "users", "--entity-name", "carol")
	if !strings.Contains(res.Stdout, "SCRAM-SHA-256=iterations=8192") {
		t.Fatalf("kafka-configs --describe through node 3 does not show carol's credential:\n%s", res.describe())
	}

	// ACLs: carol may not describe ACLs until an ACL lets her; then every
	// broker lets her.
	JavaTool(t, "kafka-acls", "--bootstrap-server", one, "--command-config", admin,
		"--add", "--allow-principal", "User:carol", "--operation", "Describe", "--cluster")
	for _, nd := range c.Nodes {
		eventually(t, "carol describes ACLs on node "+nd.Addr, func() error { return describeAclsOn(nd.Addr, carol) }, nil)
	}
	list := JavaTool(t, "kafka-acls", "--bootstrap-server", c.Node(t, 2).Addr, "--command-config", carolProps, "--list").Stdout
	if !strings.Contains(list, "(principal=User:carol, host=*, operation=DESCRIBE, permissionType=ALLOW)") {
		t.Fatalf("kafka-acls --list as carol through node 2:\n%s", list)
	}

	// Removed: every broker refuses her again.
	JavaTool(t, "kafka-acls", "--bootstrap-server", c.Node(t, 3).Addr, "--command-config", admin,
		"--remove", "--force", "--allow-principal", "User:carol", "--operation", "Describe", "--cluster")
	for _, nd := range c.Nodes {
		eventually(t, "carol refused on node "+nd.Addr, func() error {
			if err := describeAclsOn(nd.Addr, carol); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
				return errors.New("still allowed")
			}
			return nil
		}, nil)
	}
	// The admin (PLAIN, a super user) is not affected.
	if err := describeAclsOn(one, plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()); err != nil {
		t.Fatalf("the admin's DescribeAcls: %v", err)
	}
}

// describeAclsOn authenticates with m on addr alone (a fresh client only
// knows its seed) and lists every ACL: nil, the authentication failure,
// or the answer's error.
func describeAclsOn(addr string, m sasl.Mechanism) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(m))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType, req.Operation, req.PermissionType = 1, 1, 1, 1
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}

// eventually retries try (bounded, 30 s) until it succeeds, or until ok
// accepts its error.
func eventually(t *testing.T, what string, try func() error, ok func(error) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := try()
		if err == nil || ok != nil && ok(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
