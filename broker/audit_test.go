package broker

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/internal/testkit/logbuf"
)

// auditRecords decodes the JSON lines logged to l.
func auditRecords(t *testing.T, l *logbuf.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range l.Lines() {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// TestAuditLog: every admin mutation is one JSON line with the action,
// resource, principal, client address, listener and outcome (Kafka's
// error name when refused); validate-only requests and reads are not
// recorded; config values are not written.
func TestAuditLog(t *testing.T) {
	var audit logbuf.Buffer
	b := startBroker(t, t.TempDir(), func(c *Config) { c.AuditLog = &audit })
	adm := b.admin()
	ctx := ctxT(t)
	if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": kmsg.StringPtr("123456")}, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "a"); err == nil {
		t.Fatal("second create succeeded")
	}
	if _, err := adm.ValidateCreateTopics(ctx, 1, 1, nil, "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.ListTopics(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kmsg.StringPtr("654321")}}, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreatePartitions(ctx, 3, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.DeleteGroups(ctx, "nogroup"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.DeleteTopics(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	recs := auditRecords(t, &audit)
	want := []struct{ action, rtype, resource, outcome string }{
		{"create topic", "TOPIC", "a", "OK"},
		{"create topic", "TOPIC", "a", "TOPIC_ALREADY_EXISTS"},
		{"alter configs", "TOPIC", "a", "OK"},
		{"create partitions", "TOPIC", "a", "OK"},
		{"delete group", "GROUP", "nogroup", "GROUP_ID_NOT_FOUND"},
		{"delete topic", "TOPIC", "a", "OK"},
	}
	if len(recs) != len(want) {
		t.Fatalf("%d audit records, want %d:\n%s", len(recs), len(want), audit.String())
	}
	for i, w := range want {
		r := recs[i]
		if r["msg"] != "audit" || r["action"] != w.action || r["resource_type"] != w.rtype || r["resource"] != w.resource || r["outcome"] != w.outcome ||
			r["principal"] != AnonymousPrincipal || r["listener"] != "PLAINTEXT" || !strings.HasPrefix(r["client"].(string), "127.0.0.1:") {
			t.Errorf("record %d: %v, want %+v", i, r, w)
		}
	}
	if strings.Contains(audit.String(), "654321") {
		t.Errorf("a config value is in the audit log:\n%s", audit.String())
	}
	if got := recs[2]["configs"]; len(got.([]any)) != 1 || got.([]any)[0] != "SET:retention.ms" {
		t.Errorf("alter configs record names %v", got)
	}
}

// TestAuditLogACLsAndSCRAM: ACL creations and deletions are recorded one
// line per binding, SCRAM changes per user (never the salted password),
// and a principal refused the cluster permission is recorded refused.
func TestAuditLogACLsAndSCRAM(t *testing.T) {
	var audit logbuf.Buffer
	b := startBroker(t, t.TempDir(), func(c *Config) {
		c.AuditLog = &audit
		c.Authorizer, c.SuperUsers = true, []string{AnonymousPrincipal}
	})
	adm := b.admin()
	ctx := ctxT(t)
	acl := kadm.NewACLs().Allow("User:alice").AllowHosts("*").Topics("t").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	if _, err := adm.CreateACLs(ctx, acl); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.DeleteACLs(ctx, acl); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 8192, Password: "bob-secret"}}); err != nil {
		t.Fatal(err)
	}
	recs := auditRecords(t, &audit)
	var got []string
	for _, r := range recs {
		got = append(got, r["action"].(string)+" "+r["resource_type"].(string)+" "+r["outcome"].(string))
	}
	want := "create acl ACL OK,delete acl ACL OK,alter scram credential USER OK"
	if strings.Join(got, ",") != want {
		t.Fatalf("audit records %q, want %q:\n%s", got, want, audit.String())
	}
	if !strings.Contains(recs[0]["resource"].(string), "User:alice") || recs[2]["resource"] != "bob" || recs[2]["mechanism"] != "SCRAM-SHA-256" {
		t.Errorf("records: %v", recs)
	}
	if strings.Contains(audit.String(), "bob-secret") {
		t.Error("the audit log holds a password")
	}
}

// TestAuditLogDefaultsToMainLog: without AuditLog the records are on the
// broker's log at INFO.
func TestAuditLogDefaultsToMainLog(t *testing.T) {
	var main logbuf.Buffer
	b := startBroker(t, t.TempDir(), func(c *Config) { c.Logger = slog.New(slog.NewJSONHandler(&main, nil)) })
	if _, err := b.admin().CreateTopic(ctxT(t), 1, 1, nil, "m"); err != nil {
		t.Fatal(err)
	}
	for _, r := range auditRecords(t, &main) {
		if r["msg"] == "audit" && r["level"] == "INFO" && r["action"] == "create topic" && r["resource"] == "m" && r["outcome"] == "OK" {
			return
		}
	}
	t.Fatalf("no audit record on the main log:\n%s", main.String())
}
