package broker

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/verbatim-kafka/verbatim/authn"
)

// fakeSASLClock is a manual clock for session expiry and the
// failed-authentication delay.
type fakeSASLClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []fakeTimer
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

func newFakeSASLClock() *fakeSASLClock { return &fakeSASLClock{now: time.Unix(1_700_000_000, 0)} }

func (f *fakeSASLClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeSASLClock) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	f.timers = append(f.timers, fakeTimer{at: f.now.Add(d), ch: ch})
	return ch
}

func (f *fakeSASLClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	kept := f.timers[:0]
	for _, t := range f.timers {
		if !t.at.After(f.now) {
			t.ch <- f.now
		} else {
			kept = append(kept, t)
		}
	}
	f.timers = kept
}

// waitTimers waits until n timers are pending (a connection is in its
// failed-authentication delay).
func (f *fakeSASLClock) waitTimers(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		got := len(f.timers)
		f.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d timers pending, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

const (
	testPlainUser = "alice"
	testPlainPass = "alice-secret"
)

// startSASLBroker serves one SASL_PLAINTEXT listener with PLAIN (alice,
// bob) and both SCRAM mechanisms enabled, no failed-authentication delay
// unless mod sets one.
func startSASLBroker(t *testing.T, dir string, mod func(*Config)) *testBroker {
	t.Helper()
	zero := time.Duration(0)
	return startBrokerOn(t, dir, func(cfg *Config) {
		cfg.SASL = map[string]*SASLListenerConfig{"SASL_PLAINTEXT": {
			Mechanisms: []string{authn.PLAIN, authn.SCRAMSHA256, authn.SCRAMSHA512},
			PlainUsers: map[string]string{testPlainUser: testPlainPass, "bob": "bob-secret"},
		}}
		cfg.FailedAuthenticationDelay = &zero
		if mod != nil {
			mod(cfg)
		}
	}, &Listener{Name: "SASL_PLAINTEXT", Protocol: ProtocolSASLPlaintext})
}

func plainMech(user, pass string) sasl.Mechanism {
	return plain.Auth{User: user, Pass: pass}.AsMechanism()
}

func (b *testBroker) saslClient(m sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	return b.client(append([]kgo.Opt{kgo.SASL(m), kgo.AllowAutoTopicCreation(), kgo.FetchMaxWait(50 * time.Millisecond)}, opts...)...)
}

// roundTrip sends req on c and decodes its answer.
func (r *rawConn) roundTrip(req kmsg.Request, corr int32) (kmsg.Response, error) {
	r.write(appendRequestFrame(nil, req, corr, "raw-client"))
	got, body, err := r.read()
	if err != nil {
		return nil, err
	}
	if got != corr {
		return nil, errors.New("wrong correlation id")
	}
	if req.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		body = body[1:]
	}
	resp := req.ResponseKind()
	return resp, resp.ReadFrom(body)
}

func (r *rawConn) handshake(t *testing.T, mech string) *kmsg.SASLHandshakeResponse {
	t.Helper()
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version, req.Mechanism = 1, mech
	resp, err := r.roundTrip(req, 1)
	if err != nil {
		t.Fatalf("SaslHandshake: %v", err)
	}
	return resp.(*kmsg.SASLHandshakeResponse)
}

func (r *rawConn) authenticate(t *testing.T, version int16, token []byte) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version, req.SASLAuthBytes = version, token
	resp, err := r.roundTrip(req, 2)
	if err != nil {
		t.Fatalf("SaslAuthenticate: %v", err)
	}
	return resp.(*kmsg.SASLAuthenticateResponse)
}

// plainLogin authenticates a raw connection with PLAIN.
func (r *rawConn) plainLogin(t *testing.T, user, pass string) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	if h := r.handshake(t, authn.PLAIN); h.ErrorCode != 0 {
		t.Fatalf("SaslHandshake PLAIN: %v", kerr.ErrorForCode(h.ErrorCode))
	}
	return r.authenticate(t, 2, []byte("\x00"+user+"\x00"+pass))
}

func (r *rawConn) metadataOK(t *testing.T) {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	if _, err := r.roundTrip(req, 3); err != nil {
		t.Fatalf("Metadata on an authenticated connection: %v", err)
	}
}

