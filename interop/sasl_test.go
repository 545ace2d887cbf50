package interop

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/authn"
	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
)

// startSASLVerbatim formats a data dir with a SCRAM-SHA-512 admin (as
// `verbatim format --add-scram` does) and serves it in-process on one
// SASL_PLAINTEXT listener with PLAIN (user "plain") and both SCRAM
// mechanisms. It returns the listener's address.
func startSASLVerbatim(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	admin, err := authn.ParseAddScram("SCRAM-SHA-512=[name=admin,password=admin-secret]")
	if err != nil {
		t.Fatal(err)
	}
	if err := broker.Format(broker.FormatOptions{DataDir: dir, NodeID: 1, SCRAM: []authn.ScramEntry{admin}}); err != nil {
		t.Fatal(err)
	}
	srv, err := broker.Open(broker.Config{
		DataDir: dir, NodeID: 1, AutoCreateTopics: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		SASL: map[string]*broker.SASLListenerConfig{"SASL_PLAINTEXT": {
			Mechanisms: []string{authn.SCRAMSHA512, authn.SCRAMSHA256, authn.PLAIN},
			PlainUsers: map[string]string{"plain": "plain-secret"},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return testkit.ServeSASL(t, srv)
}

// TestSASLJavaToolsAndKcat: Kafka's kafka-configs.sh manages SCRAM users
// over SCRAM-SHA-512 (AlterUserScramCredentials, DescribeClientQuotas,
// DescribeUserScramCredentials as the Java admin client sends them), and
// librdkafka (kcat) produces and consumes with the new user, with PLAIN,
// and is refused a wrong password.
func TestSASLJavaToolsAndKcat(t *testing.T) {
	addr := startSASLVerbatim(t)
	cfgFile := filepath.Join(t.TempDir(), "admin.properties")
	if err := os.WriteFile(cfgFile, []byte("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"+
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-secret";`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	JavaTool(t, "kafka-configs", "--bootstrap-server", addr, "--command-config", cfgFile,
		"--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret]")
	res := JavaTool(t, "kafka-configs", "--bootstrap-server", addr, "--command-config", cfgFile,
		"--describe", "--entity-type", "users", "--entity-name", "alice")
	if !strings.Contains(res.Stdout, "SCRAM-SHA-256=iterations=8192") {
		t.Fatalf("kafka-configs --describe does not show alice's credential:\n%s", res.describe())
	}

	kcat := func(mech, user, pass string, args ...string) (*Result, error) {
		return RunKcat(t, Cmd{Timeout: 30 * time.Second}, append([]string{"-b", addr,
			"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=" + mech,
			"-X", "sasl.username=" + user, "-X", "sasl.password=" + pass}, args...)...)
	}
	if res, err := RunKcat(t, Cmd{Stdin: strings.NewReader("one\ntwo\n"), Timeout: 30 * time.Second}, "-b", addr,
		"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=SCRAM-SHA-256",
		"-X", "sasl.username=alice", "-X", "sasl.password=alice-secret", "-P", "-t", "sasl-kcat"); err != nil {
		t.Fatalf("kcat produce as alice (SCRAM-SHA-256): %v\n%s", err, res.describe())
	}
	res, err := kcat("PLAIN", "plain", "plain-secret", "-C", "-t", "sasl-kcat", "-o", "beginning", "-e", "-q")
	if err != nil || strings.Join(res.Lines(), ",") != "one,two" {
		t.Fatalf("kcat consume as plain (PLAIN): %v\n%s", err, res.describe())
	}
	res, err = kcat("SCRAM-SHA-256", "alice", "wrong", "-L", "-m", "2")
	if err == nil || !strings.Contains(res.Stderr+res.Stdout, "Authentication failed") {
		t.Fatalf("kcat with a wrong password was not refused as Kafka refuses it:\n%s", res.describe())
	}

	JavaTool(t, "kafka-configs", "--bootstrap-server", addr, "--command-config", cfgFile,
		"--alter", "--entity-type", "users", "--entity-name", "alice", "--delete-config", "SCRAM-SHA-256")
	if res, err := kcat("SCRAM-SHA-256", "alice", "alice-secret", "-L", "-m", "2"); err == nil {
		t.Fatalf("kcat logged in with a deleted credential:\n%s", res.describe())
	}
}
