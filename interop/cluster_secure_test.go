package interop

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/verbatim-kafka/verbatim/internal/testcerts"
)

// TestVerbatimClusterSecured: three brokers whose inter-broker listener is
// SASL_SSL (PLAIN as User:broker, the listener's truststore and keystore
// as the brokers' client side) with the authorizer on and only User:broker
// a super user; clients use a PLAINTEXT listener as User:ANONYMOUS,
// granted topic, group and cluster rights but not CLUSTER_ACTION. acks=all
// with min.insync.replicas=2 completes (the followers replicate over
// SASL_SSL as brokers), survives the SIGKILL of the leader, and a
// consumer in a follower's rack (KIP-392, RackAwareReplicaSelector) reads
// every acknowledged record from that follower.
func TestVerbatimClusterSecured(t *testing.T) {
	bin := BuildVerbatim(t)
	ca := testcerts.NewCA(t)
	pair := ca.Server(t, "broker")
	c := StartVCluster(t, bin, 3, VClusterOptions{Props: append(securedClusterProps(ca, pair),
		"broker.rack=rack-{node}",
		"replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector",
		"broker.session.timeout.ms=3000",
		"replica.lag.time.max.ms=5000",
	)})
	cl := verbatimClient(t, c.Bootstrap())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	grantAnonymous(t, ctx, c, ca)

	const topic, n = "secured", 300
	createTopicRF(t, kadm.NewClient(cl), topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
	view := waitInSync(t, c, cl, topic, 1, 3)
	leader := view[0].leader
	pcl := verbatimClient(t, c.Bootstrap(), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(60*time.Second))
	produce := func(from, to int) {
		t.Helper()
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("secured-%04d", i))})
		}
		if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("acks=all produce of records %d-%d: %v", from, to-1, err)
		}
	}
	produce(0, n/2)
	c.Kill(t, leader)
	produce(n/2, n) // after the failover to an in-sync follower
	c.Restart(t, leader)
	after := waitInSync(t, c, cl, topic, 1, 3)
	if after[0].epoch <= view[0].epoch {
		t.Fatalf("leader epoch %d after killing leader %d, was %d", after[0].epoch, leader, view[0].epoch)
	}

	// A consumer in the rack of a follower reads from it.
	var follower int32 = -1
	for _, r := range after[0].replicas {
		if r != after[0].leader {
			follower = r
			break
		}
	}
	before := fetchConsumerRequests(t, c.Node(t, follower))
	ccl := verbatimClient(t, c.Bootstrap(), kgo.Rack(fmt.Sprintf("rack-%d", follower)),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	for got := 0; got < n; {
		fs := ccl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", got, n)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if want := fmt.Sprintf("secured-%04d", got); string(r.Value) != want || r.Offset != int64(got) {
				t.Fatalf("record %d: offset %d value %q, want %q", got, r.Offset, r.Value, want)
			}
			got++
		})
	}
	// A fetch is counted once its answer is written, which the consumer
	// may have read first; its next long poll (at most kgo's 5 s
	// FetchMaxWait) is counted too.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got := fetchConsumerRequests(t, c.Node(t, follower))
		if got > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("follower %d answered no consumer fetch (FetchConsumer %v before, %v after): the consumer in its rack read from the leader", follower, before, got)
		}
	}
}

// securedClusterProps are the props of a cluster whose inter-broker
// listener BROKER is SASL_SSL (PLAIN as User:broker, pair's keystore and
// ca's truststore, also the brokers' client side) beside a PLAINTEXT
// listener for clients (User:ANONYMOUS), with the authorizer on, only
// User:broker a super user and no ACL meaning no access.
func securedClusterProps(ca *testcerts.CA, pair testcerts.Pair) []string {
	jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" user_broker="broker-secret";`
	return []string{
		"listeners=PLAINTEXT://127.0.0.1:{kafka},BROKER://127.0.0.1:{port:broker}",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,BROKER:SASL_SSL",
		"inter.broker.listener.name=BROKER",
		"sasl.mechanism.inter.broker.protocol=PLAIN",
		"listener.name.broker.sasl.enabled.mechanisms=PLAIN",
		"listener.name.broker.plain.sasl.jaas.config=" + jaas,
		"listener.name.broker.ssl.keystore.type=PEM",
		"listener.name.broker.ssl.keystore.location=" + pair.KeystoreFile,
		"listener.name.broker.ssl.truststore.type=PEM",
		"listener.name.broker.ssl.truststore.location=" + ca.File,
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:broker",
		"allow.everyone.if.no.acl.found=false",
	}
}

