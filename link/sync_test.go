package link

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/secret"
	"github.com/verbatim-kafka/verbatim/verify"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// syncEnv is a destination broker with a link Manager whose links run a
// sync round only when the test asks (round), and a kfake source.
type syncEnv struct {
	t      *testing.T
	dir    string
	dest   *testkit.Dest
	srv    *broker.Server
	addr   string
	m      *Manager
	src    *kfake.Cluster
	rounds chan string
}

// secretConfig is password.encoder.* with Kafka's minimum iteration
// count (fast).
func secretConfig(s, old string) secret.Config {
	return secret.Config{Secret: s, OldSecret: old, Iterations: secret.MinIterations}
}

func newSyncEnv(t *testing.T, src *kfake.Cluster, secrets secret.Config) *syncEnv {
	t.Helper()
	e := &syncEnv{t: t, dir: t.TempDir(), src: src, rounds: make(chan string, 64)}
	syncRoundDone = func(r *runner) { e.rounds <- r.name }
	t.Cleanup(func() { syncRoundDone = nil })
	e.open(secrets)
	t.Cleanup(e.close)
	return e
}

// open starts the broker and the Manager over e.dir.
func (e *syncEnv) open(secrets secret.Config) {
	t := e.t
	t.Helper()
	zero := time.Duration(0)
	e.dest = testkit.StartDestConfig(t, broker.Config{DataDir: e.dir, NodeID: 1, LinkSecrets: secrets, GroupInitialRebalanceDelay: &zero})
	e.srv, e.addr = e.dest.Srv, e.dest.Addr
	m, err := Open(Config{Host: e.srv, SyncInterval: time.Hour})
	if err != nil {
		t.Fatalf("link.Open: %v", err)
	}
	e.m = m
	e.srv.SetLinkService(m)
}

func (e *syncEnv) close() {
	if e.srv == nil {
		return
	}
	e.srv.SetLinkService(nil)
	_ = e.m.Close()
	e.dest.Stop()
	e.srv = nil
}

// awaitRound waits for the end of a sync round of link (one is under way:
// the first after creation or Open, or one round asked for).
func (e *syncEnv) awaitRound(link string) {
	e.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case n := <-e.rounds:
			if n == link {
				return
			}
		case <-deadline:
			e.t.Fatalf("link %s: no sync round within 30 s", link)
		}
	}
}

// round runs one more sync round of link and waits for it.
func (e *syncEnv) round(link string) {
	e.t.Helper()
	r := e.m.link(link)
	if r == nil {
		e.t.Fatalf("no link %s", link)
	}
	r.poke()
	e.awaitRound(link)
}

// create creates a link from the kfake source and waits for its first
// round.
func (e *syncEnv) create(cfg wireext.LinkConfig) {
	e.t.Helper()
	if cfg.SourceBootstrap == "" {
		cfg.SourceBootstrap = e.src.ListenAddrs()[0]
	}
	if err := e.m.CreateLink(testkit.Ctx(e.t), "User:test", cfg, false); err != nil {
		e.t.Fatalf("CreateLink: %v", err)
	}
	e.awaitRound(cfg.Name)
}

func (e *syncEnv) statuses(link string) []wireext.MirrorPartitionStatus {
	e.t.Helper()
	sts, err := e.m.DescribeMirrors(testkit.Ctx(e.t), wireext.DescribeMirrorsRequest{Link: link})
	if err != nil {
		e.t.Fatal(err)
	}
	return sts
}

// awaitLogEnd waits until the copy brought topic/partition to end.
func (e *syncEnv) awaitLogEnd(topic string, partition int32, end int64) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, leo, err := e.srv.MirrorLogRange(topic, partition)
		if err == nil && leo >= end {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s/%d: log end %d (%v), want %d", topic, partition, leo, err, end)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *syncEnv) topicConfigs(topic string) map[string]string {
	e.t.Helper()
	info, ok := e.srv.LinkTopic(topic)
	if !ok {
		e.t.Fatalf("no topic %s on the destination", topic)
	}
	return info.Configs
}