// metadataClosed sends Metadata v12 with correlation id corr and expects
// the connection closed instead of an answer.
func (r *rawConn) metadataClosed(corr int32) {
	r.t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	r.write(appendRequestFrame(nil, req, corr, "raw"))
	r.expectClosed()
}

func produceAndFetch(t *testing.T, cl *kgo.Client, topic string) {
	t.Helper()
	if err := cl.ProduceSync(ctxT(t), &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
	cl.AddConsumeTopics(topic)
	fs := cl.PollFetches(ctxT(t))
	if err := fs.Err0(); err != nil {
		t.Fatalf("fetch from %s: %v", topic, err)
	}
	if n := fs.NumRecords(); n != 1 {
		t.Fatalf("fetched %d records from %s", n, topic)
	}
}

func addScramUser(t *testing.T, adm *kadm.Client, user, pass string, mech kadm.ScramMechanism) {
	t.Helper()
	res, err := adm.AlterUserSCRAMs(ctxT(t), nil, []kadm.UpsertSCRAM{{User: user, Mechanism: mech, Iterations: 4096, Password: pass}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res[user]; r.Err != nil {
		t.Fatalf("upsert %s: %v", user, r.Err)
	}
}

func TestSASLPlainAndScramProduceFetch(t *testing.T) {
	b := startSASLBroker(t, t.TempDir(), func(c *Config) { c.AutoCreateTopics = true })
	admin := b.saslClient(plainMech(testPlainUser, testPlainPass))
	adm := kadm.NewClient(admin)
	produceAndFetch(t, admin, "plain-topic")
	addScramUser(t, adm, "carol", "carol-256", kadm.ScramSha256)
	addScramUser(t, adm, "dave", "dave-512", kadm.ScramSha512)
	produceAndFetch(t, b.saslClient(scram.Auth{User: "carol", Pass: "carol-256"}.AsSha256Mechanism()), "scram256-topic")
	produceAndFetch(t, b.saslClient(scram.Auth{User: "dave", Pass: "dave-512"}.AsSha512Mechanism()), "scram512-topic")

	// Wrong passwords and unknown users are refused with Kafka's error.
	for name, m := range map[string]sasl.Mechanism{
		"plain wrong password":  plainMech(testPlainUser, "nope"),
		"plain unknown user":    plainMech("mallory", testPlainPass),
		"scram wrong password":  scram.Auth{User: "carol", Pass: "nope"}.AsSha256Mechanism(),
		"scram wrong mechanism": scram.Auth{User: "carol", Pass: "carol-256"}.AsSha512Mechanism(),
	} {
		cl := b.saslClient(m)
		err := cl.Ping(ctxT(t))
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("%s: %v, want SASL_AUTHENTICATION_FAILED", name, err)
		}
		cl.Close()
	}
}

func TestSASLRawGate(t *testing.T) {
	b := startSASLBroker(t, t.TempDir(), nil)

	// A wrong password is answered, then the connection closes.
	c := dialRaw(t, b.addr)
	resp := c.plainLogin(t, testPlainUser, "wrong")
	if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || resp.ErrorMessage == nil || *resp.ErrorMessage != "Authentication failed: Invalid username or password" {
		t.Fatalf("wrong password: code %d message %v", resp.ErrorCode, resp.ErrorMessage)
	}
	c.expectClosed()

	// Requests other than ApiVersions and SaslHandshake before
	// authentication close the connection unanswered.
	c = dialRaw(t, b.addr)
	c.write(apiVersionsFrame(1, 3))
	if _, _, err := c.read(); err != nil {
		t.Fatalf("ApiVersions before authentication: %v", err)
	}
	c.metadataClosed(2)

	c = dialRaw(t, b.addr)
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.Version = 2
	c.write(appendRequestFrame(nil, auth, 1, "raw"))
	c.expectClosed() // SaslAuthenticate before SaslHandshake

	c = dialRaw(t, b.addr)
	if h := c.handshake(t, authn.PLAIN); h.ErrorCode != 0 {
		t.Fatal(h.ErrorCode)
	}
	c.metadataClosed(2) // during the exchange

	// An unknown mechanism: UNSUPPORTED_SASL_MECHANISM with the enabled
	// list, then closed.
	c = dialRaw(t, b.addr)
	h := c.handshake(t, "GSSAPI")
	if h.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(h.SupportedMechanisms, ",") != "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512" {
		t.Fatalf("GSSAPI: code %d mechanisms %v", h.ErrorCode, h.SupportedMechanisms)
	}
	c.expectClosed()

	// Garbage SCRAM tokens; a truncated SaslAuthenticate body.
	for _, tok := range [][]byte{[]byte("garbage"), {0xff, 0, 0xfe}, nil, []byte("n,,n=carol,r=")} {
		c = dialRaw(t, b.addr)
		c.handshake(t, authn.SCRAMSHA512)
		if r := c.authenticate(t, 1, tok); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("token %q: code %d", tok, r.ErrorCode)
		}
		c.expectClosed()
	}
	c = dialRaw(t, b.addr)
	c.handshake(t, authn.PLAIN)
	frame := appendRequestFrame(nil, auth, 9, "raw")
	frame = append(frame[:len(frame)-1], 0x7f) // the bytes field claims more than is there
	c.write(frame)
	c.expectClosed()
	c = dialRaw(t, b.addr)
	c.write([]byte{0, 0, 0, 100, 0, 17, 0, 1}) // a frame cut short by the peer
	c.nc.(*net.TCPConn).CloseWrite()
	c.expectClosed()

	// An authenticated connection is served; SASL requests on it get
	// ILLEGAL_SASL_STATE from a client that cannot re-authenticate (v0).
	c = dialRaw(t, b.addr)
	c.handshake(t, authn.PLAIN)
	if r := c.authenticate(t, 0, []byte("\x00bob\x00bob-secret")); r.ErrorCode != 0 {
		t.Fatalf("bob: %d", r.ErrorCode)
	}
	c.metadataOK(t)
	if h := c.handshake(t, authn.PLAIN); h.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslHandshake after authentication (v0 client): %d", h.ErrorCode)
	}
	if r := c.authenticate(t, 0, nil); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslAuthenticate after authentication: %d", r.ErrorCode)
	}
	c.metadataOK(t)
}

