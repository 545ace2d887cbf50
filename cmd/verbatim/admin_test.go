package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/admin"
	"github.com/verbatim-kafka/verbatim/authn"
	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/internal/testkit/logbuf"
)

// runAdmin runs `verbatim topic|group|cluster|link|mirror ARGS` and returns its exit
// code, stdout and stderr.
func runAdmin(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	var code int
	switch args[0] {
	case "topic":
		code = topicMain(args[1:], &out, &errb)
	case "group":
		code = groupMain(args[1:], &out, &errb)
	case "cluster":
		code = clusterMain(args[1:], &out, &errb)
	case "link":
		code = linkMain(args[1:], &out, &errb)
	case "mirror":
		code = mirrorMain(args[1:], &out, &errb)
	}
	return code, out.String(), errb.String()
}

// adminJSON runs a command with --json, wants exit 0 and decodes stdout.
func adminJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	code, out, errs := runAdmin(append(args, "--json")...)
	if code != 0 {
		t.Fatalf("%v: exit %d\n%s%s", args, code, out, errs)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
}

func wantExit(t *testing.T, code int, msg string, args ...string) string {
	t.Helper()
	c, out, errs := runAdmin(args...)
	if c != code || !strings.Contains(out+errs, msg) {
		t.Fatalf("%v: exit %d, want %d with %q\n%s%s", args, c, code, msg, out, errs)
	}
	return out
}

