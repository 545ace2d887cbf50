package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/internal/testcerts"
)

// secureSource is a Kafka 4.4 whose SASL_SSL listener (SCRAM-SHA-512,
// PEM stores generated now) the mirroring tools reach through a client
// properties file; the data is written through its PLAINTEXT listener.
type secureSource struct {
	k      *Kafka
	caFile string
}

// reauthMs is the source's connections.max.reauth.ms: sessions last 3 s,
// so a following pusher must re-authenticate (KIP-368) to keep its
// connections.
const reauthMs = 3000

func startSecureSource(t *testing.T, users map[string]string) *secureSource {
	t.Helper()
	ca := testcerts.NewCA(t)
	leaf := ca.Server(t, "kafka-source")
	k := StartKafka(t, KafkaOptions{Props: map[string]string{"connections.max.reauth.ms": fmt.Sprint(reauthMs)},
		SASLSSL: &SASLSSLOptions{KeystorePEM: leaf.KeystorePEM(), TruststorePEM: ca.CertPEM, Users: users}})
	return &secureSource{k: k, caFile: ca.File}
}

// clientProps writes a client.properties for the SASL_SSL listener as
// user with password.
func (s *secureSource) clientProps(t *testing.T, user, password string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "source.properties")
	lines := []string{
		"security.protocol=SASL_SSL",
		"ssl.truststore.type=PEM",
		"ssl.truststore.location=" + s.caFile,
		"sasl.mechanism=SCRAM-SHA-512",
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \`,
		fmt.Sprintf(`    username="%s" password="%s";`, user, password),
		"request.timeout.ms=30000",
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMirrorFromSecuredKafka: a Kafka 4.4 source that requires SASL_SSL
// with SCRAM-SHA-512 is mirrored with --source-config (transactional and
// idempotent data, two codecs) into Verbatim, and verify
// --source-config proves the copy exact (exit 0). A --follow pusher keeps
// copying across several of the source's 3-second SASL sessions without
// losing a connection (it re-authenticates on them, KIP-368). A wrong
// password is exit 2 at once, with Kafka's authentication failure message
// and the password in no output.
func TestMirrorFromSecuredKafka(t *testing.T) {
	bin := BuildVerbatim(t)
	src := startSecureSource(t, map[string]string{"mirror": "mirror-secret"})
	v := StartVerbatim(t, bin, VerbatimOptions{})
	addr := src.k.Nodes[0].SecureAddr

	const topic = "secured"
	src.k.CreateTopic(t, topic, 2, 1, nil)
	for _, c := range []kgo.CompressionCodec{kgo.ZstdCompression(), kgo.GzipCompression()} {
		produceSync(t, src.k.Client(t, kgo.ProducerBatchCompression(c)), keyed(topic, 40, "idem")...)
	}
	tx := src.k.Client(t, kgo.TransactionalID("secured-txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	for i, commit := range []bool{true, false} {
		produceTxn(t, tx, topic, fmt.Sprintf("txn%d", i), commit)
	}

	good := src.clientProps(t, "mirror", "mirror-secret")
	res := runPush(t, bin, addr, v.Addr, 0, "--topics", topic, "--create-topics", "--source-config", good)
	if strings.Contains(res.Stdout+res.Stderr, "mirror-secret") {
		t.Fatalf("the password appears in the push output:\n%s", res.Stderr)
	}
	vr, _ := RunTool(t, Cmd{Timeout: 2 * time.Minute}, bin, "verify", "--source", addr, "--source-config", good, "--dest", v.Addr, "--topics", topic)
	if vr.ExitCode != 0 || !strings.Contains(vr.Stdout, "identical") {
		t.Fatalf("verify --source-config: exit %d\n%s\n%s", vr.ExitCode, vr.Stdout, vr.Stderr)
	}

	// Following across session lifetimes: every connection must
	// re-authenticate in place; Kafka closes one that does not at its
	// next request after the expiry, which the pusher would log (debug:
	// "source fetch failed" with EOF, or a retry).
	logPath := filepath.Join(t.TempDir(), "follow.log")
	follow := StartProc(t, "mirror-follow", logPath, filepath.Dir(logPath), nil, bin, "mirror", "push", "--source", addr, "--source-config", good,
		"--dest", v.Addr, "--topics", topic, "--follow", "--log-format", "json", "--log-level", "debug")
	cl := src.k.Client(t)
	for round := 0; round < 4; round++ {
		time.Sleep(reauthMs * time.Millisecond / 2)
		produceSync(t, cl, keyed(topic, 20, fmt.Sprintf("follow%d", round))...)
	}
	waitCaughtUp(t, src.k.Bootstrap(), v.Addr, topic)
	if !follow.Stop(30*time.Second) || follow.ExitCode() != 0 {
		t.Fatalf("the following pusher: exit %d\n%s", follow.ExitCode(), follow.LogTail(30))
	}
	flog, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(flog), `"msg":"retrying"`) || strings.Contains(string(flog), `"msg":"source fetch failed`) || strings.Contains(string(flog), "mirror-secret") {
		t.Fatalf("the following pusher lost a connection (or printed the password):\n%s", tail(string(flog), 30))
	}
	if vr, _ := RunTool(t, Cmd{Timeout: 2 * time.Minute}, bin, "verify", "--source", addr, "--source-config", good, "--dest", v.Addr, "--topics", topic); vr.ExitCode != 0 {
		t.Fatalf("verify after following: exit %d\n%s\n%s", vr.ExitCode, vr.Stdout, vr.Stderr)
	}

	bad := src.clientProps(t, "mirror", "not-the-secret")
	for _, argv := range [][]string{
		{bin, "mirror", "push", "--source", addr, "--source-config", bad, "--dest", v.Addr, "--topics", topic, "--log-format", "json"},
		{bin, "verify", "--source", addr, "--source-config", bad, "--dest", v.Addr, "--topics", topic},
	} {
		r, _ := RunTool(t, Cmd{Timeout: time.Minute}, argv...)
		out := r.Stdout + r.Stderr
		if r.ExitCode != 2 || !strings.Contains(out, "SASL_AUTHENTICATION_FAILED") || !strings.Contains(out, "invalid credentials") ||
			strings.Contains(out, "not-the-secret") || r.Elapsed > 30*time.Second {
			t.Fatalf("%s with a wrong password: exit %d after %v\n%s", argv[1], r.ExitCode, r.Elapsed, out)
		}
		t.Logf("%s with a wrong password: exit 2 after %v: %s", argv[1], r.Elapsed.Round(time.Millisecond), tail(r.Stderr, 1))
	}
}

// waitCaughtUp waits until every partition of topic ends on dst where it
// ends on src.
func waitCaughtUp(t *testing.T, src, dst, topic string) {
	t.Helper()
	ends := func(addr string) map[int32]int64 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		lo, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
		if err != nil {
			return nil
		}
		out := map[int32]int64{}
		lo.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
		return out
	}
	want := ends(src)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		got := ends(dst)
		same := len(got) == len(want) && len(want) > 0
		for p, o := range want {
			same = same && got[p] == o
		}
		if same {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the destination ends at %v, the source at %v", got, want)
		}
	}
}
