package interop

import (
	"crypto/x509/pkix"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/internal/testcerts"
)

// startVerbatimConfig runs `verbatim serve --config FILE` whose listeners
// are PLAINTEXT and SSL on two free loopback ports (the file's own
// content follows the listeners line) and waits for both.
func startVerbatimConfig(t *testing.T, bin, extra string) (plain, ssl string) {
	t.Helper()
	dir := t.TempDir()
	ports := FreePorts(t, 2)
	plain, ssl = Addr(ports[0]), Addr(ports[1])
	ServeConfig(t, bin, dir, []string{
		"listeners=PLAINTEXT://" + plain + ",SSL://" + ssl,
		"log.dirs=" + filepath.Join(dir, "data"),
		extra,
	}, []string{plain, ssl})
	return plain, ssl
}

// TestVerbatimTLSClients: kcat (librdkafka) and the Java console producer,
// consumer and kafka-topics produce and consume over an SSL listener that
// requires client certificates (PEM keystores and truststores on both
// sides), a client without a certificate is refused, and the PLAINTEXT
// listener beside it keeps serving.
func TestVerbatimTLSClients(t *testing.T) {
	bin := BuildVerbatim(t)
	ca := testcerts.NewCA(t)
	broker := ca.Server(t, "broker")
	client := ca.Client(t, "app", pkix.Name{CommonName: "app", OrganizationalUnit: []string{"clients"}})
	plain, ssl := startVerbatimConfig(t, bin, fmt.Sprintf(`ssl.keystore.type=PEM
ssl.keystore.location=%s
ssl.truststore.type=PEM
ssl.truststore.location=%s
listener.name.ssl.ssl.client.auth=required
num.partitions=1
auto.create.topics.enable=true
`, broker.KeystoreFile, ca.File))
	kcatTLS := []string{"-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + ca.File,
		"-X", "ssl.certificate.location=" + client.CertFile, "-X", "ssl.key.location=" + client.KeyFile}

	t.Run("kcat", func(t *testing.T) {
		const topic, n = "tls-kcat", 50
		var in strings.Builder
		for i := range n {
			fmt.Fprintf(&in, "k%d|v%d\n", i, i)
		}
		args := append([]string{"-P", "-b", ssl, "-t", topic, "-K", "|", "-X", "acks=all"}, kcatTLS...)
		if _, err := RunKcat(t, Cmd{Stdin: strings.NewReader(in.String())}, args...); err != nil {
			t.Fatalf("kcat produce over SSL: %v", err)
		}
		res := Kcat(t, append([]string{"-C", "-b", ssl, "-t", topic, "-o", "beginning", "-c", strconv.Itoa(n), "-e", "-f", "%k|%s\n"}, kcatTLS...)...)
		if got := strings.Join(res.Lines(), "\n"); got != strings.TrimSpace(in.String()) {
			t.Fatalf("kcat consumed over SSL:\n%s", got)
		}
		// The PLAINTEXT listener serves the same log.
		res = Kcat(t, "-C", "-b", plain, "-t", topic, "-o", "beginning", "-c", strconv.Itoa(n), "-e", "-f", "%k|%s\n")
		if len(res.Lines()) != n {
			t.Fatalf("kcat over PLAINTEXT read %d records", len(res.Lines()))
		}
		// No client certificate: refused (ssl.client.auth=required).
		noCert := []string{"-L", "-b", ssl, "-m", "5", "-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + ca.File}
		if res, err := RunKcat(t, Cmd{Timeout: time.Minute}, noCert...); err == nil && strings.Contains(res.Stdout, "topic \""+topic+"\"") {
			t.Fatalf("kcat without a client certificate listed the topics:\n%s", res.Stdout)
		}
	})

	t.Run("java", func(t *testing.T) {
		const topic, n = "tls-java", 100
		props := testcerts.Write(t, t.TempDir(), "client.properties", []byte(fmt.Sprintf(`security.protocol=SSL
ssl.truststore.type=PEM
ssl.truststore.location=%s
ssl.keystore.type=PEM
ssl.keystore.location=%s
`, ca.File, client.KeystoreFile)))
		JavaTool(t, "kafka-topics", "--bootstrap-server", ssl, "--command-config", props, "--create", "--topic", topic, "--partitions", "1")
		if res := JavaTool(t, "kafka-topics", "--bootstrap-server", ssl, "--command-config", props, "--list"); !strings.Contains(res.Stdout, topic) {
			t.Fatalf("kafka-topics --list over SSL:\n%s", res.Stdout)
		}
		var in strings.Builder
		for i := range n {
			fmt.Fprintf(&in, "java-%d\n", i)
		}
		if _, err := RunJavaTool(t, Cmd{Stdin: strings.NewReader(in.String())}, "kafka-console-producer",
			"--bootstrap-server", ssl, "--topic", topic, "--command-config", props, "--producer-property", "acks=all"); err != nil {
			t.Fatalf("console producer over SSL: %v", err)
		}
		res := JavaTool(t, "kafka-console-consumer", "--bootstrap-server", ssl, "--command-config", props,
			"--topic", topic, "--partition", "0", "--offset", "earliest", "--max-messages", strconv.Itoa(n), "--timeout-ms", "60000")
		if got := strings.Join(res.Lines(), "\n"); got != strings.TrimSpace(in.String()) {
			t.Fatalf("console consumer over SSL read:\n%s", got)
		}
	})
}
