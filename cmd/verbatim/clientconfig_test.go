package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/verbatim-kafka/verbatim/internal/testcerts"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
)

func writeProps(t *testing.T, name string, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSecuredSourceConfig: mirror push and verify reach a source that
// requires SASL_SSL with SCRAM-SHA-512 through --source-config (the
// password only in the file), the copy is exact (verify exit 0); a wrong
// password is exit 2 with the authentication failure named and the
// password nowhere in the output; a config file with a name that is not a
// Kafka client property is exit 2 naming its line, for push, stop and
// verify.
func TestSecuredSourceConfig(t *testing.T) {
	ca := testcerts.NewCA(t)
	leaf := ca.Server(t, "source")
	cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	src := testkit.StartSource(t, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "mirror", "mirror-secret"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), kfake.SeedTopics(2, "t"))
	sa := src.ListenAddrs()[0]
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	cl := testkit.Client(t, sa, kgo.DialTLSConfig(&tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}),
		kgo.SASL(scram.Auth{User: "mirror", Pass: "mirror-secret"}.AsSha512Mechanism()), kgo.DefaultProduceTopic("t"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for i := range 40 {
		if err := cl.ProduceSync(testkit.Ctx(t), &kgo.Record{Value: []byte(fmt.Sprint("v", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	dst := testkit.StartDest(t, t.TempDir())
	caFile := ca.File
	cfg := func(pass string) string {
		return writeProps(t, "source.properties", "security.protocol=SASL_SSL", "ssl.truststore.type=PEM", "ssl.truststore.location="+caFile,
			"sasl.mechanism=SCRAM-SHA-512",
			`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="mirror" password="`+pass+`";`)
	}
	good, bad := cfg("mirror-secret"), cfg("wrong-secret")
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		var code int
		if args[0] == "verify" {
			code = verifyMain(args[1:], &out, &errb)
		} else {
			code = mirrorMain(args[1:], &out, &errb)
		}
		return code, out.String() + errb.String()
	}
	push := []string{"mirror", "push", "--source", sa, "--dest", dst.Addr, "--topics", "t", "--create-topics", "--log-format", "json", "--retry-for", "30s"}
	if code, out := run(append(push, "--source-config", good)...); code != 0 {
		t.Fatalf("push with --source-config: exit %d\n%s", code, out)
	}
	verify := []string{"verify", "--source", sa, "--dest", dst.Addr, "--topics", "t"}
	if code, out := run(append(verify, "--source-config", good)...); code != 0 || !strings.Contains(out, "identical") {
		t.Fatalf("verify with --source-config: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{append(push, "--source-config", bad), append(verify, "--source-config", bad)} {
		code, out := run(args...)
		if code != 2 || !strings.Contains(out, "SASL SCRAM-SHA-512 authentication") || strings.Contains(out, "wrong-secret") {
			t.Fatalf("%s with a wrong password: exit %d\n%s", args[0], code, out)
		}
	}
	typo := writeProps(t, "typo.properties", "security.protocol=PLAINTEXT", "sasl.jass.config=x")
	for _, args := range [][]string{
		append(push, "--source-config", typo),
		append(push, "--dest-config", typo),
		{"mirror", "stop", "--dest", dst.Addr, "--topics", "t", "--dest-config", typo},
		append(verify, "--dest-config", typo),
	} {
		code, out := run(args...)
		if code != 2 || !strings.Contains(out, `line 2: "sasl.jass.config" is not a Kafka client property`) {
			t.Fatalf("%v: exit %d\n%s", args, code, out)
		}
	}
}