func TestSASLPreAuthFrameLimit(t *testing.T) {
	b := startSASLBroker(t, t.TempDir(), func(c *Config) { c.AutoCreateTopics = true })
	good := b.saslClient(plainMech(testPlainUser, testPlainPass))
	produceAndFetch(t, good, "limit")

	// 600 KiB announced before authentication: closed after the size
	// prefix, without the body being read.
	c := dialRaw(t, b.addr)
	var size [4]byte
	binary.BigEndian.PutUint32(size[:], 600<<10)
	c.write(append(size[:], 0, 17, 0, 1))
	c.expectClosed()
	// Exactly the limit is read (and then refused as a request: it is
	// not a valid SaslHandshake).
	if err := good.ProduceSync(ctxT(t), &kgo.Record{Topic: "limit", Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("authenticated client after the oversized frame: %v", err)
	}

	// After authentication the normal limit applies: a 700 KiB produce.
	big := make([]byte, 700<<10)
	if err := good.ProduceSync(ctxT(t), &kgo.Record{Topic: "limit", Value: big}).FirstErr(); err != nil {
		t.Fatalf("700 KiB record after authentication: %v", err)
	}
}

func TestSASLFailedAuthenticationDelay(t *testing.T) {
	clock := newFakeSASLClock()
	delay := 100 * time.Millisecond
	b := startSASLBroker(t, t.TempDir(), func(c *Config) {
		c.saslClock, c.FailedAuthenticationDelay = clock, &delay
	})
	c := dialRaw(t, b.addr)
	if r := c.plainLogin(t, testPlainUser, "wrong"); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatal(r.ErrorCode)
	}
	clock.waitTimers(t, 1) // the connection waits out the delay on its own goroutine
	// Meanwhile others are served.
	o := dialRaw(t, b.addr)
	if r := o.plainLogin(t, testPlainUser, testPlainPass); r.ErrorCode != 0 {
		t.Fatal(r.ErrorCode)
	}
	o.metadataOK(t)
	clock.Advance(delay)
	c.expectClosed()
}

