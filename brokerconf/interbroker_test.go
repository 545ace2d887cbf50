package brokerconf

import (
	"fmt"
	"strings"
	"testing"

	"github.com/verbatim-kafka/verbatim/internal/testcerts"
)

// The inter-broker client is the inter-broker listener's security as a
// client: its truststore and keystore, and the mechanism and credentials
// a Kafka broker takes.
func TestInterBrokerClient(t *testing.T) {
	ca := testcerts.NewCA(t)
	dir := t.TempDir()
	ks := testcerts.Write(t, dir, "ks.pem", ca.Server(t, "broker", "127.0.0.1").KeystorePEM())
	ts := testcerts.Write(t, dir, "ts.pem", ca.CertPEM)
	base := fmt.Sprintf(`node.id=1
metadata.etcd.endpoints=http://127.0.0.1:2379
listeners=CLIENT://127.0.0.1:0,BROKER://127.0.0.1:0
listener.security.protocol.map=CLIENT:PLAINTEXT,BROKER:SASL_SSL
listener.name.broker.ssl.keystore.type=PEM
listener.name.broker.ssl.keystore.location=%s
listener.name.broker.ssl.truststore.type=PEM
listener.name.broker.ssl.truststore.location=%s
listener.name.broker.sasl.enabled.mechanisms=PLAIN
listener.name.broker.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret";
`, ks, ts)

	_, c, _, err := loadCluster(t, base+"inter.broker.listener.name=BROKER\nsasl.mechanism.inter.broker.protocol=PLAIN\n")
	if err != nil {
		t.Fatal(err)
	}
	ib := c.InterBroker
	if ib.TLS == nil || ib.TLS.RootCAs == nil || len(ib.TLS.Certificates) != 1 || ib.TLS.InsecureSkipVerify {
		t.Fatalf("TLS = %+v: want the listener's truststore and keystore, host names verified", ib.TLS)
	}
	if ib.SASL == nil || ib.SASL.Name() != "PLAIN" {
		t.Fatalf("SASL = %v, want PLAIN", ib.SASL)
	}
	_, msg, err := ib.SASL.Authenticate(t.Context(), "127.0.0.1:1")
	if err != nil || string(msg) != "\x00admin\x00admin-secret" {
		t.Fatalf("PLAIN's first message %q, %v: want the jaas config's username and password", msg, err)
	}

	// The first listener (plaintext) when none is named: no TLS, no SASL.
	if _, c, _, err := loadCluster(t, base); err != nil || c.InterBroker.TLS != nil || c.InterBroker.SASL != nil {
		t.Fatalf("plaintext inter-broker listener: %+v, %v", c, err)
	}

	for _, tc := range []struct{ extra, want string }{
		{"inter.broker.listener.name=BROKER\n", "set sasl.mechanism.inter.broker.protocol"},
		{"inter.broker.listener.name=BROKER\nsasl.mechanism.inter.broker.protocol=SCRAM-SHA-512\n", "needs listener.name.broker.scram-sha-512.sasl.jaas.config"},
		{"inter.broker.listener.name=BROKER\nsasl.mechanism.inter.broker.protocol=GSSAPI\n", "not supported"},
	} {
		_, _, _, err := loadCluster(t, base+tc.extra)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.extra, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "admin-secret") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
}