func srcAdmin(t *testing.T, src *kfake.Cluster) *kadm.Client {
	return kadm.NewClient(testkit.Client(t, src.ListenAddrs()[0]))
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestSyncConfigs: a config changed on the source reaches the mirror
// topic at the next round; mirror.* and the local configs are neither
// copied nor removed; a config the broker does not know is left out, and
// one whose value it refuses does not hold back the others.
func TestSyncConfigs(t *testing.T) {
	src := testkit.StartSource(t)
	adm := srcAdmin(t, src)
	ctx := testkit.Ctx(t)
	ret := "3600000"
	two := "2"
	_, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": &ret, "min.insync.replicas": &two}, "orders")
	mustOK(t, err)
	e := newSyncEnv(t, src, secret.Config{})
	e.create(wireext.LinkConfig{Name: "l", Topics: "orders", SyncConfigs: true})

	got := e.topicConfigs("orders")
	if got["retention.ms"] != "3600000" || got["mirror.mode"] != "pull" || got["mirror.link"] != "l" {
		t.Fatalf("created mirror topic configs: %v", got)
	}
	if _, ok := got["min.insync.replicas"]; ok {
		t.Fatalf("min.insync.replicas copied at creation: %v", got)
	}
	// A local setting on the destination.
	one := "1"
	dadm := kadm.NewClient(testkit.Client(t, e.addr))
	rs, err := dadm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: &one}}, "orders")
	mustOK(t, err)
	mustOK(t, rs[0].Err)

	newRet, maxMsg := "7200000", "500000"
	rs, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: &newRet},
		{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &maxMsg},
		{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: &two},
		{Op: kadm.SetConfig, Name: "kfake.is_internal", Value: kadmStr("false")},
		{Op: kadm.SetConfig, Name: "segment.bytes", Value: kadmStr("1000")}, // below Verbatim's 1 MiB minimum
	}, "orders")
	mustOK(t, err)
	mustOK(t, rs[0].Err)
	e.round("l")
	got = e.topicConfigs("orders")
	want := map[string]string{"retention.ms": "7200000", "max.message.bytes": "500000", "min.insync.replicas": "1", "mirror.mode": "pull", "mirror.link": "l"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("after the sync %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	if _, ok := got["kfake.is_internal"]; ok {
		t.Errorf("a config the broker does not know was copied: %v", got)
	}
	if _, ok := got["segment.bytes"]; ok {
		t.Errorf("a value the broker refuses was set: %v", got)
	}

	// A config removed on the source is removed on the mirror.
	rs, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "max.message.bytes"}}, "orders")
	mustOK(t, err)
	mustOK(t, rs[0].Err)
	e.round("l")
	if got = e.topicConfigs("orders"); got["max.message.bytes"] != "" || got["retention.ms"] != "7200000" {
		t.Fatalf("after the source removed max.message.bytes: %v", got)
	}
}

func kadmStr(s string) *string { return &s }

// TestSyncConfigsOff: without SyncConfigs a source change stays on the
// source.
func TestSyncConfigsOff(t *testing.T) {
	src := testkit.StartSource(t)
	adm := srcAdmin(t, src)
	ctx := testkit.Ctx(t)
	_, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": kadmStr("3600000")}, "t")
	mustOK(t, err)
	e := newSyncEnv(t, src, secret.Config{})
	e.create(wireext.LinkConfig{Name: "l", Topics: "t"})
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadmStr("60000")}}, "t")
	mustOK(t, err)
	mustOK(t, rs[0].Err)
	e.round("l")
	if got := e.topicConfigs("t")["retention.ms"]; got != "3600000" {
		t.Fatalf("retention.ms = %q without SyncConfigs, want the creation's 3600000", got)
	}
}

func failedReasons(sts []wireext.MirrorPartitionStatus, topic string) []string {
	var out []string
	for _, st := range sts {
		if st.Topic == topic {
			if st.State != wireext.StateFailed {
				out = append(out, st.State)
			} else {
				out = append(out, st.Reason)
			}
		}
	}
	return out
}

