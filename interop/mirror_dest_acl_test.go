package interop

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/internal/testcerts"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
	"github.com/verbatim-kafka/verbatim/mirror"
)

// secureDest is a Verbatim served by the binary from a server.properties
// with a PLAINTEXT listener (loopback administration: User:ANONYMOUS is a
// super user) and a SASL_SSL listener with SCRAM-SHA-512, the authorizer
// on.
type secureDest struct {
	plain, secure string
	caFile        string
}

func startSecureDest(t *testing.T, bin string, users map[string]string) *secureDest {
	t.Helper()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	FormatSCRAM(t, bin, data, users)
	ca := testcerts.NewCA(t)
	leaf := ca.Server(t, "verbatim-dest")
	ks := testcerts.Write(t, dir, "keystore.pem", leaf.KeystorePEM())
	ports := FreePorts(t, 2)
	d := &secureDest{plain: Addr(ports[0]), secure: Addr(ports[1]), caFile: ca.File}
	props := []string{
		"listeners=PLAINTEXT://" + d.plain + ",SASL_SSL://" + d.secure,
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
		"listener.name.sasl_ssl.ssl.keystore.type=PEM",
		"listener.name.sasl_ssl.ssl.keystore.location=" + ks,
		"sasl.enabled.mechanisms=SCRAM-SHA-512",
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:ANONYMOUS",
	}
	ServeConfig(t, bin, dir, props, []string{d.plain, d.secure}, "--data-dir", data)
	return d
}

func (d *secureDest) clientProps(t *testing.T, user, password string) string {
	t.Helper()
	return testcerts.Write(t, t.TempDir(), "dest.properties", []byte(strings.Join([]string{
		"security.protocol=SASL_SSL",
		"ssl.truststore.type=PEM",
		"ssl.truststore.location=" + d.caFile,
		"sasl.mechanism=SCRAM-SHA-512",
		fmt.Sprintf(`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="%s";`, user, password),
	}, "\n")+"\n"))
}

