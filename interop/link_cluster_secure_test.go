package interop

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/internal/testcerts"
)

// TestLinkIntoSecuredVerbatimCluster runs a cluster link from Apache
// Kafka 4.4 into three Verbatim brokers whose inter-broker listener is
// SASL_SSL, with the authorizer on and only User:broker a super user
// (securedClusterProps). Clients use the PLAINTEXT listener as
// User:ANONYMOUS with every right on topics and groups. Creating a link
// is an admin action of its own: without ALTER on the cluster,
// `link create` is refused with CLUSTER_AUTHORIZATION_FAILED and nothing
// is created. Once ALTER is granted, the same command through one broker
// creates the link. Its mirror topic gets replication factor 3 and
// reaches MIRRORING while the source grows (idempotent batches in two
// codecs, transactions with aborts). The leaders' in-process appends
// replicate to the followers over SASL_SSL: every replica holds the same
// bytes, and `verify` through the client listener is exact. Then
// `mirror stop` by the same client fails the topic over.
func TestLinkIntoSecuredVerbatimCluster(t *testing.T) {
	bin := BuildVerbatim(t)
	k := StartKafka(t, KafkaOptions{})
	ca := testcerts.NewCA(t)
	c := startMirrorVCluster(t, bin, append(securedClusterProps(ca, ca.Server(t, "broker")), "default.replication.factor=3")...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	grantAnonymous(t, ctx, c, ca)

	src, dst := k.Bootstrap(), c.Bootstrap()
	const topic, link, parts = "ls-orders", "ls", 2
	gen := startLinkSourceTopic(t, k, topic, parts, 3)

	// Topic rights are not enough to create a link.
	n1, n2 := c.Nodes[0].Addr, c.Nodes[1].Addr
	create := []string{bin, "link", "create", link, "--dest", n1, "--source", src, "--topics", "ls-.*", "--sync-interval", "1s"}
	res, _ := RunTool(t, Cmd{Timeout: time.Minute}, create...)
	if res.ExitCode == 0 || !strings.Contains(res.Stdout+res.Stderr, "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("link create without ALTER on the cluster: exit %d, want a refusal naming CLUSTER_AUTHORIZATION_FAILED\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	var ls []struct {
		Name string `json:"name"`
	}
	out := linkCLI(t, bin, "link", "list", "--dest", n2, "--json").Stdout
	if err := json.Unmarshal([]byte(out), &ls); err != nil || len(ls) != 0 {
		t.Fatalf("link list after the refused create: %s (%v), want no link", out, err)
	}

	// ALTER on the cluster: the link is created and runs.
	req := kmsg.NewPtrCreateACLsRequest()
	cr := kmsg.NewCreateACLsRequestCreation()
	cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLResourcePatternTypeLiteral
	cr.Principal, cr.Host, cr.Operation, cr.PermissionType = "User:ANONYMOUS", "*", kmsg.ACLOperationAlter, kmsg.ACLPermissionTypeAllow
	req.Creations = append(req.Creations, cr)
	createACLsEverywhere(t, ctx, c, ca, req)
	linkCLI(t, bin, create[1:]...)
	dcl := verbatimClient(t, dst)
	waitInSync(t, c, dcl, topic, parts, 3)
	wantTopicConfig(t, dcl, topic, "mirror.mode", "pull")
	waitLinkStates(t, bin, n2, link, topic, parts, "MIRRORING")

	gen.waitRounds(t, gen.rounds()+3)
	gen.stop(t)
	ends := settledSourceEnds(t, src, topic, parts)
	for p := range int32(parts) {
		waitDestExactly(t, dst, topic, p, ends[p])
	}
	t.Logf("source and destination end at %v after %d rounds of writes (%d transactions aborted)", ends, gen.rounds(), gen.aborted())
	verifyExact(t, bin, src, dst, []string{topic})
	for p := range int32(parts) {
		waitReplicasEqual(t, c, topic, p)
	}

	stopUntilDone(t, bin, dst, topic)
	for _, nd := range c.Nodes {
		waitLinkStates(t, bin, nd.Addr, link, topic, parts, "STOPPED")
	}
	// Writable after the stop, by the client, replicated (acks=all).
	wcl := verbatimClient(t, dst, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	produceSync(t, wcl, &kgo.Record{Partition: 0, Value: []byte("after the stop")})
}
