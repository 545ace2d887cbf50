package broker

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/internal/testcerts"
	"github.com/verbatim-kafka/verbatim/props"
	"github.com/verbatim-kafka/verbatim/tlsconf"
)

// tlsFixture is a CA, a broker keystore file and its server side.
type tlsFixture struct {
	ca     *testcerts.CA
	ksPath string
	srv    *tlsconf.Server
	// now is the reload clock (advance moves it past the check interval).
	mu  sync.Mutex
	now time.Time
}

func newTLSFixture(t *testing.T, extra ...string) *tlsFixture {
	t.Helper()
	f := &tlsFixture{ca: testcerts.NewCA(t), now: time.Unix(1e9, 0)}
	dir := t.TempDir()
	f.ksPath = testcerts.Write(t, dir, "broker.pem", f.ca.Server(t, "broker").KeystorePEM())
	p := props.New()
	kv := append([]string{"ssl.keystore.type", "PEM", "ssl.keystore.location", f.ksPath,
		"ssl.truststore.type", "PEM", "ssl.truststore.location", testcerts.Write(t, dir, "ca.pem", f.ca.CertPEM)}, extra...)
	for i := 0; i+1 < len(kv); i += 2 {
		p.Set(kv[i], kv[i+1])
	}
	srv, err := tlsconf.NewServer(p, tlsconf.Options{Now: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	return f
}

func (f *tlsFixture) clock() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }
func (f *tlsFixture) advance()         { f.mu.Lock(); f.now = f.now.Add(2 * time.Second); f.mu.Unlock() }

func (f *tlsFixture) client(t *testing.T) *tls.Config {
	t.Helper()
	p := props.New()
	p.Set("security.protocol", "SSL")
	p.Set("ssl.truststore.certificates", string(f.ca.CertPEM))
	p.Set("ssl.truststore.type", "PEM")
	c, err := tlsconf.ClientConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serveListener binds a loopback port for l on b's server.
func serveListener(t *testing.T, b *testBroker, l *Listener) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.srv.ServeListener(ln, l) }()
	t.Cleanup(func() {
		b.stop()
		if err := <-done; err != nil {
			t.Errorf("ServeListener %s: %v", l.Name, err)
		}
	})
	return ln.Addr().String()
}

func metadataBroker(t *testing.T, cl *kgo.Client) string {
	t.Helper()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Brokers) != 1 {
		t.Fatalf("metadata brokers %v", resp.Brokers)
	}
	return net.JoinHostPort(resp.Brokers[0].Host, strconv.Itoa(int(resp.Brokers[0].Port)))
}

