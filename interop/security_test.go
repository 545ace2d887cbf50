package interop

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/verbatim-kafka/verbatim/internal/testcerts"
)

// securedVerbatim is a `verbatim serve --config` with a PLAINTEXT listener
// (loopback, internal) and a SASL_SSL listener (SCRAM-SHA-512), the
// authorizer on and User:admin the only super user.
type securedVerbatim struct {
	*Verbatim
	Plain, SASLSSL string // listener addresses
	CA             *testcerts.CA
	dir            string
}

// scramUsers are bootstrapped by `verbatim format --add-scram`.
var scramUsers = map[string]string{"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}

func startSecuredVerbatim(t *testing.T, bin string) *securedVerbatim {
	t.Helper()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	ca := testcerts.NewCA(t)
	srv := ca.Server(t, "broker")
	FormatSCRAM(t, bin, data, scramUsers)
	ports := FreePorts(t, 2)
	s := &securedVerbatim{Plain: Addr(ports[0]), SASLSSL: Addr(ports[1]), CA: ca, dir: dir}
	props := []string{
		"node.id=1",
		"log.dirs=" + data,
		"listeners=PLAINTEXT://" + s.Plain + ",SASL_SSL://" + s.SASLSSL,
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
		"listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512",
		"listener.name.sasl_ssl.ssl.keystore.type=PEM",
		"listener.name.sasl_ssl.ssl.keystore.location=" + srv.KeystoreFile,
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:admin",
		"allow.everyone.if.no.acl.found=false",
		"num.partitions=1",
		"group.initial.rebalance.delay.ms=0",
	}
	v := &Verbatim{Addr: s.Plain, DataDir: data, Bin: bin}
	v.Proc = ServeConfig(t, bin, dir, props, []string{s.Plain, s.SASLSSL})
	s.Verbatim = v
	return s
}

// clientProperties writes a Kafka client.properties for user over
// SASL_SSL and returns its path.
func (s *securedVerbatim) clientProperties(t *testing.T, user, pass string) string {
	t.Helper()
	p := filepath.Join(s.dir, user+".properties")
	body := strings.Join([]string{
		"security.protocol=SASL_SSL",
		"sasl.mechanism=SCRAM-SHA-512",
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="` + user + `" password="` + pass + `";`,
		"ssl.truststore.type=PEM",
		"ssl.truststore.location=" + s.CA.File,
		"",
	}, "\n")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// kcatArgs are kcat's options for user over SASL_SSL.
func (s *securedVerbatim) kcatArgs(user, pass string) []string {
	return []string{"-b", s.SASLSSL, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
		"-X", "sasl.username=" + user, "-X", "sasl.password=" + pass, "-X", "ssl.ca.location=" + s.CA.File}
}

// client is a franz-go client for user over SASL_SSL.
func (s *securedVerbatim) client(t *testing.T, user, pass string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(s.CA.Cert)
	auth := scram.Auth{User: user, Pass: pass}
	return verbatimClient(t, s.SASLSSL, append([]kgo.Opt{
		kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}),
		kgo.SASL(auth.AsSha512Mechanism()),
		kgo.RequestRetries(2), kgo.RetryTimeout(10 * time.Second),
	}, opts...)...)
}

// TestSecuredBrokerRealClients is the security issue's first acceptance:
// a Verbatim with PLAINTEXT and SASL_SSL (SCRAM-SHA-512) listeners and the
// authorizer on, used by the Java tools, kcat, confluent-kafka and franz-go
// as a user granted ACLs, with Kafka's authorization errors otherwise.
func TestSecuredBrokerRealClients(t *testing.T) {
	bin := BuildVerbatim(t)
	s := startSecuredVerbatim(t, bin)
	adminCfg := s.clientProperties(t, "admin", scramUsers["admin"])
	aliceCfg := s.clientProperties(t, "alice", scramUsers["alice"])
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The admin creates topics and grants alice a prefix, over SASL_SSL
	// with Kafka's own tools.
	for _, topic := range []string{"sec-orders", "sec-py", "secret"} {
		JavaTool(t, "kafka-topics", "--bootstrap-server", s.SASLSSL, "--command-config", adminCfg,
			"--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1")
	}
	JavaTool(t, "kafka-acls", "--bootstrap-server", s.SASLSSL, "--command-config", adminCfg, "--add",
		"--allow-principal", "User:alice", "--operation", "Read", "--operation", "Write", "--operation", "Describe",
		"--topic", "sec-", "--resource-pattern-type", "prefixed")
	JavaTool(t, "kafka-acls", "--bootstrap-server", s.SASLSSL, "--command-config", adminCfg, "--add",
		"--allow-principal", "User:alice", "--operation", "Read", "--group", "sec-", "--resource-pattern-type", "prefixed")
	res := JavaTool(t, "kafka-acls", "--bootstrap-server", s.SASLSSL, "--command-config", adminCfg, "--list",
		"--topic", "sec-", "--resource-pattern-type", "prefixed")
	for _, op := range []string{"READ", "WRITE", "DESCRIBE"} {
		if !strings.Contains(res.Stdout, "User:alice") || !strings.Contains(res.Stdout, "operation="+op) {
			t.Errorf("kafka-acls --list lacks alice's %s:\n%s", op, res.Stdout)
		}
	}
	res = JavaTool(t, "kafka-topics", "--bootstrap-server", s.SASLSSL, "--command-config", aliceCfg, "--list")
	if got := strings.Fields(res.Stdout); strings.Join(got, ",") != "sec-orders,sec-py" {
		t.Errorf("alice's kafka-topics --list = %v, want only the sec- topics (secret is hidden)", got)
	}

	t.Run("java-console", func(t *testing.T) {
		in := "one\ntwo\nthree\n"
		if _, err := RunJavaTool(t, Cmd{Stdin: strings.NewReader(in)}, "kafka-console-producer",
			"--bootstrap-server", s.SASLSSL, "--command-config", aliceCfg, "--topic", "sec-orders",
			"--producer-property", "acks=all"); err != nil {
			t.Fatalf("console producer as alice: %v", err)
		}
		res := JavaTool(t, "kafka-console-consumer", "--bootstrap-server", s.SASLSSL, "--command-config", aliceCfg,
			"--topic", "sec-orders", "--group", "sec-console", "--from-beginning", "--max-messages", "3", "--timeout-ms", "60000")
		if got := strings.Join(res.Lines(), ","); got != "one,two,three" {
			t.Errorf("console consumer as alice read %q", got)
		}
	})

	t.Run("kcat", func(t *testing.T) {
		args := s.kcatArgs("alice", scramUsers["alice"])
		if _, err := RunKcat(t, Cmd{Stdin: strings.NewReader("k1|v1\nk2|v2\n")}, append(args, "-P", "-t", "sec-orders", "-K", "|", "-X", "acks=all")...); err != nil {
			t.Fatalf("kcat produce as alice: %v", err)
		}
		res := Kcat(t, append(args, "-C", "-t", "sec-orders", "-o", "beginning", "-c", "5", "-e", "-f", "%o %s\n")...)
		if got := strings.Join(res.Lines(), ","); got != "0 one,1 two,2 three,3 v1,4 v2" {
			t.Errorf("kcat as alice read %q", got)
		}
		bad := s.kcatArgs("alice", "wrong-password")
		res, err := RunKcat(t, Cmd{Timeout: 40 * time.Second}, append(bad, "-L", "-m", "10")...)
		if err == nil {
			t.Errorf("kcat with a wrong password listed metadata:\n%s", res.Stdout)
		} else if out := res.Stdout + res.Stderr; !strings.Contains(strings.ToLower(out), "authentication") {
			t.Errorf("kcat with a wrong password failed without an authentication error:\n%s", out)
		}
	})

	t.Run("confluent-kafka", func(t *testing.T) {
		res := Python(t, pySASLProduceConsume, s.SASLSSL, "sec-py", "alice", scramUsers["alice"], s.CA.File)
		if got := strings.Join(res.Lines(), ","); got != "0 py-0,1 py-1,2 py-2" {
			t.Errorf("confluent-kafka as alice read %q\n%s", got, res.Stderr)
		}
	})

	t.Run("franz-go-errors", func(t *testing.T) {
		alice := s.client(t, "alice", scramUsers["alice"])
		if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "sec-orders", Value: []byte("franz")}).FirstErr(); err != nil {
			t.Errorf("alice produce to sec-orders: %v", err)
		}
		if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "secret", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Errorf("alice produce to secret: %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
		adm := kadm.NewClient(alice)
		if _, err := adm.CommitOffsets(ctx, "other-group", kadm.OffsetsFromRecords(kgo.Record{Topic: "sec-orders", Offset: 1})); !errors.Is(err, kerr.GroupAuthorizationFailed) {
			t.Errorf("alice commit to other-group: %v, want GROUP_AUTHORIZATION_FAILED", err)
		}
		dreq := kmsg.NewPtrDescribeACLsRequest()
		dreq.ResourceType, dreq.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
		dreq.Operation, dreq.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		if dresp, err := dreq.RequestWith(ctx, alice); err != nil || dresp.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
			t.Errorf("alice DescribeAcls: %v %v, want CLUSTER_AUTHORIZATION_FAILED", err, dresp)
		}
		txn := s.client(t, "alice", scramUsers["alice"], kgo.TransactionalID("alice-tx"))
		if err := txn.BeginTransaction(); err == nil {
			err = txn.ProduceSync(ctx, &kgo.Record{Topic: "sec-orders", Value: []byte("t")}).FirstErr()
			if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
				t.Errorf("alice transactional produce: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err)
			}
		}
		bob := s.client(t, "bob", scramUsers["bob"])
		if err := bob.ProduceSync(ctx, &kgo.Record{Topic: "sec-orders", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Errorf("bob (no ACLs) produce: %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
		wrong := s.client(t, "alice", "wrong")
		if err := wrong.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
		}
		// The PLAINTEXT listener is anonymous: the authorizer applies
		// there too.
		anon := verbatimClient(t, s.Plain, kgo.RequestRetries(2), kgo.RetryTimeout(10*time.Second))
		if err := anon.ProduceSync(ctx, &kgo.Record{Topic: "sec-orders", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Errorf("anonymous produce on PLAINTEXT: %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
	})

	t.Run("kafka-configs-scram-users", func(t *testing.T) {
		JavaTool(t, "kafka-configs", "--bootstrap-server", s.SASLSSL, "--command-config", adminCfg, "--alter",
			"--add-config", "SCRAM-SHA-512=[iterations=8192,password=carol-secret]", "--entity-type", "users", "--entity-name", "carol")
		res := JavaTool(t, "kafka-configs", "--bootstrap-server", s.SASLSSL, "--command-config", adminCfg, "--describe",
			"--entity-type", "users", "--entity-name", "carol")
		if !strings.Contains(res.Stdout, "SCRAM-SHA-512=iterations=8192") {
			t.Errorf("kafka-configs --describe carol:\n%s", res.Stdout)
		}
		carol := s.client(t, "carol", "carol-secret")
		if err := carol.Ping(ctx); err != nil {
			t.Errorf("carol after kafka-configs --add-config: %v", err)
		}
		JavaTool(t, "kafka-configs", "--bootstrap-server", s.SASLSSL, "--command-config", adminCfg, "--alter",
			"--delete-config", "SCRAM-SHA-512", "--entity-type", "users", "--entity-name", "carol")
		if err := s.client(t, "carol", "carol-secret").Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("carol after --delete-config: %v, want SASL_AUTHENTICATION_FAILED", err)
		}
	})

	t.Run("acl-remove", func(t *testing.T) {
		JavaTool(t, "kafka-acls", "--bootstrap-server", s.SASLSSL, "--command-config", adminCfg, "--remove", "--force",
			"--allow-principal", "User:alice", "--operation", "Write", "--topic", "sec-", "--resource-pattern-type", "prefixed")
		alice := s.client(t, "alice", scramUsers["alice"], kgo.DisableIdempotentWrite())
		if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "sec-orders", Value: []byte("late")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Errorf("alice produce after her WRITE was removed: %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
		// An idempotent producer needs IDEMPOTENT_WRITE on the cluster or
		// WRITE on some topic to get a producer id: Kafka refuses
		// InitProducerId with CLUSTER_AUTHORIZATION_FAILED.
		idem := s.client(t, "alice", scramUsers["alice"])
		if err := idem.ProduceSync(ctx, &kgo.Record{Topic: "sec-orders", Value: []byte("late")}).FirstErr(); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
			t.Errorf("alice idempotent produce with no WRITE anywhere: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
		}
		// Read stays granted.
		res := Kcat(t, append(s.kcatArgs("alice", scramUsers["alice"]), "-C", "-t", "sec-orders", "-o", "beginning", "-c", "1", "-e")...)
		if got := strings.Join(res.Lines(), ","); got != "one" {
			t.Errorf("alice read after WRITE removal: %q", got)
		}
	})
}

// pySASLProduceConsume produces three records with confluent-kafka over
// SASL_SSL/SCRAM-SHA-512 and reads them back in a consumer group.
// argv: bootstrap topic user password ca-file.
const pySASLProduceConsume = `
import sys
from confluent_kafka import Producer, Consumer
bs, topic, user, pw, ca = sys.argv[1:6]
sec = {"bootstrap.servers": bs, "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
       "sasl.username": user, "sasl.password": pw, "ssl.ca.location": ca}
p = Producer(dict(sec, **{"acks": "all"}))
for i in range(3):
    p.produce(topic, value=("py-%d" % i).encode())
if p.flush(30) != 0:
    sys.exit("produce did not complete")
c = Consumer(dict(sec, **{"group.id": "sec-py", "auto.offset.reset": "earliest", "enable.auto.commit": False}))
c.subscribe([topic])
got = []
while len(got) < 3:
    m = c.poll(30)
    if m is None:
        sys.exit("timed out after %d records" % len(got))
    if m.error():
        sys.exit("consume error: %s" % m.error())
    got.append("%d %s" % (m.offset(), m.value().decode()))
c.commit(asynchronous=False)
c.close()
print("\n".join(got))
`
