package broker

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/verbatim-kafka/verbatim/authn"
	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/clustermeta"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// TestMirrorStatusOverSASLInterBroker: on a cluster with SASL and the
// authorizer, the leaders are asked over the inter-broker client as the
// brokers' principal: without its CLUSTER_ACTION the leader refuses and
// the row says so; with it, alice (DESCRIBE only) gets the leader's row.
func TestMirrorStatusOverSASLInterBroker(t *testing.T) {
	zero := time.Duration(0)
	users := map[string]string{"alice": "alice-secret", "broker": "broker-secret", "admin": "admin-secret"}
	tc := startSecureCluster(t, 2, &Listener{Name: "SASL_PLAINTEXT", Protocol: ProtocolSASLPlaintext}, func(cfg *Config) {
		cfg.Authorizer = true
		cfg.SuperUsers = []string{"User:admin"}
		cfg.SASL = map[string]*SASLListenerConfig{"SASL_PLAINTEXT": {Mechanisms: []string{authn.PLAIN}, PlainUsers: users}}
		cfg.FailedAuthenticationDelay = &zero
	})
	views := map[int32]viewLinks{
		1: {&recLinks{statuses: []wireext.MirrorPartitionStatus{mirrorStatus("m", "", wireext.StateMirroring, "", -1, 0)}}},
		2: {&recLinks{statuses: []wireext.MirrorPartitionStatus{mirrorStatus("m", "", wireext.StateMirroring, "", 15, 5)}}},
	}
	for id, b := range tc.brokers {
		b.srv.SetInterBrokerClient(client.Options{SASL: plainMech("broker", users["broker"])})
		b.srv.SetLinkService(views[id])
	}
	id := [16]byte{7, 'm'}
	if _, _, err := tc.store.CreateTopic(ctxT(t), clustermeta.TopicRecord{Name: "m", ID: id, Partitions: 1},
		[]clustermeta.PartitionState{{Topic: "m", TopicID: id, Partition: 0, Replicas: []int32{2, 1}, ISR: []int32{2, 1}, Leader: 2}}); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(tc.brokers[1].saslClient(plainMech("admin", users["admin"])))
	grantACL := func(b *kadm.ACLBuilder) {
		t.Helper()
		res, err := adm.CreateACLs(ctxT(t), b.AllowHosts("*").ResourcePatternType(kadm.ACLPatternLiteral))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		tc.awaitCurrent()
	}
	grantACL(kadm.NewACLs().Allow("User:alice").Clusters().Operations(kadm.OpDescribe))
	grantACL(kadm.NewACLs().Allow("User:alice").Topics("m").Operations(kadm.OpDescribe))

	status := func() wireext.MirrorPartitionStatus {
		t.Helper()
		cn, err := client.Dial(ctxT(t), tc.brokers[1].addr, client.Options{SASL: plainMech("alice", users["alice"])})
		if err != nil {
			t.Fatal(err)
		}
		defer cn.Close()
		body, err := cn.RequestRaw(ctxT(t), &client.RawRequest{APIKey: wireext.APIKeyDescribeMirrors, Flexible: true, Body: (&wireext.DescribeMirrorsRequest{}).AppendTo(nil)})
		if err != nil {
			t.Fatal(err)
		}
		var resp wireext.DescribeMirrorsResponse
		if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != 0 || len(resp.Partitions) != 1 {
			t.Fatalf("alice's DescribeMirrors: %v %d %q %+v", err, resp.ErrorCode, resp.ErrorMessage, resp.Partitions)
		}
		return resp.Partitions[0]
	}
	if st := status(); st.SourceHighWatermark != -1 || !strings.Contains(st.Reason, "leader broker 2 did not answer") || !strings.Contains(st.Reason, "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("the leader asked by a broker without CLUSTER_ACTION: %+v", st)
	}
	grantACL(kadm.NewACLs().Allow("User:broker").Clusters().Operations(kadm.OpClusterAction))
	if st := status(); st != views[2].statuses[0] {
		t.Fatalf("with the brokers' CLUSTER_ACTION answered %+v, want broker 2's %+v", st, views[2].statuses[0])
	}
	// The refused request never reached broker 2's manager.
	if got := views[2].took(); len(got) != 1 || got[0] != "describe mirrors  [m] leader-only=true" {
		t.Fatalf("broker 2's manager was asked %q", got)
	}
}