func TestTwoListenersPlaintextAndSSL(t *testing.T) {
	f := newTLSFixture(t)
	b := startBroker(t, t.TempDir(), nil)
	ssl := &Listener{Name: "SSL", Protocol: ProtocolSSL, TLS: f.srv.Config(), Principal: f.srv.Principal}
	sslAddr := serveListener(t, b, ssl)
	_, port, _ := net.SplitHostPort(sslAddr)

	tlsClient := b.client(kgo.SeedBrokers(sslAddr), kgo.DialTLSConfig(f.client(t)), kgo.DefaultProduceTopic("secure"))
	admin := kmsg.NewPtrCreateTopicsRequest()
	tp := kmsg.NewCreateTopicsRequestTopic()
	tp.Topic, tp.NumPartitions, tp.ReplicationFactor = "secure", 1, 1
	admin.Topics = append(admin.Topics, tp)
	if _, err := admin.RequestWith(ctxT(t), tlsClient); err != nil {
		t.Fatal(err)
	}
	if got := metadataBroker(t, tlsClient); got != "127.0.0.1:"+port {
		t.Fatalf("Metadata on the SSL listener names %s, want the SSL listener's %s", got, sslAddr)
	}
	if got := metadataBroker(t, b.client()); got != b.addr {
		t.Fatalf("Metadata on the PLAINTEXT listener names %s, want %s", got, b.addr)
	}
	const n = 50
	for i := range n {
		if err := tlsClient.ProduceSync(ctxT(t), &kgo.Record{Value: []byte(fmt.Sprintf("v%d", i))}).FirstErr(); err != nil {
			t.Fatalf("produce over SSL: %v", err)
		}
	}
	consumer := b.client(kgo.SeedBrokers(sslAddr), kgo.DialTLSConfig(f.client(t)), kgo.ConsumeTopics("secure"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < n {
		fs := consumer.PollFetches(ctxT(t))
		if err := fs.Err(); err != nil {
			t.Fatalf("fetch over SSL: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) != fmt.Sprintf("v%d", got) {
				t.Fatalf("record %d is %q", got, r.Value)
			}
			got++
		})
	}
	// FindCoordinator on the SSL connection names the SSL listener too.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "g"
	resp, err := fc.RequestWith(ctxT(t), tlsClient)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Port != int32(mustAtoi(t, port)) && (len(resp.Coordinators) == 0 || resp.Coordinators[0].Port != int32(mustAtoi(t, port))) {
		t.Fatalf("FindCoordinator on the SSL listener: %+v", resp)
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestAdvertisedPerListener(t *testing.T) {
	f := newTLSFixture(t)
	b := startBroker(t, t.TempDir(), nil)
	sslAddr := serveListener(t, b, &Listener{Name: "EXTERNAL", Protocol: ProtocolSSL, TLS: f.srv.Config(), Advertised: "localhost:0"})
	_, port, _ := net.SplitHostPort(sslAddr)
	cl := b.client(kgo.SeedBrokers(sslAddr), kgo.DialTLSConfig(f.client(t)))
	if got := metadataBroker(t, cl); got != "localhost:"+port {
		t.Fatalf("Metadata names %s, want the advertised host with the bound port", got)
	}
	emptyHost := serveListener(t, b, &Listener{Name: "OTHER", Protocol: ProtocolSSL, TLS: f.srv.Config(), Advertised: ":0"})
	cl2 := b.client(kgo.SeedBrokers(emptyHost), kgo.DialTLSConfig(f.client(t)))
	if got := metadataBroker(t, cl2); got != emptyHost {
		t.Fatalf("advertised :0 names %s, want the bound %s", got, emptyHost)
	}
	want := "PLAINTEXT://" + b.addr + ",EXTERNAL://localhost:" + port + ",OTHER://" + emptyHost
	// In the order the listeners started serving (here concurrently).
	sorted := func(s string) string { l := strings.Split(s, ","); slices.Sort(l); return strings.Join(l, ",") }
	if got := b.srv.advertisedListeners(); sorted(got) != sorted(want) {
		t.Fatalf("advertised.listeners %q, want %q", got, want)
	}
	if got, want := b.srv.protocolMap(), "EXTERNAL:SSL,OTHER:SSL,PLAINTEXT:PLAINTEXT"; sorted(got) != want {
		t.Fatalf("listener.security.protocol.map %q, want %q", got, want)
	}
	if got, want := b.srv.boundListeners(), "PLAINTEXT://"+b.addr+",EXTERNAL://"+sslAddr+",OTHER://"+emptyHost; sorted(got) != sorted(want) {
		t.Fatalf("listeners %q, want %q", got, want)
	}
}

func TestServeListenerRefusesInconsistentTLS(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	for _, l := range []*Listener{
		{Name: "SSL", Protocol: ProtocolSSL},
		{Name: "P", Protocol: ProtocolPlaintext, TLS: &tls.Config{}},
		{Name: "X", Protocol: "TLS"},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if err := b.srv.ServeListener(ln, l); err == nil {
			t.Fatalf("listener %+v served", l)
		}
	}
	if _, err := Open(Config{DataDir: t.TempDir(), Listeners: []*Listener{{Name: "SSL", Protocol: ProtocolSSL}}}); err == nil {
		t.Fatal("Open accepted an SSL listener without TLS")
	}
}

// TestTLSBadHandshakes: garbage instead of a ClientHello and a client that
// never finishes its handshake are closed (the latter by the request
// timeout), each counted as a conn-tls-handshake refusal, while a TLS
// client on the same listener keeps being served.
func TestTLSBadHandshakes(t *testing.T) {
	f := newTLSFixture(t)
	b := startBroker(t, t.TempDir(), func(c *Config) { c.RequestTimeout = 500 * time.Millisecond })
	sslAddr := serveListener(t, b, &Listener{Name: "SSL", Protocol: ProtocolSSL, TLS: f.srv.Config()})
	good := b.client(kgo.SeedBrokers(sslAddr), kgo.DialTLSConfig(f.client(t)))
	metadataBroker(t, good)

	closed := func(nc net.Conn) error {
		_ = nc.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, err := io.Copy(io.Discard, nc)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return errors.New("the broker did not close the connection")
		}
		return nil
	}
	garbage, err := net.Dial("tcp", sslAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer garbage.Close()
	if _, err := garbage.Write([]byte("\x00\x00\x00\x10GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := closed(garbage); err != nil {
		t.Fatalf("garbage: %v", err)
	}
	stalled, err := net.Dial("tcp", sslAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	// Half a ClientHello record header, then nothing.
	if _, err := stalled.Write([]byte{0x16, 0x03}); err != nil {
		t.Fatal(err)
	}
	if err := closed(stalled); err != nil {
		t.Fatalf("a handshake never finished: %v", err)
	}
	metadataBroker(t, good)
	if n := b.srv.refusals[refusedTLSHandshake].Load(); n != 2 {
		t.Fatalf("%d TLS handshake refusals counted, want 2", n)
	}
}

// TestTLSHandshakePrincipal: the connection's principal is the mapped
// subject of its verified client certificate, anonymous without one, and
// a certificate no mapping rule applies to closes the connection.
func TestTLSHandshakePrincipal(t *testing.T) {
	f := newTLSFixture(t, "ssl.client.auth", "requested", "ssl.principal.mapping.rules", "RULE:^CN=([^,]*),OU=apps$/$1/L")
	b := startBroker(t, t.TempDir(), nil)
	l := &Listener{Name: "SSL", Protocol: ProtocolSSL, TLS: f.srv.Config(), Principal: f.srv.Principal}
	alice := f.ca.Client(t, "Alice", pkix.Name{CommonName: "Alice", OrganizationalUnit: []string{"apps"}})
	bob := f.ca.Client(t, "Bob", pkix.Name{CommonName: "Bob", OrganizationalUnit: []string{"ops"}})
	for _, tc := range []struct {
		leaf *testcerts.Pair
		ok   bool
		want string
	}{
		{nil, true, AnonymousPrincipal},
		{&alice, true, "User:alice"},
		{&bob, false, ""},
	} {
		sc, cc := net.Pipe()
		cfg := f.client(t)
		cfg.ServerName = "localhost"
		if tc.leaf != nil {
			cfg.Certificates = []tls.Certificate{{Certificate: [][]byte{tc.leaf.Cert.Raw}, PrivateKey: tc.leaf.Key(t)}}
		}
		go func() {
			cl := tls.Client(cc, cfg)
			if cl.Handshake() == nil {
				_, _ = io.Copy(io.Discard, cl)
			}
			cc.Close()
		}()
		c, err := newConn(b.srv, tls.Server(sc, l.TLS), nil, l)
		if err != nil {
			t.Fatal(err)
		}
		ok := c.handshake(c.nc.(*tls.Conn))
		if ok != tc.ok || ok && c.principal != tc.want {
			t.Fatalf("certificate %v: handshake ok=%v principal %q; want ok=%v %q", tc.leaf != nil, ok, c.principal, tc.ok, tc.want)
		}
		sc.Close()
	}
}

// TestTLSCertificateRotatedUnderLoad: the keystore file is replaced while
// a franz-go producer keeps producing over TLS; new handshakes get the new
// certificate and no produce fails.
func TestTLSCertificateRotatedUnderLoad(t *testing.T) {
	f := newTLSFixture(t)
	b := startBroker(t, t.TempDir(), nil)
	sslAddr := serveListener(t, b, &Listener{Name: "SSL", Protocol: ProtocolSSL, TLS: f.srv.Config()})
	old := f.srv.Leaf().SerialNumber

	var serials sync.Map // serial string -> handshakes seen
	dialer := func(ctx context.Context, network, host string) (net.Conn, error) {
		cfg := f.client(t)
		cfg.ServerName = "localhost"
		nc, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, network, host)
		if err == nil {
			s := nc.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.String()
			v, _ := serials.LoadOrStore(s, new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
		}
		return nc, err
	}
	if _, err := b.admin().CreateTopic(ctxT(t), 1, 1, nil, "rotate"); err != nil {
		t.Fatal(err)
	}
	producer := b.client(kgo.SeedBrokers(sslAddr), kgo.Dialer(dialer), kgo.DefaultProduceTopic("rotate"))
	ctx, cancel := context.WithCancel(ctxT(t))
	var produced, failed atomic.Int64
	var firstErr atomic.Value
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			err := producer.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 1024)}).FirstErr()
			switch {
			case err == nil:
				produced.Add(1)
			case ctx.Err() == nil:
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}
		}
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				cancel()
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("first produces", func() bool { return produced.Load() >= 20 })
	next := f.ca.Server(t, "broker")
	tmp := filepath.Join(filepath.Dir(f.ksPath), ".next.pem")
	if err := os.WriteFile(tmp, next.KeystorePEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, f.ksPath); err != nil {
		t.Fatal(err)
	}
	f.advance()
	before := produced.Load()
	// New connections (a second client, fresh dials) see the new
	// certificate while the first keeps producing on its connection.
	second := b.client(kgo.SeedBrokers(sslAddr), kgo.Dialer(dialer), kgo.DefaultProduceTopic("rotate"))
	for range 20 {
		if err := second.ProduceSync(ctxT(t), &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
			t.Fatalf("produce on a connection made after the rotation: %v", err)
		}
	}
	waitFor("produces after the rotation", func() bool { return produced.Load() >= before+20 })
	cancel()
	<-done
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d produces failed across the rotation; first: %v", n, firstErr.Load())
	}
	if f.srv.Leaf().SerialNumber.Cmp(next.Cert.SerialNumber) != 0 {
		t.Fatal("the server did not load the new certificate")
	}
	if v, ok := serials.Load(next.Cert.SerialNumber.String()); !ok || v.(*atomic.Int64).Load() == 0 {
		t.Fatalf("no handshake saw the new certificate's serial %v", next.Cert.SerialNumber)
	}
	if _, ok := serials.Load(old.String()); !ok {
		t.Fatal("no handshake saw the first certificate")
	}
}