func TestSASLReauthentication(t *testing.T) {
	clock := newFakeSASLClock()
	maxReauth := time.Minute
	b := startSASLBroker(t, t.TempDir(), func(c *Config) {
		c.saslClock = clock
		c.SASL[""] = &SASLListenerConfig{MaxReauth: &maxReauth}
	})
	login := func() *rawConn {
		c := dialRaw(t, b.addr)
		r := c.plainLogin(t, testPlainUser, testPlainPass)
		if r.ErrorCode != 0 || r.SessionLifetimeMillis != 60_000 {
			t.Fatalf("login: code %d lifetime %d", r.ErrorCode, r.SessionLifetimeMillis)
		}
		return c
	}

	// Expiry closes the connection at its next request.
	c := login()
	c.metadataOK(t)
	clock.Advance(61 * time.Second)
	c.metadataClosed(5)

	// A re-authentication renews the session, after expiry too.
	c = login()
	clock.Advance(40 * time.Second)
	if r := c.plainLogin(t, testPlainUser, testPlainPass); r.ErrorCode != 0 || r.SessionLifetimeMillis != 60_000 {
		t.Fatalf("re-authentication: code %d lifetime %d", r.ErrorCode, r.SessionLifetimeMillis)
	}
	clock.Advance(40 * time.Second) // 80 s after the first, 40 s after the second
	c.metadataOK(t)
	clock.Advance(40 * time.Second)
	if r := c.plainLogin(t, testPlainUser, testPlainPass); r.ErrorCode != 0 {
		t.Fatalf("re-authentication after expiry: code %d", r.ErrorCode)
	}
	c.metadataOK(t)

	// Another principal is refused and closed.
	c = login()
	r := c.plainLogin(t, "bob", "bob-secret")
	if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil || *r.ErrorMessage != "Cannot change principals during re-authentication from User.alice: User.bob" {
		t.Fatalf("principal change: code %d message %v", r.ErrorCode, r.ErrorMessage)
	}
	c.expectClosed()

	// Another mechanism is refused at its SaslAuthenticate.
	c = login()
	if h := c.handshake(t, authn.SCRAMSHA256); h.ErrorCode != 0 {
		t.Fatal(h.ErrorCode)
	}
	if r := c.authenticate(t, 2, []byte("n,,n=alice,r=abc")); r.ErrorCode != kerr.SaslAuthenticationFailed.Code || !strings.Contains(*r.ErrorMessage, "not supported for re-authentication of mechanism 'PLAIN'") {
		t.Fatalf("mechanism change: code %d message %v", r.ErrorCode, r.ErrorMessage)
	}
	c.expectClosed()

	// franz-go takes the session lifetime and is served within it.
	cl := b.saslClient(plainMech(testPlainUser, testPlainPass))
	if err := cl.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestSCRAMCredentialsAlterDescribeRestart(t *testing.T) {
	dir := t.TempDir()
	b := startSASLBroker(t, dir, nil)
	adm := kadm.NewClient(b.saslClient(plainMech(testPlainUser, testPlainPass)))
	addScramUser(t, adm, "erin", "first", kadm.ScramSha512)
	erin := func(pass string) error {
		cl := b.saslClient(scram.Auth{User: "erin", Pass: pass}.AsSha512Mechanism())
		defer cl.Close()
		return cl.Ping(ctxT(t))
	}
	if err := erin("first"); err != nil {
		t.Fatal(err)
	}
	addScramUser(t, adm, "erin", "second", kadm.ScramSha512)
	if err := erin("first"); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("old password after the change: %v", err)
	}
	if err := erin("second"); err != nil {
		t.Fatalf("new password: %v", err)
	}
	addScramUser(t, adm, "erin", "other", kadm.ScramSha256)
	d, err := adm.DescribeUserSCRAMs(ctxT(t), "erin")
	if err != nil {
		t.Fatal(err)
	}
	if got := d["erin"]; got.Err != nil || len(got.CredInfos) != 2 || got.CredInfos[0].Mechanism != kadm.ScramSha256 || got.CredInfos[1].Iterations != 4096 {
		t.Fatalf("describe erin: %+v", got)
	}

	// Kafka's refusals.
	raw := func(req *kmsg.AlterUserSCRAMCredentialsRequest) map[string]int16 {
		resp, err := req.RequestWith(ctxT(t), b.saslClient(plainMech(testPlainUser, testPlainPass)))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int16{}
		for _, r := range resp.Results {
			out[r.User] = r.ErrorCode
		}
		return out
	}
	up := func(user string, mech int8, iters int32) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = user, mech, iters, []byte("salt"), make([]byte, 64)
		return u
	}
	del := func(user string, mech int8) kmsg.AlterUserSCRAMCredentialsRequestDeletion {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = user, mech
		return d
	}
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		up("few", 2, 4095), up("many", 2, 16385), up("mech", 3, 4096), up("", 2, 4096), up("twice", 1, 4096), up("twice", 2, 4096),
	}
	req.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{del("nobody", 1), del("erin", 0)}
	got := raw(req)
	want := map[string]int16{
		"few": kerr.UnacceptableCredential.Code, "many": kerr.UnacceptableCredential.Code, "mech": kerr.UnsupportedSaslMechanism.Code,
		"": kerr.UnacceptableCredential.Code, "twice": kerr.DuplicateResource.Code, "nobody": kerr.ResourceNotFound.Code,
		"erin": kerr.UnsupportedSaslMechanism.Code,
	}
	for u, code := range want {
		if got[u] != code {
			t.Errorf("user %q: code %d, want %d", u, got[u], code)
		}
	}
	if len(got) != len(want) {
		t.Errorf("results %v", got)
	}
	dreq := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, u := range []string{"erin", "nobody", "erin"} {
		n := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		n.Name = u
		dreq.Users = append(dreq.Users, n)
	}
	dresp, err := dreq.RequestWith(ctxT(t), b.saslClient(plainMech(testPlainUser, testPlainPass)))
	if err != nil {
		t.Fatal(err)
	}
	if len(dresp.Results) != 2 || dresp.Results[0].ErrorCode != kerr.DuplicateResource.Code || dresp.Results[1].ErrorCode != kerr.ResourceNotFound.Code {
		t.Fatalf("describe erin, nobody, erin: %+v", dresp.Results)
	}

	// Credentials survive a restart; deletion refuses the next login.
	b.stop()
	b = startSASLBroker(t, dir, nil)
	if err := erin("second"); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	adm = kadm.NewClient(b.saslClient(plainMech(testPlainUser, testPlainPass)))
	res, err := adm.AlterUserSCRAMs(ctxT(t), []kadm.DeleteSCRAM{{User: "erin", Mechanism: kadm.ScramSha512}}, nil)
	if err != nil || res.Error() != nil || res["erin"].Err != nil {
		t.Fatalf("delete: %v %+v", err, res)
	}
	if err := erin("second"); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("login after deletion: %v", err)
	}

	// DescribeClientQuotas answers empty.
	q, err := adm.DescribeClientQuotas(ctxT(t), false, nil)
	if err != nil || len(q) != 0 {
		t.Fatalf("DescribeClientQuotas: %v %v", q, err)
	}
}