// TestSyncSourceTopicDeletedAndRecreated: a deleted source topic puts
// its partitions in FAILED; re-created, FAILED naming both ids, and the
// new topic's records and partitions are not mirrored.
func TestSyncSourceTopicDeletedAndRecreated(t *testing.T) {
	src := testkit.StartSource(t, kfake.SeedTopics(2, "t", "keep"))
	ctx := testkit.Ctx(t)
	pc := testkit.Client(t, src.ListenAddrs()[0], kgo.RecordPartitioner(kgo.ManualPartitioner()))
	mustOK(t, pc.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: 0, Value: []byte("a")}, &kgo.Record{Topic: "t", Partition: 1, Value: []byte("b")}).FirstErr())
	e := newSyncEnv(t, src, secret.Config{})
	e.create(wireext.LinkConfig{Name: "l", Topics: "t|keep"})
	e.awaitLogEnd("t", 0, 1)
	e.awaitLogEnd("t", 1, 1)
	oldInfo, _ := e.srv.LinkTopic("t")

	adm := srcAdmin(t, src)
	_, err := adm.DeleteTopics(ctx, "t")
	mustOK(t, err)
	e.round("l")
	sts := e.statuses("l")
	if got := failedReasons(sts, "t"); len(got) != 2 || got[0] != reasonSourceDeleted || got[1] != reasonSourceDeleted {
		t.Fatalf("after the source topic's deletion: %v", got)
	}
	for _, st := range sts {
		if st.Topic == "keep" && st.State == wireext.StateFailed {
			t.Fatalf("an untouched topic failed: %+v", st)
		}
	}

	// Re-created with more partitions and new records.
	_, err = adm.CreateTopic(ctx, 3, 1, nil, "t")
	mustOK(t, err)
	pc = testkit.Client(t, src.ListenAddrs()[0], kgo.RecordPartitioner(kgo.ManualPartitioner()))
	mustOK(t, pc.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: 0, Value: []byte("new-0")}, &kgo.Record{Topic: "t", Partition: 0, Value: []byte("new-1")},
		&kgo.Record{Topic: "t", Partition: 2, Value: []byte("new-2")}).FirstErr())
	md, err := adm.Metadata(ctx, "t")
	mustOK(t, err)
	newID := md.Topics["t"].ID
	e.round("l")
	e.round("l") // a second round changes nothing
	want := "source topic re-created: id " + formatID(newID) + ", was " + formatID(oldInfo.ID)
	if got := failedReasons(e.statuses("l"), "t"); len(got) != 2 || got[0] != want || got[1] != want {
		t.Fatalf("after the re-creation: %v, want 2 x %q", got, want)
	}
	info, _ := e.srv.LinkTopic("t")
	if info.Partitions != 2 || info.ID != oldInfo.ID {
		t.Fatalf("the mirror topic changed: %d partitions, id %s", info.Partitions, formatID(info.ID))
	}
	if _, leo, _ := e.srv.MirrorLogRange("t", 0); leo != 1 {
		t.Fatalf("t/0 log end %d: the re-created topic's records were mirrored", leo)
	}
	// Still failed after a restart (persisted).
	e.close()
	e.open(secret.Config{})
	e.awaitRound("l")
	if got := failedReasons(e.statuses("l"), "t"); len(got) != 2 || got[0] != want {
		t.Fatalf("after a restart: %v", got)
	}

	// The operator deletes the destination's copy: the link mirrors the
	// new source topic afresh (its id, its partitions, its records).
	dadm := kadm.NewClient(testkit.Client(t, e.addr))
	_, err = dadm.DeleteTopics(ctx, "t")
	mustOK(t, err)
	e.round("l")
	e.awaitLogEnd("t", 0, 2)
	e.awaitLogEnd("t", 2, 1)
	if info, _ = e.srv.LinkTopic("t"); info.ID != newID || info.Partitions != 3 {
		t.Fatalf("the new mirror topic: id %s, %d partitions", formatID(info.ID), info.Partitions)
	}
	e.round("l")
	for _, st := range e.statuses("l") {
		if st.Topic == "t" && st.State == wireext.StateFailed {
			t.Fatalf("the new mirror's partition failed: %+v", st)
		}
	}
}

