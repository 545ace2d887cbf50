package broker

import (
	"context"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/authz"
	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/internal/testkit/logbuf"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// recLinks is a LinkService that records what it was asked and answers
// from its fields.
type recLinks struct {
	mu       sync.Mutex
	calls    []string
	err      error
	links    []wireext.LinkDescription
	statuses []wireext.MirrorPartitionStatus
}

func (f *recLinks) record(format string, args ...any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
	return f.err
}

func (f *recLinks) took() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

func okResults(topics []string) []wireext.MirrorTopicResult {
	out := make([]wireext.MirrorTopicResult, len(topics))
	for i, t := range topics {
		out[i].Topic = t
	}
	return out
}

func (f *recLinks) CreateLink(_ context.Context, p string, c wireext.LinkConfig, v bool) error {
	return f.record("create %s %s %s validate=%v", p, c.Name, c.SourceBootstrap, v)
}
func (f *recLinks) DeleteLink(_ context.Context, p, name string, force bool) error {
	return f.record("delete %s %s force=%v", p, name, force)
}
func (f *recLinks) DescribeLinks(_ context.Context, names []string) ([]wireext.LinkDescription, error) {
	return f.links, f.record("describe links %v", names)
}
func (f *recLinks) StartMirrorTopics(_ context.Context, p string, r wireext.StartMirrorTopicsRequest) ([]wireext.MirrorTopicResult, error) {
	return okResults(r.Topics), f.record("start %s %s %v", p, r.Link, r.Topics)
}
func (f *recLinks) PauseMirrorTopics(_ context.Context, p string, r wireext.PauseMirrorTopicsRequest) ([]wireext.MirrorTopicResult, error) {
	topics := r.Topics
	if len(topics) == 0 {
		topics = []string{"a", "b"}
	}
	return okResults(topics), f.record("pause=%v %s %s %v", r.Pause, p, r.Link, r.Topics)
}
func (f *recLinks) DescribeMirrors(_ context.Context, r wireext.DescribeMirrorsRequest) ([]wireext.MirrorPartitionStatus, error) {
	return f.statuses, f.record("describe mirrors %s %v", r.Link, r.Topics)
}
func (f *recLinks) TruncateMirrorTopics(_ context.Context, p string, r wireext.TruncateMirrorTopicsRequest) ([]wireext.MirrorTopicResult, error) {
	res := okResults(r.Topics)
	for i := range res {
		res[i].Partitions = []wireext.TruncatedPartition{{Partition: 0, TruncatedTo: 10, RemovedBatches: 2, RemovedBytes: 300, KeptIn: r.KeepTopic}}
	}
	return res, f.record("truncate %s %v %s", p, r.Topics, r.KeepTopic)
}

// linkCall sends a link request from the loopback address from and
// decodes its response.
func linkCall[R any, P interface {
	*R
	wireext.LinkMessage
}](t *testing.T, b *testBroker, from string, key int16, req wireext.LinkMessage) *R {
	t.Helper()
	resp, err := rawRoundTripFrom(b.addr, from, &client.RawRequest{APIKey: key, Flexible: true, Body: req.AppendTo(nil)})
	if err != nil {
		t.Fatalf("%s: %v", wireext.LinkAPIName(key), err)
	}
	v := new(R)
	if err := P(v).ReadFrom(resp.(*client.RawResponse).Body); err != nil {
		t.Fatalf("%s response: %v", wireext.LinkAPIName(key), err)
	}
	return v
}

// everyLinkRequest is one valid request of each link key.
func everyLinkRequest() map[int16]wireext.LinkMessage {
	return map[int16]wireext.LinkMessage{
		wireext.APIKeyCreateMirrorLink:     &wireext.CreateMirrorLinkRequest{Link: wireext.LinkConfig{Name: "l", SourceBootstrap: "s:9092"}},
		wireext.APIKeyDeleteMirrorLink:     &wireext.DeleteMirrorLinkRequest{Name: "l"},
		wireext.APIKeyDescribeMirrorLinks:  &wireext.DescribeMirrorLinksRequest{},
		wireext.APIKeyStartMirrorTopics:    &wireext.StartMirrorTopicsRequest{Link: "l", Topics: []string{"a"}},
		wireext.APIKeyPauseMirrorTopics:    &wireext.PauseMirrorTopicsRequest{Link: "l", Pause: true},
		wireext.APIKeyDescribeMirrors:      &wireext.DescribeMirrorsRequest{},
		wireext.APIKeyTruncateMirrorTopics: &wireext.TruncateMirrorTopicsRequest{Topics: []string{"a"}},
	}
}

// outcome is the request-level code and message of any link response.
func outcome(t *testing.T, b *testBroker, from string, key int16, req wireext.LinkMessage) (int16, string) {
	t.Helper()
	resp, err := rawRoundTripFrom(b.addr, from, &client.RawRequest{APIKey: key, Flexible: true, Body: req.AppendTo(nil)})
	if err != nil {
		t.Fatalf("%s: %v", wireext.LinkAPIName(key), err)
	}
	m := wireext.NewLinkResponse(key)
	if err := m.ReadFrom(resp.(*client.RawResponse).Body); err != nil {
		t.Fatal(err)
	}
	v := reflect.ValueOf(m).Elem()
	return int16(v.FieldByName("ErrorCode").Int()), v.FieldByName("ErrorMessage").String()
}

func hasLinkFeature(t *testing.T, b *testBroker) bool {
	t.Helper()
	resp := rawApiVersions(t, b, 3)
	for _, k := range resp.ApiKeys {
		if k.ApiKey > kmsg.MaxKey {
			t.Fatalf("ApiKeys lists extension key %d", k.ApiKey)
		}
	}
	for _, f := range resp.SupportedFeatures {
		if f.Name == wireext.FeatureMirrorLink {
			if f.MinVersion != 0 || f.MaxVersion != 0 {
				t.Fatalf("feature %+v", f)
			}
			return true
		}
	}
	return false
}

// TestLinkAdminNoService: without a link service every link request is
// INVALID_REQUEST "this broker runs no cluster links" and the feature is
// not advertised; with one it is, and the keys are never ApiKeys.
func TestLinkAdminNoService(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	if hasLinkFeature(t, b) {
		t.Fatal("feature advertised without a link service")
	}
	for key, req := range everyLinkRequest() {
		code, msg := outcome(t, b, "", key, req)
		if code != kerr.InvalidRequest.Code || msg != "this broker runs no cluster links" {
			t.Fatalf("%s: %v %q", wireext.LinkAPIName(key), kerr.ErrorForCode(code), msg)
		}
	}
	b.srv.SetLinkService(&recLinks{})
	if !hasLinkFeature(t, b) {
		t.Fatal("feature not advertised with a link service")
	}
}

// TestLinkAdminMalformed: a body that does not decode, or a version
// above 0, closes the connection.
func TestLinkAdminMalformed(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	b.srv.SetLinkService(&recLinks{})
	for _, req := range []*client.RawRequest{
		{APIKey: wireext.APIKeyDeleteMirrorLink, Flexible: true, Body: []byte{0}},
		{APIKey: wireext.APIKeyDescribeMirrors, Flexible: true, Body: []byte{0, 1, 0, 9}},
		{APIKey: wireext.APIKeyDescribeMirrors, Version: 1, Flexible: true, Body: []byte{0, 1, 0}},
	} {
		nc, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := nc.Write(appendRequestFrame(nil, req, 1, "raw")); err != nil {
			t.Fatal(err)
		}
		if n, err := nc.Read(make([]byte, 64)); err != io.EOF {
			t.Fatalf("%x v%d: read %d, %v; want the connection closed", req.Body, req.Version, n, err)
		}
		nc.Close()
	}
}

// TestLinkAdminErrors: the service's errors are answered as Kafka codes
// with their text.
func TestLinkAdminErrors(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	links := &recLinks{err: fmt.Errorf("%w: topics pattern: missing closing )", kerr.InvalidConfig)}
	b.srv.SetLinkService(links)
	code, msg := outcome(t, b, "", wireext.APIKeyCreateMirrorLink, everyLinkRequest()[wireext.APIKeyCreateMirrorLink])
	if code != kerr.InvalidConfig.Code || msg != "topics pattern: missing closing )" {
		t.Fatalf("got %v %q", kerr.ErrorForCode(code), msg)
	}
	links.err = kerr.UnknownTopicOrPartition
	res := linkCall[wireext.StartMirrorTopicsResponse](t, b, "", wireext.APIKeyStartMirrorTopics, &wireext.StartMirrorTopicsRequest{Link: "l", Topics: []string{"x", "y", "x"}})
	if len(res.Topics) != 2 || res.Topics[0].Topic != "x" || res.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("results %+v", res.Topics)
	}
	links.err = fmt.Errorf("plain failure")
	if code, msg := outcome(t, b, "", wireext.APIKeyDeleteMirrorLink, &wireext.DeleteMirrorLinkRequest{Name: "l"}); code != kerr.UnknownServerError.Code || msg != "plain failure" {
		t.Fatalf("got %v %q", kerr.ErrorForCode(code), msg)
	}
	if code, _ := outcome(t, b, "", wireext.APIKeyStartMirrorTopics, &wireext.StartMirrorTopicsRequest{Link: "l"}); code != kerr.InvalidRequest.Code {
		t.Fatalf("start without topics: %v", kerr.ErrorForCode(code))
	}
}