// TestTLSShutdownDuringHandshake: a connection stuck in its handshake does
// not hold up shutdown (the request timeout is far away).
func TestTLSShutdownDuringHandshake(t *testing.T) {
	f := newTLSFixture(t)
	b := startBroker(t, t.TempDir(), func(c *Config) { c.RequestTimeout = time.Hour })
	sslAddr := serveListener(t, b, &Listener{Name: "SSL", Protocol: ProtocolSSL, TLS: f.srv.Config()})
	stalled, err := net.Dial("tcp", sslAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	if _, err := stalled.Write([]byte{0x16, 0x03, 0x01}); err != nil {
		t.Fatal(err)
	}
	// The handshake has started once the broker counts the connection.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		b.srv.mu.Lock()
		n := len(b.srv.mu.conns)
		b.srv.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the connection was never accepted")
		}
	}
	b.stop() // fails the test if shutdown passes its 10 s deadline
}

// TestSASLSSLListener: on a SASL_SSL listener the TLS handshake comes
// first, then SASL; franz-go authenticates with PLAIN over TLS and
// produces, a wrong password is refused, and Metadata names the SASL_SSL
// listener's address.
func TestSASLSSLListener(t *testing.T) {
	f := newTLSFixture(t)
	b := startBroker(t, t.TempDir(), func(c *Config) {
		c.SASL = map[string]*SASLListenerConfig{"SASL_SSL": {Mechanisms: []string{"PLAIN"}, PlainUsers: map[string]string{"alice": "alice-secret"}}}
		c.AutoCreateTopics = true
	})
	addr := serveListener(t, b, &Listener{Name: "SASL_SSL", Protocol: ProtocolSASLSSL, TLS: f.srv.Config()})
	cl := b.client(kgo.SeedBrokers(addr), kgo.DialTLSConfig(f.client(t)), kgo.SASL(plainMech("alice", "alice-secret")),
		kgo.DefaultProduceTopic("sasl-ssl"), kgo.AllowAutoTopicCreation())
	if got := metadataBroker(t, cl); got != addr {
		t.Fatalf("Metadata on SASL_SSL names %s, want %s", got, addr)
	}
	if err := cl.ProduceSync(ctxT(t), &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce over SASL_SSL: %v", err)
	}
	wrong := b.client(kgo.SeedBrokers(addr), kgo.DialTLSConfig(f.client(t)), kgo.SASL(plainMech("alice", "nope")))
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctxT(t), wrong); err == nil {
		t.Fatal("a wrong password was served over SASL_SSL")
	}
}