// TestSyncGroupOffsets: committed offsets of the link's groups are copied
// with their leader epoch and metadata, clamped into the destination's
// range; a group with a member on the destination is left alone, and
// groups outside the pattern too.
func TestSyncGroupOffsets(t *testing.T) {
	src := testkit.StartSource(t, kfake.SeedTopics(2, "t"))
	ctx := testkit.Ctx(t)
	pc := testkit.Client(t, src.ListenAddrs()[0], kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < 5; i++ {
		mustOK(t, pc.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: 0, Value: []byte("x")}).FirstErr())
	}
	mustOK(t, pc.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: 1, Value: []byte("y")}).FirstErr())
	adm := srcAdmin(t, src)
	commit := func(group string, offs ...kadm.Offset) {
		t.Helper()
		os := kadm.Offsets{}
		for _, o := range offs {
			os.Add(o)
		}
		r, err := adm.CommitOffsets(ctx, group, os)
		if err == nil {
			err = r.Error()
		}
		mustOK(t, err)
	}
	commit("app-1", kadm.Offset{Topic: "t", Partition: 0, At: 3, LeaderEpoch: 0, Metadata: "m0"}, kadm.Offset{Topic: "t", Partition: 1, At: 500, LeaderEpoch: 0, Metadata: "beyond"})
	commit("app-busy", kadm.Offset{Topic: "t", Partition: 0, At: 2, LeaderEpoch: 0})
	commit("other", kadm.Offset{Topic: "t", Partition: 0, At: 1, LeaderEpoch: 0})

	e := newSyncEnv(t, src, secret.Config{})
	e.create(wireext.LinkConfig{Name: "l", Topics: "t", Groups: "app-.*"})
	e.awaitLogEnd("t", 0, 5)
	e.awaitLogEnd("t", 1, 1)

	// app-busy gets a member on the destination, with offset 4 of its own.
	dc := testkit.Client(t, e.addr)
	mustOK(t, testkit.CommitStandalone(ctx, dc, "app-busy", "t", 0, 4))
	busy := testkit.Client(t, e.addr, kgo.ConsumerGroup("app-busy"), kgo.ConsumeTopics("t"), kgo.SessionTimeout(30*time.Second), kgo.DisableAutoCommit())
	for deadline := time.Now().Add(20 * time.Second); ; {
		busy.PollRecords(ctxShort(t), 1) // joins
		if n, _, _ := e.srv.LinkGroupMembers("app-busy"); n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the consumer did not join app-busy on the destination")
		}
	}
	// The broker's commit itself refuses a group with members, whole.
	if _, err := e.srv.CommitLinkGroupOffsets("app-busy", []broker.LinkGroupOffset{{Topic: "t", Partition: 0, Offset: 1, LeaderEpoch: -1}}); !errors.Is(err, broker.ErrLinkGroupActive) {
		t.Fatalf("a commit to a group with a member: %v", err)
	}
	e.round("l")

	got, err := e.srv.LinkGroupOffsets("app-1")
	mustOK(t, err)
	want := []broker.LinkGroupOffset{
		{Topic: "t", Partition: 0, Offset: 3, LeaderEpoch: 0, Metadata: "m0"},
		{Topic: "t", Partition: 1, Offset: 1, LeaderEpoch: 0, Metadata: "beyond"}, // clamped to the high watermark
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("app-1 on the destination: %+v, want %+v", got, want)
	}
	busyGot, err := e.srv.LinkGroupOffsets("app-busy")
	mustOK(t, err)
	if len(busyGot) != 1 || busyGot[0].Offset != 4 {
		t.Fatalf("app-busy (a member on the destination) was synced: %+v", busyGot)
	}
	if other, _ := e.srv.LinkGroupOffsets("other"); len(other) != 0 {
		t.Fatalf("a group outside the pattern was synced: %+v", other)
	}

	// The source moves on; the member leaves: the next round syncs it.
	commit("app-1", kadm.Offset{Topic: "t", Partition: 0, At: 5, LeaderEpoch: 0, Metadata: "m1"})
	busy.Close()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if n, _, _ := e.srv.LinkGroupMembers("app-busy"); n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the consumer did not leave app-busy")
		}
	}
	e.round("l")
	if got, _ = e.srv.LinkGroupOffsets("app-1"); got[0].Offset != 5 || got[0].Metadata != "m1" {
		t.Fatalf("app-1 t/0 after the source's new commit: %+v", got[0])
	}
	if busyGot, _ = e.srv.LinkGroupOffsets("app-busy"); len(busyGot) != 1 || busyGot[0].Offset != 2 {
		t.Fatalf("app-busy once empty: %+v, want the source's 2", busyGot)
	}
	// verify, clamping on its own, agrees.
	re, _ := client.CompileGroups("app-.*")
	rep, err := verify.Run(ctx, verify.Options{Source: src.ListenAddrs()[0], Dest: e.addr, Topics: []string{"t"}, Groups: re})
	mustOK(t, err)
	if !rep.Exact || len(rep.Groups) != 3 {
		t.Fatalf("verify: exact %v, groups %+v", rep.Exact, rep.Groups)
	}
}