// grantAnonymous gives User:ANONYMOUS (the PLAINTEXT listener's clients)
// every right on topics and groups and CREATE, DESCRIBE and
// IDEMPOTENT_WRITE on the cluster, on every broker.
func grantAnonymous(t *testing.T, ctx context.Context, c *VCluster, ca *testcerts.CA) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	add := func(rt kmsg.ACLResourceType, name string, op kmsg.ACLOperation) {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = rt, name, kmsg.ACLResourcePatternTypeLiteral
		cr.Principal, cr.Host, cr.Operation, cr.PermissionType = "User:ANONYMOUS", "*", op, kmsg.ACLPermissionTypeAllow
		req.Creations = append(req.Creations, cr)
	}
	add(kmsg.ACLResourceTypeTopic, "*", kmsg.ACLOperationAll)
	add(kmsg.ACLResourceTypeGroup, "*", kmsg.ACLOperationAll)
	for _, op := range []kmsg.ACLOperation{kmsg.ACLOperationCreate, kmsg.ACLOperationDescribe, kmsg.ACLOperationIdempotentWrite} {
		add(kmsg.ACLResourceTypeCluster, "kafka-cluster", op)
	}
	createACLsEverywhere(t, ctx, c, ca, req)
}

// createACLsEverywhere sends req to every broker as User:broker, the super
// user, over the inter-broker listener (only a super user may grant the
// first ACLs), and wants every creation to succeed.
func createACLsEverywhere(t *testing.T, ctx context.Context, c *VCluster, ca *testcerts.CA, req *kmsg.CreateACLsRequest) {
	t.Helper()
	bcl := brokerListenerClient(t, c, ca)
	// The client addresses a broker by id only once a metadata answer
	// named it ("unknown broker" before; kgo takes the brokers from a
	// Metadata request issued through it): ask until every node is named.
	for deadline := time.Now().Add(30 * time.Second); ; {
		named := 0
		if resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, bcl); err == nil {
			ids := map[int32]bool{}
			for _, b := range resp.Brokers {
				ids[b.NodeID] = true
			}
			for _, nd := range c.Nodes {
				if ids[nd.ID] {
					named++
				}
			}
		}
		if named == len(c.Nodes) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Metadata over the BROKER listener named %d of %d brokers within 30 s", named, len(c.Nodes))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, nd := range c.Nodes {
		resp, err := req.RequestWith(ctx, bcl.Broker(int(nd.ID)))
		if err != nil {
			t.Fatalf("CreateAcls on node %d: %v", nd.ID, err)
		}
		for _, r := range resp.Results {
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				t.Fatalf("CreateAcls on node %d: %v", nd.ID, err)
			}
		}
	}
}

// brokerListenerClient is a client of the BROKER listeners as User:broker.
func brokerListenerClient(t *testing.T, c *VCluster, ca *testcerts.CA) *kgo.Client {
	t.Helper()
	var seeds []string
	re := regexp.MustCompile(`BROKER://([0-9.]+:[0-9]+)`)
	for _, nd := range c.Nodes {
		b, err := os.ReadFile(filepath.Join(nd.Dir, "server.properties"))
		if err != nil {
			t.Fatal(err)
		}
		m := re.FindAllSubmatch(b, -1)
		if len(m) == 0 {
			t.Fatalf("node %d has no BROKER listener", nd.ID)
		}
		seeds = append(seeds, string(m[len(m)-1][1]))
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return verbatimClient(t, strings.Join(seeds, ","),
		kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}),
		kgo.SASL(plain.Auth{User: "broker", Pass: "broker-secret"}.AsMechanism()))
}

// fetchConsumerRequests is the node's count of consumer fetches
// (kafka_network_requestmetrics_requests_total{request="FetchConsumer"}).
func fetchConsumerRequests(t *testing.T, nd VNode) float64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(nd.Dir, "server.properties"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^metrics.listen=(\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("node %d has no metrics.listen", nd.ID)
	}
	resp, err := http.Get("http://" + string(m[1]) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "kafka_network_requestmetrics_requests_total{") && strings.Contains(l, `request="FetchConsumer"`) {
			f := strings.Fields(l)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatalf("metrics line %q: %v", l, err)
			}
			return v
		}
	}
	return 0
}
