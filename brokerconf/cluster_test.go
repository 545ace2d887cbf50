package brokerconf

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/clustermeta"
	"github.com/verbatim-kafka/verbatim/replica"
)

func loadCluster(t *testing.T, text string, overrides ...string) (broker.Config, *Cluster, []string, error) {
	t.Helper()
	p := parse(t, text)
	cfg, _, err := Load(p, overrides)
	if err != nil {
		return cfg, nil, nil, err
	}
	c, w, err := LoadCluster(&cfg, p, overrides)
	return cfg, c, w, err
}

func TestClusterEmbeddedMember(t *testing.T) {
	_, c, w, err := loadCluster(t, `node.id=2
listeners=PLAINTEXT://127.0.0.1:19092,INTERNAL://127.0.0.1:19093
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT
inter.broker.listener.name=internal
broker.rack=r2
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
replica.lag.time.max.ms=5000
broker.session.timeout.ms=4000
unclean.leader.election.enable=true
num.replica.fetchers=2
replica.fetch.max.bytes=65536
replica.fetch.response.max.bytes=1048576
replica.fetch.wait.max.ms=100
metadata.etcd.embed.dir=/tmp/etcd-2
metadata.etcd.embed.client.url=http://127.0.0.1:12379
metadata.etcd.embed.peer.url=http://127.0.0.1:12380
metadata.etcd.embed.initial.cluster=node-1=http://127.0.0.1:12370, node-2=http://127.0.0.1:12380
metadata.etcd.prefix=/vb
`)
	if err != nil || len(w) != 0 {
		t.Fatalf("LoadCluster: %v %q", err, w)
	}
	want := broker.ClusterConfig{Rack: "r2", InterBrokerListener: "INTERNAL", DefaultReplicationFactor: 3,
		InternalReplicationFactor: 3, MinInsyncReplicas: 2, UncleanLeaderElection: true,
		ReplicaLagTimeMax: 5 * time.Second, SessionTimeout: 4 * time.Second, NumReplicaFetchers: 2, ControlledShutdown: true}
	if !reflect.DeepEqual(c.Broker, want) {
		t.Errorf("Broker = %+v\nwant %+v", c.Broker, want)
	}
	if e := c.Embed; e == nil || *e != (clustermeta.EmbedConfig{Name: "node-2", Dir: "/tmp/etcd-2", ClientURL: "http://127.0.0.1:12379",
		PeerURL: "http://127.0.0.1:12380", InitialCluster: "node-1=http://127.0.0.1:12370,node-2=http://127.0.0.1:12380"}) {
		t.Errorf("Embed = %+v", c.Embed)
	}
	if !reflect.DeepEqual(c.Etcd.Endpoints, []string{"http://127.0.0.1:12379"}) || c.Etcd.Prefix != "/vb/" {
		t.Errorf("Etcd = %+v: want the member's client URL and the prefix with its slash", c.Etcd)
	}
	f := c.Fetch
	if f.Fetchers != 2 || f.PartitionMaxBytes != 65536 || f.MaxBytes != 1<<20 || f.MaxWaitMs != 100 || f.MinBytes != 0 {
		t.Errorf("Fetch = %+v", f)
	}
}

func TestClusterExternalEtcdDefaults(t *testing.T) {
	_, c, _, err := loadCluster(t, "metadata.etcd.endpoints=http://10.0.0.1:2379,http://10.0.0.2:2379\n", "controlled.shutdown.enable=false")
	if err != nil {
		t.Fatal(err)
	}
	if c.Embed != nil || len(c.Etcd.Endpoints) != 2 || c.Etcd.Prefix != "/verbatim/" {
		t.Errorf("Etcd %+v Embed %+v", c.Etcd, c.Embed)
	}
	// Unset: the components' defaults (zero values) apply; controlled
	// shutdown off as overridden.
	if !reflect.DeepEqual(c.Broker, broker.ClusterConfig{}) || !reflect.DeepEqual(c.Fetch, replica.Config{}) {
		t.Errorf("Broker = %+v, Fetch = %+v: want zero values", c.Broker, c.Fetch)
	}
	if _, c, _, _ := loadCluster(t, "metadata.etcd.endpoints=http://10.0.0.1:2379\n"); !c.Broker.ControlledShutdown {
		t.Errorf("controlled.shutdown.enable defaults to false, want Kafka's true")
	}
}

// Without metadata.etcd.* the broker is today's single node: no cluster,
// and the cluster settings given are named as without effect.
func TestClusterSingleNodeUnchanged(t *testing.T) {
	_, c, w, err := loadCluster(t, "inter.broker.listener.name=PLAINTEXT\nmin.insync.replicas=2\n")
	if err != nil || c != nil {
		t.Fatalf("LoadCluster = %+v, %v; want nil, nil", c, err)
	}
	if len(w) != 1 || !strings.Contains(w[0], "min.insync.replicas") || strings.Contains(w[0], "inter.broker") {
		t.Errorf("warnings %q", w)
	}
	if _, c, w, err := loadCluster(t, "node.id=1\n"); c != nil || err != nil || len(w) != 0 {
		t.Errorf("plain file: %+v %q %v", c, w, err)
	}
}

func TestClusterRefusals(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"metadata.etcd.prefix=/x/\n", "neither metadata.etcd.endpoints"},
		{"metadata.etcd.embed.dir=/d\n", "needs metadata.etcd.embed.dir, metadata.etcd.embed.client.url"},
		{"metadata.etcd.endpoints=127.0.0.1:2379\n", "http:// or https:// URL"},
		{"metadata.etcd.endpoints=http://a:1\ninter.broker.listener.name=INTERNAL\n", "INTERNAL is not a listener"},
		{"metadata.etcd.endpoints=http://a:1\noffsets.topic.replication.factor=3\ntransaction.state.log.replication.factor=2\n", "differ"},
		{"node.id=4\nmetadata.etcd.embed.dir=/d\nmetadata.etcd.embed.client.url=http://a:1\nmetadata.etcd.embed.peer.url=http://a:2\nmetadata.etcd.embed.initial.cluster=node-1=http://b:2\n", "does not list this member (node-4"},
		{"metadata.etcd.endpoints=http://a:1\nbroker.session.timeout.ms=500\n", "at least 1000"},
		{"min.insync.replicas=0\n", "min.insync.replicas"},
		{"num.replica.fetchers=x\n", "num.replica.fetchers"},
	} {
		_, _, _, err := loadCluster(t, tc.text)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want it to say %q", tc.text, err, tc.want)
		}
	}
}