func ctxShort(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}

// TestLinkSecretsAtRest: a link whose source config holds a password is
// refused without password.encoder.secret; with it the meta file holds
// no clear secret, describe masks it, a restart decodes it, a wrong
// secret leaves the link UNAVAILABLE, and a rotation re-encodes it.
func TestLinkSecretsAtRest(t *testing.T) {
	src := testkit.StartSource(t, kfake.EnableSASL(), kfake.Superuser("PLAIN", "mirror", "hunter2-pw"), kfake.SeedTopics(1, "t"))
	jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required username="mirror" password="hunter2-pw";`
	cfg := wireext.LinkConfig{Name: "sec", SourceBootstrap: src.ListenAddrs()[0], Topics: "t",
		SourceConfig: map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas}}

	e := newSyncEnv(t, src, secret.Config{})
	err := e.m.CreateLink(testkit.Ctx(t), "User:test", cfg, true)
	if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), "password.encoder.secret") || !strings.Contains(err.Error(), "sasl.jaas.config") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("CreateLink without password.encoder.secret: %v", err)
	}
	e.close()

	e.open(secretConfig("s1", ""))
	e.create(cfg)
	raw, err := e.srv.ReadLinkMeta(linkFile("sec"))
	mustOK(t, err)
	if strings.Contains(string(raw), "hunter2") || !strings.Contains(string(raw), "encryptedPassword:") {
		t.Fatalf("the meta file holds the clear secret or no encoded one:\n%s", raw)
	}
	ds, err := e.m.DescribeLinks(testkit.Ctx(t), []string{"sec"})
	mustOK(t, err)
	if sc := ds[0].Config.SourceConfig; sc["sasl.jaas.config"] != secret.Hidden || sc["sasl.mechanism"] != "PLAIN" {
		t.Fatalf("described source config: %v", sc)
	}
	if ds[0].State != linkActive {
		t.Fatalf("link state %s (%s)", ds[0].State, ds[0].Reason)
	}

	// A wrong secret: UNAVAILABLE, saying why; the stored value kept.
	e.close()
	e.open(secretConfig("wrong", ""))
	ds, _ = e.m.DescribeLinks(testkit.Ctx(t), []string{"sec"})
	if ds[0].State != linkUnavailable || !strings.Contains(ds[0].Reason, "could not be decoded") {
		t.Fatalf("with a wrong secret: %s (%s)", ds[0].State, ds[0].Reason)
	}
	if again, _ := e.srv.ReadLinkMeta(linkFile("sec")); string(again) != string(raw) {
		t.Fatal("the stored credentials changed under a wrong secret")
	}

	// No secret at all: UNAVAILABLE too.
	e.close()
	e.open(secret.Config{})
	ds, _ = e.m.DescribeLinks(testkit.Ctx(t), []string{"sec"})
	if ds[0].State != linkUnavailable || !strings.Contains(ds[0].Reason, "password.encoder.secret is not set") {
		t.Fatalf("without a secret: %s (%s)", ds[0].State, ds[0].Reason)
	}

	// Rotation: the new secret with the old one re-encodes; then the new
	// one alone decodes.
	e.close()
	e.open(secretConfig("s2", "s1"))
	e.awaitRound("sec")
	rotated, _ := e.srv.ReadLinkMeta(linkFile("sec"))
	if string(rotated) == string(raw) || strings.Contains(string(rotated), "hunter2") {
		t.Fatal("the rotation did not re-encode the stored credentials")
	}
	e.close()
	e.open(secretConfig("s2", ""))
	e.awaitRound("sec")
	ds, _ = e.m.DescribeLinks(testkit.Ctx(t), []string{"sec"})
	if ds[0].State != linkActive {
		t.Fatalf("after the rotation, the new secret alone: %s (%s)", ds[0].State, ds[0].Reason)
	}
}