// TestMirrorIntoSecuredVerbatim: the destination is a Verbatim with
// SASL_SSL (SCRAM-SHA-512) and ACLs. A principal with WRITE on the topic,
// even --operation All, but no CLUSTER_ACTION is refused the writer
// registration (so the push), a mirror produce, the log-start forward and
// the stop with CLUSTER_AUTHORIZATION_FAILED; once CLUSTER_ACTION is
// granted the push is exact (verify with both config files exits 0), a
// client-chosen writer epoch is still refused (INVALID_PRODUCER_EPOCH),
// and the stop succeeds.
func TestMirrorIntoSecuredVerbatim(t *testing.T) {
	bin := BuildVerbatim(t)
	src := startSecureSource(t, map[string]string{"mirror": "mirror-secret"})
	dst := startSecureDest(t, bin, map[string]string{"pusher": "pusher-secret"})
	const topic = "guarded"
	src.k.CreateTopic(t, topic, 1, 1, nil)
	produceSync(t, src.k.Client(t), keyed(topic, 30, "g")...)
	srcCfg, dstCfg := src.clientProps(t, "mirror", "mirror-secret"), dst.clientProps(t, "pusher", "pusher-secret")
	acls := func(args ...string) {
		t.Helper()
		JavaTool(t, "kafka-acls", append([]string{"--bootstrap-server", dst.plain}, args...)...)
	}
	acls("--add", "--allow-principal", "User:pusher", "--operation", "All", "--topic", "guard", "--resource-pattern-type", "prefixed")
	// The topic exists already (created by an administrator), so only
	// the mirror permission is missing.
	createMirrorTopic(t, dst.plain, topic)

	push := []string{bin, "mirror", "push", "--source", src.k.Nodes[0].SecureAddr, "--source-config", srcCfg,
		"--dest", dst.secure, "--dest-config", dstCfg, "--topics", topic, "--log-format", "json"}
	r, _ := RunTool(t, Cmd{Timeout: time.Minute}, push...)
	if r.ExitCode != 1 || !strings.Contains(r.Stderr, "CLUSTER_AUTHORIZATION_FAILED") || strings.Contains(r.Stderr, "pusher-secret") {
		t.Fatalf("push without CLUSTER_ACTION: exit %d\n%s", r.ExitCode, tail(r.Stderr, 10))
	}
	t.Logf("push without CLUSTER_ACTION: exit 1: %s", tail(r.Stderr, 1))
	o, err := client.ReadConfig(dstCfg)
	if err != nil {
		t.Fatal(err)
	}
	cn, err := client.Dial(context.Background(), dst.secure, o)
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close()
	if code := forgedProduce(t, cn, topic, 0); code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("a mirror produce without CLUSTER_ACTION: %v", kerr.ErrorForCode(code))
	}
	fwd := mirror.DeleteRecordsRequest(mirror.Writer{Epoch: 0}, map[string][]int32{topic: {0}}, 0)
	if resp, err := cn.Request(context.Background(), fwd, 2); err != nil || resp.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("a log-start forward without CLUSTER_ACTION: %v %+v", err, resp)
	}
	stop := []string{bin, "mirror", "stop", "--dest", dst.secure, "--dest-config", dstCfg, "--topics", topic}
	if r, _ := RunTool(t, Cmd{Timeout: time.Minute}, stop...); r.ExitCode == 0 || !strings.Contains(r.Stdout+r.Stderr, "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("stop without CLUSTER_ACTION: exit %d\n%s%s", r.ExitCode, r.Stdout, r.Stderr)
	} else {
		t.Logf("stop without CLUSTER_ACTION: exit %d: %s", r.ExitCode, tail(r.Stdout+r.Stderr, 1))
	}

	acls("--add", "--allow-principal", "User:pusher", "--operation", "ClusterAction", "--cluster")
	if r, _ := RunTool(t, Cmd{Timeout: time.Minute}, push...); r.ExitCode != 0 {
		t.Fatalf("push with CLUSTER_ACTION: exit %d\n%s", r.ExitCode, tail(r.Stderr, 20))
	}
	vr, _ := RunTool(t, Cmd{Timeout: time.Minute}, bin, "verify", "--source", src.k.Nodes[0].SecureAddr, "--source-config", srcCfg,
		"--dest", dst.secure, "--dest-config", dstCfg, "--topics", topic)
	if vr.ExitCode != 0 {
		t.Fatalf("verify with both config files: exit %d\n%s\n%s", vr.ExitCode, vr.Stdout, vr.Stderr)
	}
	if code := forgedProduce(t, cn, topic, math.MaxInt32); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("a client-chosen writer epoch with CLUSTER_ACTION: %v", kerr.ErrorForCode(code))
	}
	if r, _ := RunTool(t, Cmd{Timeout: time.Minute}, stop...); r.ExitCode != 0 {
		t.Fatalf("stop with CLUSTER_ACTION: exit %d\n%s%s", r.ExitCode, r.Stdout, r.Stderr)
	}
}

// createMirrorTopic creates topic (one partition, mirror.mode=push) on the
// PLAINTEXT listener at addr.
func createMirrorTopic(t *testing.T, addr, topic string) {
	t.Helper()
	cn, err := client.Dial(context.Background(), addr, client.Options{ClientID: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, -1
	c := kmsg.NewCreateTopicsRequestTopicConfig()
	c.Name, c.Value = "mirror.mode", kmsg.StringPtr("push")
	rt.Configs = append(rt.Configs, c)
	req.Topics = append(req.Topics, rt)
	resp, err := cn.Request(context.Background(), req, -1)
	if err != nil || resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode != 0 {
		t.Fatalf("creating %s: %v %+v", topic, err, resp)
	}
}

// forgedProduce sends a mirror produce of one batch at offset 100 (a gap)
// with writer epoch epoch and returns the partition's error code.
func forgedProduce(t *testing.T, cn *client.Conn, topic string, epoch int32) int16 {
	t.Helper()
	b := kbatchtest.Encode(t, kbatch.NewBatch(time.Now().UnixMilli(), kbatch.Record{Value: []byte("forged")}))
	kbatch.SetBaseOffset(b, 100)
	req := mirrorProduceReq(topic, [16]byte{}, epoch, b, 100)
	resp, err := cn.Request(context.Background(), req, 11)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
}