func TestSASLOnPlaintextListenerAndConfig(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	c := dialRaw(t, b.addr)
	if h := c.handshake(t, authn.PLAIN); h.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslHandshake on PLAINTEXT: %d", h.ErrorCode)
	}
	if r := c.authenticate(t, 1, nil); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslAuthenticate on PLAINTEXT: %d", r.ErrorCode)
	}
	// A SASL listener without mechanisms, or PLAIN without users, is refused.
	for name, l := range map[string]*SASLListenerConfig{
		"no mechanisms": {},
		"no PLAIN user": {Mechanisms: []string{authn.PLAIN}},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		b.srv.cfg.SASL = map[string]*SASLListenerConfig{"S": l}
		if err := b.srv.ServeListener(ln, &Listener{Name: "S", Protocol: ProtocolSASLPlaintext}); err == nil {
			t.Errorf("%s: ServeListener accepted it", name)
		}
	}
	if _, err := (Config{DataDir: t.TempDir(), SASL: map[string]*SASLListenerConfig{"S": {Mechanisms: []string{"GSSAPI"}}}}).withDefaults(); err == nil {
		t.Error("GSSAPI accepted")
	}
}

// lineCounter counts the log lines holding a substring, per connection.
type lineCounter struct {
	mu    sync.Mutex
	lines []string
}