// TestLinkAdminACLs: each request with an allowed principal reaches the
// service; a denied one is refused with Kafka's code and never reaches
// it. allow.everyone.if.no.acl.found grants none of the link's cluster
// permissions.
func TestLinkAdminACLs(t *testing.T) {
	var audit logbuf.Buffer
	b := startBroker(t, t.TempDir(), withACLs(func(c *Config) { c.AllowEveryoneIfNoACLFound = true; c.AuditLog = &audit }))
	links := &recLinks{
		statuses: []wireext.MirrorPartitionStatus{{Topic: "a", State: wireext.StateMirroring}, {Topic: "b", State: wireext.StatePaused}},
		links: []wireext.LinkDescription{{Config: wireext.LinkConfig{Name: "l", SourceConfig: map[string]string{"sasl.jaas.config": "secret!", "ssl.key.password": "pw", "security.protocol": "SASL_SSL"}},
			State: "ACTIVE", Topics: []wireext.LinkTopic{{Topic: "a"}, {Topic: "b"}}}},
	}
	b.srv.SetLinkService(links)
	createTopic(t, b, "a", 1, nil)
	createTopic(t, b, "b", 1, nil)
	reqs := everyLinkRequest()
	want := func(who string, key int16, code *kerr.Error, calls int) {
		t.Helper()
		got, msg := outcome(t, b, who, key, reqs[key])
		if got != code.Code {
			t.Fatalf("%s %s: %v (%s), want %v", who, wireext.LinkAPIName(key), kerr.ErrorForCode(got), msg, code)
		}
		if c := links.took(); len(c) != calls {
			t.Fatalf("%s %s: service calls %q, want %d", who, wireext.LinkAPIName(key), c, calls)
		}
	}
	// The super user may do everything.
	for key := range reqs {
		want(adminIP, key, noError, 1+btoi(key == wireext.APIKeyPauseMirrorTopics))
	}
	// Mallory, under allow.everyone, has no cluster permission.
	for _, key := range []int16{wireext.APIKeyCreateMirrorLink, wireext.APIKeyDeleteMirrorLink, wireext.APIKeyStartMirrorTopics,
		wireext.APIKeyPauseMirrorTopics, wireext.APIKeyTruncateMirrorTopics} {
		want(malloryIP, key, kerr.ClusterAuthorizationFailed, 0)
	}
	// Describing is granted by allow.everyone, as Kafka's DESCRIBE.
	want(malloryIP, wireext.APIKeyDescribeMirrors, noError, 1)
	grant(t, b, mallory, authz.PermDeny, "CLUSTER:kafka-cluster:DESCRIBE")
	want(malloryIP, wireext.APIKeyDescribeMirrors, kerr.ClusterAuthorizationFailed, 0)
	want(malloryIP, wireext.APIKeyDescribeMirrorLinks, kerr.ClusterAuthorizationFailed, 0)

	// ALTER on CLUSTER: links may be created and deleted; the topic
	// requests still need ALTER (CREATE) on each topic.
	grant(t, b, mallory, authz.PermAllow, "CLUSTER:kafka-cluster:ALTER")
	want(malloryIP, wireext.APIKeyCreateMirrorLink, noError, 1)
	want(malloryIP, wireext.APIKeyDeleteMirrorLink, noError, 1)
	grant(t, b, mallory, authz.PermDeny, "TOPIC:b:ALTER", "TOPIC:b:DESCRIBE", "TOPIC:new:CREATE")
	start := linkCall[wireext.StartMirrorTopicsResponse](t, b, malloryIP, wireext.APIKeyStartMirrorTopics,
		&wireext.StartMirrorTopicsRequest{Link: "l", Topics: []string{"a", "b", "new", "other"}})
	if got := links.took(); !reflect.DeepEqual(got, []string{"start User:mallory l [a other]"}) {
		t.Fatalf("service asked %q", got)
	}
	codes := map[string]int16{}
	for _, r := range start.Topics {
		codes[r.Topic] = r.ErrorCode
	}
	if !reflect.DeepEqual(codes, map[string]int16{"a": 0, "b": kerr.TopicAuthorizationFailed.Code, "new": kerr.TopicAuthorizationFailed.Code, "other": 0}) {
		t.Fatalf("start results %+v", start.Topics)
	}
	// A whole link's pause checks each of its topics: b is refused, a
	// is passed by name.
	pause := linkCall[wireext.PauseMirrorTopicsResponse](t, b, malloryIP, wireext.APIKeyPauseMirrorTopics, &wireext.PauseMirrorTopicsRequest{Link: "l", Pause: true})
	if got := links.took(); !reflect.DeepEqual(got, []string{"describe mirrors l []", "pause=true User:mallory l [a]"}) {
		t.Fatalf("service asked %q", got)
	}
	if len(pause.Topics) != 2 || pause.Topics[0].ErrorCode != 0 || pause.Topics[1].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("pause results %+v", pause.Topics)
	}
	trunc := linkCall[wireext.TruncateMirrorTopicsResponse](t, b, malloryIP, wireext.APIKeyTruncateMirrorTopics, &wireext.TruncateMirrorTopicsRequest{Topics: []string{"b"}})
	if links.took() != nil || len(trunc.Topics) != 1 || trunc.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("truncate results %+v", trunc.Topics)
	}
	// A truncation writes what it cuts into the keep topic at offsets of
	// the request's choosing: WRITE there, and CREATE while it does not
	// exist, as a producer creating it would need.
	grant(t, b, mallory, authz.PermDeny, "TOPIC:a.truncated:WRITE", "TOPIC:keep-new:CREATE")
	for _, kt := range []string{"", "keep-new"} {
		trunc = linkCall[wireext.TruncateMirrorTopicsResponse](t, b, malloryIP, wireext.APIKeyTruncateMirrorTopics, &wireext.TruncateMirrorTopicsRequest{Topics: []string{"a"}, KeepTopic: kt})
		if links.took() != nil || len(trunc.Topics) != 1 || trunc.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code || !strings.Contains(trunc.Topics[0].ErrorMessage, "keeps what truncating a cuts") {
			t.Fatalf("truncate keeping in %q: %+v", kt, trunc.Topics)
		}
		start = linkCall[wireext.StartMirrorTopicsResponse](t, b, malloryIP, wireext.APIKeyStartMirrorTopics,
			&wireext.StartMirrorTopicsRequest{Link: "l", Topics: []string{"a"}, TruncateToCommon: true, KeepTopic: kt})
		if links.took() != nil || len(start.Topics) != 1 || start.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("failback keeping in %q: %+v", kt, start.Topics)
		}
	}
	createTopic(t, b, "keep-old", 1, nil) // exists: WRITE is enough
	trunc = linkCall[wireext.TruncateMirrorTopicsResponse](t, b, malloryIP, wireext.APIKeyTruncateMirrorTopics, &wireext.TruncateMirrorTopicsRequest{Topics: []string{"a"}, KeepTopic: "keep-old"})
	if got := links.took(); len(got) != 1 || trunc.Topics[0].ErrorCode != 0 {
		t.Fatalf("truncate keeping in an existing writable topic: %+v (service asked %q)", trunc.Topics, got)
	}
	// A principal who may describe the cluster but not topic b sees
	// only a's rows, and no secret.
	b2 := startBroker(t, t.TempDir(), withACLs(func(c *Config) {
		c.AllowEveryoneIfNoACLFound = true
		c.testPrincipals[malloryIP] = "User:viewer"
	}))
	b2.srv.SetLinkService(links)
	grant(t, b2, "User:viewer", authz.PermDeny, "TOPIC:b:DESCRIBE")
	d := linkCall[wireext.DescribeMirrorLinksResponse](t, b2, malloryIP, wireext.APIKeyDescribeMirrorLinks, &wireext.DescribeMirrorLinksRequest{})
	if len(d.Links) != 1 || len(d.Links[0].Topics) != 1 || d.Links[0].Topics[0].Topic != "a" {
		t.Fatalf("described %+v", d.Links)
	}
	if sc := d.Links[0].Config.SourceConfig; sc["sasl.jaas.config"] != maskedValue || sc["ssl.key.password"] != maskedValue || sc["security.protocol"] != "SASL_SSL" {
		t.Fatalf("source config answered %v", sc)
	}
	st := linkCall[wireext.DescribeMirrorsResponse](t, b2, malloryIP, wireext.APIKeyDescribeMirrors, &wireext.DescribeMirrorsRequest{})
	if len(st.Partitions) != 1 || st.Partitions[0].Topic != "a" {
		t.Fatalf("statuses %+v", st.Partitions)
	}

	// Every state-changing request was audited; no secret was written.
	text := audit.String()
	for _, w := range []string{`"action":"create link"`, `"action":"delete link"`, `"action":"start mirror topic"`, `"action":"pause mirror topic"`, `"action":"truncate mirror topic"`, `"outcome":"CLUSTER_AUTHORIZATION_FAILED"`, `"outcome":"TOPIC_AUTHORIZATION_FAILED"`} {
		if !strings.Contains(text, w) {
			t.Fatalf("audit log lacks %s:\n%s", w, text)
		}
	}
	if strings.Contains(text, `"action":"describe`) {
		t.Fatalf("describes audited:\n%s", text)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestLinkAdminAuditSecrets: a link's creation is audited with its
// source config's names, never a value.
func TestLinkAdminAuditSecrets(t *testing.T) {
	var audit logbuf.Buffer
	b := startBroker(t, t.TempDir(), func(c *Config) { c.AuditLog = &audit })
	b.srv.SetLinkService(&recLinks{})
	req := &wireext.CreateMirrorLinkRequest{Link: wireext.LinkConfig{Name: "l", SourceBootstrap: "s:9092",
		SourceConfig: map[string]string{"sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="hunter2";`}}}
	if code, _ := outcome(t, b, "", wireext.APIKeyCreateMirrorLink, req); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	req.ValidateOnly = true
	outcome(t, b, "", wireext.APIKeyCreateMirrorLink, req)
	recs := auditRecords(t, &audit)
	if len(recs) != 1 || recs[0]["action"] != "create link" || recs[0]["resource_type"] != auditLinkType || recs[0]["resource"] != "l" {
		t.Fatalf("records %v", recs)
	}
	if keys := fmt.Sprint(recs[0]["source_config_keys"]); keys != "[sasl.jaas.config]" {
		t.Fatalf("keys %s", keys)
	}
	if strings.Contains(audit.String(), "hunter2") {
		t.Fatalf("secret in the audit log:\n%s", audit.String())
	}
}

// noError is code 0 in wantings of a *kerr.Error.
var noError = &kerr.Error{Message: "NONE", Code: 0}

// TestAuditMirrorRegistration: a pusher's writer registration is one
// audit record per topic with the epoch assigned; a refused one records
// the refusal.
func TestAuditMirrorRegistration(t *testing.T) {
	var audit logbuf.Buffer
	b := startBroker(t, t.TempDir(), func(c *Config) { c.AuditLog = &audit })
	createTopic(t, b, "m", 2, map[string]*string{"mirror.mode": sp("push")})
	epoch := registerAs(t, b, "m", writerID{7}, 0, 1)
	rawRequest[*kmsg.DeleteRecordsResponse](t, b, registration("none", writerID{7}, 0))
	var regs []map[string]any
	for _, r := range auditRecords(t, &audit) {
		if r["action"] == "register mirror writer" {
			regs = append(regs, r)
		}
	}
	if len(regs) != 2 || regs[0]["resource"] != "m" || regs[0]["outcome"] != "OK" || regs[0]["writer_epoch"] != float64(epoch) ||
		regs[0]["writer_id"] != "07000000000000000000000000000000" || regs[0]["partitions"] != 2.0 ||
		regs[1]["resource"] != "none" || regs[1]["outcome"] != "UNKNOWN_TOPIC_OR_PARTITION" {
		t.Fatalf("registration records %v", regs)
	}
}