// TestAdminCommands drives every admin command against an in-process
// Verbatim: a topic created with a config is listed and described with
// it, configs are set and deleted, partitions added; a group's committed
// offsets show with their lag; refusals are exit 1 with Kafka's error
// name; the topic and group are deleted.
func TestAdminCommands(t *testing.T) {
	d := testkit.StartDest(t, t.TempDir())
	b := "--bootstrap-server=" + d.Addr
	wantExit(t, 0, "created topic demo (2 partitions)", "topic", "create", "demo", "--partitions", "2", "--config", "retention.ms=3600000", b)
	wantExit(t, 1, "TOPIC_ALREADY_EXISTS (error code 36)", "topic", "create", "demo", "--partitions", "2", b)
	wantExit(t, 1, "INVALID_CONFIG", "topic", "create", "bad", "--partitions", "1", "--config", "retention.ms=soon", b)

	var list []admin.TopicSummary
	adminJSON(t, &list, "topic", "list", b)
	if len(list) != 1 || list[0].Name != "demo" || list[0].Partitions != 2 || list[0].Replicas != 1 {
		t.Fatalf("topic list: %+v", list)
	}
	if out := wantExit(t, 0, "demo", "topic", "list", b); !strings.HasPrefix(out, "NAME") {
		t.Fatalf("topic list table:\n%s", out)
	}
	var desc admin.TopicDescription
	adminJSON(t, &desc, "topic", "describe", "demo", b)
	if desc.Name != "demo" || len(desc.Partitions) != 2 || desc.Partitions[1].Leader != 1 || desc.Configs["retention.ms"] != "3600000" || desc.ID != list[0].ID {
		t.Fatalf("topic describe: %+v", desc)
	}
	wantExit(t, 1, "UNKNOWN_TOPIC_OR_PARTITION", "topic", "describe", "nope", b)

	wantExit(t, 0, "altered", "topic", "alter-config", "--topic", "demo", "--config", "cleanup.policy=compact", "--delete-config", "retention.ms", b)
	desc = admin.TopicDescription{} // Unmarshal would merge into the old map
	adminJSON(t, &desc, "topic", "describe", "demo", b)
	if len(desc.Configs) != 1 || desc.Configs["cleanup.policy"] != "compact" {
		t.Fatalf("configs after alter-config: %v", desc.Configs)
	}
	wantExit(t, 1, "INVALID_CONFIG", "topic", "alter-config", "demo", "--config", "cleanup.policy=sometimes", b)
	wantExit(t, 0, "now has 3 partitions", "topic", "add-partitions", "demo", "--partitions", "3", b)
	wantExit(t, 1, "INVALID_PARTITIONS", "topic", "add-partitions", "demo", "--partitions", "2", b)
	adminJSON(t, &desc, "topic", "describe", "demo", b)
	if len(desc.Partitions) != 3 {
		t.Fatalf("partitions after add-partitions: %+v", desc.Partitions)
	}

	// 5 records in partition 0, a group committed at 2: lag 3.
	cl := testkit.Client(t, d.Addr, kgo.DefaultProduceTopic("demo"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 5 {
		if err := cl.ProduceSync(testkit.Ctx(t), &kgo.Record{Partition: 0, Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := testkit.CommitStandalone(testkit.Ctx(t), cl, "g1", "demo", 0, 2); err != nil {
		t.Fatalf("OffsetCommit: %v", err)
	}
	var groups []admin.GroupSummary
	adminJSON(t, &groups, "group", "list", b)
	if len(groups) != 1 || groups[0].Group != "g1" {
		t.Fatalf("group list: %+v", groups)
	}
	var gd admin.GroupDescription
	adminJSON(t, &gd, "group", "describe", "g1", b)
	if gd.State != "Empty" || len(gd.Members) != 0 || len(gd.Offsets) != 1 ||
		gd.Offsets[0] != (admin.GroupOffset{Topic: "demo", Partition: 0, Committed: 2, LogEnd: 5, Lag: 3}) {
		t.Fatalf("group describe: %+v", gd)
	}
	if out := wantExit(t, 0, "LAG", "group", "describe", "g1", b); !strings.Contains(out, "demo   0          2               5               3    -") {
		t.Fatalf("group describe table:\n%s", out)
	}

	var ci admin.ClusterInfo
	adminJSON(t, &ci, "cluster", "info", b)
	if ci.ClusterID == "" || len(ci.Brokers) != 1 || net.JoinHostPort(ci.Brokers[0].Host, fmt.Sprint(ci.Brokers[0].Port)) != d.Addr {
		t.Fatalf("cluster info: %+v", ci)
	}

	// reset-offsets: a dry run by default, then committed with --execute;
	// --to-offset is clamped to the log's range.
	var plan admin.ResetPlan
	adminJSON(t, &plan, "group", "reset-offsets", "g1", "--all-topics", "--to-earliest", b)
	if plan.Executed || len(plan.Offsets) != 1 || plan.Offsets[0] != (admin.ResetOffset{Topic: "demo", Partition: 0, Previous: 2, NewOffset: 0}) {
		t.Fatalf("dry run: %+v", plan)
	}
	if out := wantExit(t, 0, "dry run", "group", "reset-offsets", "g1", "--all-topics", "--to-earliest", b); !strings.Contains(out, "g1     demo   0          2                0") {
		t.Fatalf("dry run table:\n%s", out)
	}
	gd = admin.GroupDescription{}
	adminJSON(t, &gd, "group", "describe", "g1", b)
	if len(gd.Offsets) != 1 || gd.Offsets[0].Committed != 2 {
		t.Fatalf("a dry run committed: %+v", gd.Offsets)
	}
	plan = admin.ResetPlan{}
	adminJSON(t, &plan, "group", "reset-offsets", "g1", "--topic", "demo:0", "--to-offset", "99", "--execute", b)
	if !plan.Executed || len(plan.Offsets) != 1 || plan.Offsets[0].NewOffset != 5 {
		t.Fatalf("--to-offset 99: %+v", plan)
	}
	plan = admin.ResetPlan{}
	adminJSON(t, &plan, "group", "reset-offsets", "g1", "--topic", "demo", "--to-latest", "--execute", b)
	if want := []admin.ResetOffset{{Topic: "demo", Partition: 0, Previous: 5, NewOffset: 5},
		{Topic: "demo", Partition: 1, Previous: -1, NewOffset: 0}, {Topic: "demo", Partition: 2, Previous: -1, NewOffset: 0}}; !reflect.DeepEqual(plan.Offsets, want) {
		t.Fatalf("--to-latest on every partition: %+v", plan.Offsets)
	}
	gd = admin.GroupDescription{}
	adminJSON(t, &gd, "group", "describe", "g1", b)
	if len(gd.Offsets) != 3 || gd.Offsets[0].Committed != 5 || gd.Offsets[0].Lag != 0 {
		t.Fatalf("after --execute: %+v", gd.Offsets)
	}
	wantExit(t, 1, "UNKNOWN_TOPIC_OR_PARTITION", "group", "reset-offsets", "g1", "--topic", "nope", "--to-latest", b)

	wantExit(t, 0, "deleted group g1", "group", "delete", "g1", b)
	wantExit(t, 1, "GROUP_ID_NOT_FOUND", "group", "delete", "g1", b)
	wantExit(t, 0, "deleted topic demo", "topic", "delete", "demo", b)
	wantExit(t, 1, "UNKNOWN_TOPIC_OR_PARTITION", "topic", "delete", "demo", b)
}

func TestAdminUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"topic"}, "usage"},
		{[]string{"topic", "sideways"}, "unknown subcommand"},
		{[]string{"topic", "create", "x"}, "--partitions N"},
		{[]string{"topic", "create", "--partitions", "1"}, "a topic NAME is required"},
		{[]string{"topic", "create", "x", "--partitions", "1", "--config", "novalue"}, "want k=v"},
		{[]string{"topic", "create", "x", "--topic", "y", "--partitions", "1"}, "differ"},
		{[]string{"topic", "alter-config", "x"}, "nothing to change"},
		{[]string{"topic", "list", "extra"}, "unexpected arguments"},
		{[]string{"topic", "list", "--bootstrap-server", "nohostport"}, "--bootstrap-server"},
		{[]string{"group", "describe"}, "a group NAME is required"},
		{[]string{"group", "reset-offsets", "g", "--all-topics"}, "exactly one of"},
		{[]string{"group", "reset-offsets", "g", "--to-latest", "--to-earliest", "--all-topics"}, "exactly one of"},
		{[]string{"group", "reset-offsets", "g", "--to-latest"}, "either --all-topics or --topic"},
		{[]string{"group", "reset-offsets", "g", "--to-latest", "--topic", "t", "--all-topics"}, "either --all-topics or --topic"},
		{[]string{"group", "reset-offsets", "g", "--to-latest", "--topic", "t:x"}, "bad partition"},
		{[]string{"group", "reset-offsets", "g", "--to-latest", "--topic", "t", "--dry-run", "--execute"}, "exclude each other"},
		{[]string{"cluster", "info", "--command-config", "/nonexistent/client.properties"}, "--command-config"},
		// Nothing listens on port 1: a connection problem is exit 2.
		{[]string{"cluster", "info", "--bootstrap-server", "127.0.0.1:1"}, "connection refused"},
	} {
		if c, out, errs := runAdmin(tc.args...); c != 2 || !strings.Contains(out+errs, tc.msg) {
			t.Errorf("%v: exit %d, want 2 with %q\n%s%s", tc.args, c, tc.msg, out, errs)
		}
	}
}

// TestAdminACLs: on a SASL listener with the authorizer on, a user with
// no ACL is refused topic create (exit 1, TOPIC_AUTHORIZATION_FAILED)
// and sees no topics; the super user creates the topic; the audit log
// records both with their principals.
func TestAdminACLs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if code := formatMain([]string{"--data-dir", dir, "--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]",
		"--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-secret]"}, io.Discard, io.Discard); code != 0 {
		t.Fatalf("format: exit %d", code)
	}
	zero := time.Duration(0)
	var audit logbuf.Buffer
	srv, err := broker.Open(broker.Config{DataDir: dir, NodeID: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), AuditLog: &audit,
		SASL:       map[string]*broker.SASLListenerConfig{"": {Mechanisms: []string{authn.SCRAMSHA512}}},
		Authorizer: true, SuperUsers: []string{"User:admin"}, FailedAuthenticationDelay: &zero})
	if err != nil {
		t.Fatal(err)
	}
	addr := testkit.ServeSASL(t, srv)
	cfg := func(user string) string {
		return "--command-config=" + writeProps(t, user+".properties", "security.protocol=SASL_PLAINTEXT", "sasl.mechanism=SCRAM-SHA-512",
			`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="`+user+`" password="`+user+`-secret";`)
	}
	b := "--bootstrap-server=" + addr
	wantExit(t, 1, "TOPIC_AUTHORIZATION_FAILED (error code 29)", "topic", "create", "secret", "--partitions", "1", b, cfg("alice"))
	wantExit(t, 0, "created topic secret", "topic", "create", "secret", "--partitions", "1", b, cfg("admin"))
	// The audit log names who was refused and who created it, from where.
	lines := strings.Split(strings.TrimSpace(audit.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"principal":"User:alice"`) || !strings.Contains(lines[0], `"outcome":"TOPIC_AUTHORIZATION_FAILED"`) ||
		!strings.Contains(lines[1], `"principal":"User:admin"`) || !strings.Contains(lines[1], `"outcome":"OK"`) || !strings.Contains(lines[1], `"client":"127.0.0.1:`) ||
		!strings.Contains(lines[1], `"listener":"SASL_PLAINTEXT"`) {
		t.Fatalf("audit log:\n%s", audit.String())
	}
	wantExit(t, 1, "TOPIC_AUTHORIZATION_FAILED", "topic", "describe", "secret", b, cfg("alice"))
	wantExit(t, 1, "TOPIC_AUTHORIZATION_FAILED", "topic", "delete", "secret", b, cfg("alice"))
	var list []admin.TopicSummary
	adminJSON(t, &list, "topic", "list", b, cfg("alice"))
	if len(list) != 0 {
		t.Fatalf("alice lists %+v", list)
	}
	adminJSON(t, &list, "topic", "list", b, cfg("admin"))
	if len(list) != 1 || list[0].Name != "secret" {
		t.Fatalf("admin lists %+v", list)
	}
	wantExit(t, 1, "GROUP_AUTHORIZATION_FAILED", "group", "describe", "g", b, cfg("alice"))
	wantExit(t, 2, "SASL", "cluster", "info", b, "--command-config="+writeProps(t, "bad.properties", "security.protocol=SASL_PLAINTEXT",
		"sasl.mechanism=SCRAM-SHA-512", `sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="nope";`))
}

// TestServeAuditLogFlag: `serve --audit-log FILE` appends the audit
// records there as JSON lines (and not to the main log); an unwritable
// path is exit 2.
func TestServeAuditLogFlag(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "audit.jsonl")
	var out logbuf.Buffer
	addr, code := startServe(t, []string{"--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"), "--log-format", "json", "--audit-log", file}, &out)
	wantExit(t, 0, "created topic", "topic", "create", "audited", "--partitions", "1", "--bootstrap-server", addr)
	stopServe(t, code, &out)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(data), &rec); err != nil || rec["action"] != "create topic" || rec["resource"] != "audited" || rec["outcome"] != "OK" {
		t.Fatalf("audit file %q: %v", data, err)
	}
	if strings.Contains(out.String(), `"msg":"audit"`) {
		t.Fatalf("audit record on the main log too:\n%s", out.String())
	}
	var errb bytes.Buffer
	if c := serveMain([]string{"--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data2"), "--audit-log", filepath.Join(dir, "no", "such", "dir", "a")}, &errb, nil); c != 2 || !strings.Contains(errb.String(), "--audit-log") {
		t.Fatalf("unwritable --audit-log: exit %d: %s", c, errb.String())
	}
}

// stopServe sends this process SIGTERM and wants the serveMain started by
// startServe to exit 0.
func stopServe(t *testing.T, code chan int, out *logbuf.Buffer) {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("serve exit %d:\n%s", c, out.String())
		}
	case <-time.After(120 * time.Second):
		t.Fatalf("serve did not stop:\n%s", out.String())
	}
}