func (l *lineCounter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(p))
	return len(p), nil
}

func (l *lineCounter) perConn(sub string) map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for _, line := range l.lines {
		if !strings.Contains(line, sub) {
			continue
		}
		for _, f := range strings.Fields(line) {
			if strings.HasPrefix(f, "conn=") {
				out[f]++
			}
		}
	}
	return out
}

// TestSASLFranzGoReauthenticates: with a short connections.max.reauth.ms
// (wall clock) franz-go re-authenticates on its connection (KIP-368) and
// keeps producing; the broker counts two logins on one connection.
func TestSASLFranzGoReauthenticates(t *testing.T) {
	logs := &lineCounter{}
	lifetime := 2 * time.Second
	b := startSASLBroker(t, t.TempDir(), func(c *Config) {
		c.AutoCreateTopics = true
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		c.SASL[""] = &SASLListenerConfig{MaxReauth: &lifetime}
	})
	cl := b.saslClient(plainMech(testPlainUser, testPlainPass), kgo.DefaultProduceTopic("reauth"))
	if err := cl.ProduceSync(ctxT(t), &kgo.Record{Value: []byte("1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(lifetime + lifetime/4) // past the session: franz-go must re-authenticate first
	if err := cl.ProduceSync(ctxT(t), &kgo.Record{Value: []byte("2")}).FirstErr(); err != nil {
		t.Fatalf("produce after the session lifetime: %v", err)
	}
	reauthed := false
	for _, n := range logs.perConn("SASL authentication succeeded") {
		reauthed = reauthed || n >= 2
	}
	if !reauthed {
		t.Fatalf("no connection authenticated twice: %v", logs.perConn("SASL authentication succeeded"))
	}
}

func unsecuredJWS(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(claims)) + "."
}

// TestSASLOAuthBearerUnsecured is kgo's TestOAuthAuth against a listener
// with OAUTHBEARER: an unsecured token logs in (the session ends with the
// token, or earlier with connections.max.reauth.ms), an expired one gets
// SASL_AUTHENTICATION_FAILED naming invalid_token.
func TestSASLOAuthBearerUnsecured(t *testing.T) {
	clock := newFakeSASLClock()
	b := startSASLBroker(t, t.TempDir(), func(c *Config) {
		c.saslClock = clock
		c.SASL["SASL_PLAINTEXT"].Mechanisms = []string{authn.OAUTHBEARER}
	})
	now := clock.Now()
	token := func(exp time.Time) string {
		return unsecuredJWS(fmt.Sprintf(`{"sub":"admin","exp":%d}`, exp.Unix()))
	}
	cl := b.saslClient(oauth.Auth{Token: token(now.Add(time.Hour))}.AsMechanism())
	if err := cl.Ping(ctxT(t)); err != nil {
		t.Fatalf("valid token: %v", err)
	}
	bad := b.saslClient(oauth.Auth{Token: token(now.Add(-time.Minute))}.AsMechanism())
	if err := bad.Ping(ctxT(t)); !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "invalid_token") {
		t.Fatalf("expired token: %v", err)
	}

	// The session lifetime is the token's.
	c := dialRaw(t, b.addr)
	if h := c.handshake(t, authn.OAUTHBEARER); h.ErrorCode != 0 {
		t.Fatal(h.ErrorCode)
	}
	r := c.authenticate(t, 2, []byte("n,,\x01auth=Bearer "+token(now.Add(90*time.Second))+"\x01\x01"))
	if r.ErrorCode != 0 || r.SessionLifetimeMillis != 90_000 {
		t.Fatalf("code %d lifetime %d", r.ErrorCode, r.SessionLifetimeMillis)
	}
	c.metadataOK(t)
	clock.Advance(91 * time.Second)
	c.metadataClosed(4)
}
