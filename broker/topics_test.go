package broker

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func sp(s string) *string { return &s }

func TestCreateDescribeDeleteTopics(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	adm := b.admin()
	ctx := ctxT(t)

	resp, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"cleanup.policy": sp("compact"), "retention.ms": sp("1000")}, "orders")
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	if resp.ID == (kadm.TopicID{}) {
		t.Fatal("no topic id returned")
	}
	if resp.NumPartitions != 3 || resp.ReplicationFactor != 1 {
		t.Fatalf("create response partitions=%d rf=%d", resp.NumPartitions, resp.ReplicationFactor)
	}

	md, err := adm.Metadata(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	td := md.Topics["orders"]
	if td.Err != nil || td.ID != resp.ID || len(td.Partitions) != 3 {
		t.Fatalf("metadata: err=%v id=%v partitions=%d", td.Err, td.ID, len(td.Partitions))
	}
	for _, p := range td.Partitions {
		if p.Leader != 1 || p.LeaderEpoch != 0 || len(p.Replicas) != 1 || len(p.ISR) != 1 {
			t.Fatalf("partition %+v", p)
		}
	}
	if md.Cluster == "" || md.Controller != 1 || len(md.Brokers) != 1 || md.Brokers[0].Port == 0 {
		t.Fatalf("cluster metadata: %+v", md)
	}

	rcs, err := adm.DescribeTopicConfigs(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("orders", nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe configs: %v %v", err, rc.Err)
	}
	got := map[string]kadm.Config{}
	for _, c := range rc.Configs {
		got[c.Key] = c
	}
	if c := got["cleanup.policy"]; c.MaybeValue() != "compact" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("cleanup.policy = %q source %v", c.MaybeValue(), c.Source)
	}
	if c := got["segment.bytes"]; c.MaybeValue() != "1073741824" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("segment.bytes = %q source %v", c.MaybeValue(), c.Source)
	}
	if c := got["retention.ms"]; len(c.Synonyms) != 2 || c.Synonyms[1].Key != "log.retention.ms" {
		t.Fatalf("retention.ms synonyms %+v", c.Synonyms)
	}
	if _, ok := got[cfgMirrorMode]; ok {
		t.Fatal("mirror.mode listed on an ordinary topic")
	}

	dr, err := adm.DeleteTopics(ctx, "orders", "missing")
	if err != nil {
		t.Fatal(err)
	}
	if dr["orders"].Err != nil {
		t.Fatalf("delete orders: %v", dr["orders"].Err)
	}
	if !errors.Is(dr["missing"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("delete missing: %v", dr["missing"].Err)
	}
	// A fresh client: kgo serves recent metadata from its cache.
	md, err = b.admin().Metadata(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(md.Topics["orders"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("metadata after delete: %+v", md.Topics)
	}
}

func TestCreateTopicsValidation(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	adm := b.admin()
	ctx := ctxT(t)
	cases := []struct {
		name    string
		topic   string
		parts   int32
		rf      int16
		configs map[string]*string
		want    error
		msg     string
	}{
		{"rf3", "a", 1, 3, nil, kerr.InvalidReplicationFactor, "only 1 broker(s) are registered"},
		{"rf0", "a", 1, 0, nil, kerr.InvalidReplicationFactor, "larger than 0"},
		{"zero partitions", "a", 0, 1, nil, kerr.InvalidPartitions, "non-positive"},
		{"bad name", "a/b", 1, 1, nil, kerr.InvalidTopicException, "illegal"},
		{"dot name", "..", 1, 1, nil, kerr.InvalidTopicException, ""},
		{"long name", strings.Repeat("x", 250), 1, 1, nil, kerr.InvalidTopicException, "249"},
		{"unknown config", "a", 1, 1, map[string]*string{"no.such": sp("1")}, kerr.InvalidConfig, "Unknown topic config name: no.such"},
		{"bad long", "a", 1, 1, map[string]*string{"retention.ms": sp("abc")}, kerr.InvalidConfig, "Invalid value abc for configuration retention.ms"},
		{"below min", "a", 1, 1, map[string]*string{"segment.bytes": sp("100")}, kerr.InvalidConfig, "at least 1048576"},
		{"bad enum", "a", 1, 1, map[string]*string{"cleanup.policy": sp("forever")}, kerr.InvalidConfig, "compact, delete"},
		{"bad bool", "a", 1, 1, map[string]*string{"preallocate": sp("yes")}, kerr.InvalidConfig, "true or false"},
		{"bad ratio", "a", 1, 1, map[string]*string{"min.cleanable.dirty.ratio": sp("1.5")}, kerr.InvalidConfig, "no more than 1"},
		{"bad ts type", "a", 1, 1, map[string]*string{"message.timestamp.type": sp("Now")}, kerr.InvalidConfig, ""},
		{"remote storage", "a", 1, 1, map[string]*string{"remote.storage.enable": sp("true")}, kerr.InvalidConfig, "not supported"},
		{"removed config", "a", 1, 1, map[string]*string{"message.downconversion.enable": sp("true")}, kerr.InvalidConfig, "Unknown topic config"},
		{"bad mirror mode", "a", 1, 1, map[string]*string{"mirror.mode": sp("sideways")}, kerr.InvalidConfig, "push, pull"},
		{"pull without link", "a", 1, 1, map[string]*string{"mirror.mode": sp("pull")}, kerr.InvalidConfig, "mirror.link"},
		{"source id alone", "a", 1, 1, map[string]*string{"mirror.source.cluster.id": sp("x")}, kerr.InvalidConfig, "mirror.mode=push"},
		{"null value", "a", 1, 1, map[string]*string{"retention.ms": nil}, kerr.InvalidRequest, "Null value"},
		{"compaction lags", "a", 1, 1, map[string]*string{"min.compaction.lag.ms": sp("10"), "max.compaction.lag.ms": sp("5")}, kerr.InvalidConfig, "min.compaction.lag.ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := adm.CreateTopic(ctx, tc.parts, tc.rf, tc.configs, tc.topic)
			if err != nil && !errors.Is(err, tc.want) {
				t.Fatalf("request error %v", err)
			}
			if !errors.Is(resp.Err, tc.want) {
				t.Fatalf("got %v, want %v", resp.Err, tc.want)
			}
			if !strings.Contains(resp.ErrMessage, tc.msg) {
				t.Fatalf("message %q does not contain %q", resp.ErrMessage, tc.msg)
			}
		})
	}
	if n := b.srv.cluster.topicCount(); n != 0 {
		t.Fatalf("%d topics exist after only invalid creates", n)
	}

	// validateOnly creates nothing; a duplicate create is TOPIC_ALREADY_EXISTS;
	// a '.'/'_' collision is refused.
	if r, err := adm.ValidateCreateTopics(ctx, 2, 1, nil, "v"); err != nil || r["v"].Err != nil {
		t.Fatalf("validate: %v %v", err, r["v"].Err)
	}
	if b.srv.cluster.topic("v") != nil {
		t.Fatal("validateOnly created the topic")
	}
	if r, _ := adm.CreateTopic(ctx, 1, -1, nil, "a.b"); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r, _ := adm.CreateTopic(ctx, 1, -1, nil, "a.b"); !errors.Is(r.Err, kerr.TopicAlreadyExists) {
		t.Fatalf("duplicate: %v", r.Err)
	}
	if r, _ := adm.CreateTopic(ctx, 1, -1, nil, "a_b"); !errors.Is(r.Err, kerr.InvalidTopicException) || !strings.Contains(r.ErrMessage, "collides") {
		t.Fatalf("collision: %v %q", r.Err, r.ErrMessage)
	}
	// -1 partitions uses the default.
	if r, _ := adm.CreateTopic(ctx, -1, -1, nil, "defaults"); r.Err != nil || r.NumPartitions != 1 {
		t.Fatalf("defaults: %v %d", r.Err, r.NumPartitions)
	}
}

func TestCreateTopicsOnePerTopicErrors(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	cl := b.client()
	req := kmsg.NewPtrCreateTopicsRequest()
	for _, tc := range []struct {
		name string
		rf   int16
	}{{"good", 1}, {"bad", 5}, {"dup", 1}, {"dup", 1}} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = tc.name, 2, tc.rf
		req.Topics = append(req.Topics, rt)
	}
	// A manual assignment on this node is accepted.
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "assigned", -1, -1
	for i := range 3 {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(i), []int32{1}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, rt)
	rt2 := rt
	rt2.Topic = "assigned-elsewhere"
	rt2.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{2}}}
	req.Topics = append(req.Topics, rt2)

	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	want := []int16{0, kerr.InvalidReplicationFactor.Code, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code, 0, kerr.InvalidReplicaAssignment.Code}
	if len(resp.Topics) != len(want) {
		t.Fatalf("%d topics answered", len(resp.Topics))
	}
	for i, st := range resp.Topics {
		if st.ErrorCode != want[i] {
			t.Errorf("topic %s: code %d, want %d", st.Topic, st.ErrorCode, want[i])
		}
	}
	if tp := b.srv.cluster.topic("assigned"); tp == nil || len(tp.Partitions()) != 3 {
		t.Fatal("assigned topic not created with 3 partitions")
	}
	if b.srv.cluster.topic("dup") != nil || b.srv.cluster.topic("bad") != nil {
		t.Fatal("a refused topic was created")
	}
}

func TestAlterConfigs(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	adm := b.admin()
	ctx := ctxT(t)
	if r, _ := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": sp("1000")}, "t"); r.Err != nil {
		t.Fatal(r.Err)
	}
	// Incremental: set, delete, append to a list.
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "max.message.bytes", Value: sp("2000000")},
		{Op: kadm.DeleteConfig, Name: "retention.ms"},
		{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: sp("compact")},
	}, "t")
	if err != nil || rs[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, rs)
	}
	cfg := b.srv.cluster.topic("t").Config()
	if cfg.MaxMessageBytes != 2000000 || cfg.RetentionMs != 604800000 || !cfg.CleanupPolicyCompact || !cfg.CleanupPolicyDelete {
		t.Fatalf("config after alter: %+v", cfg)
	}
	if got := cfg.Overrides()["cleanup.policy"]; got != "delete,compact" {
		t.Fatalf("cleanup.policy = %q", got)
	}
	// Subtract; then bad values and ops are refused and change nothing.
	rs, _ = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: sp("delete")}}, "t")
	if rs[0].Err != nil || b.srv.cluster.topic("t").Config().CleanupPolicyDelete {
		t.Fatalf("subtract: %v", rs[0].Err)
	}
	for _, tc := range []struct {
		ac   kadm.AlterConfig
		want error
	}{
		{kadm.AlterConfig{Op: kadm.SetConfig, Name: "segment.ms", Value: sp("0")}, kerr.InvalidConfig},
		{kadm.AlterConfig{Op: kadm.SetConfig, Name: "bogus", Value: sp("0")}, kerr.InvalidConfig},
		{kadm.AlterConfig{Op: kadm.AppendConfig, Name: "retention.ms", Value: sp("1")}, kerr.InvalidConfig},
		{kadm.AlterConfig{Op: kadm.SetConfig, Name: "mirror.mode", Value: sp("push")}, kerr.InvalidConfig},
		{kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms"}, kerr.InvalidRequest},
	} {
		rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{tc.ac}, "t")
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(rs[0].Err, tc.want) {
			t.Errorf("%+v: got %v want %v", tc.ac, rs[0].Err, tc.want)
		}
	}
	if cfg := b.srv.cluster.topic("t").Config(); cfg.SegmentMs != 604800000 || cfg.MirrorPush {
		t.Fatal("a refused alter changed the config")
	}
	// Legacy AlterConfigs replaces the whole set.
	rs, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "retention.bytes", Value: sp("12345")}}, "t")
	if err != nil || rs[0].Err != nil {
		t.Fatalf("legacy alter: %v %+v", err, rs)
	}
	if ov := b.srv.cluster.topic("t").Config().Overrides(); len(ov) != 1 || ov["retention.bytes"] != "12345" {
		t.Fatalf("overrides after legacy alter: %v", ov)
	}
	// Validate-only changes nothing.
	rs, _ = adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.bytes", Value: sp("1")}}, "t")
	if rs[0].Err != nil || b.srv.cluster.topic("t").Config().RetentionBytes != 12345 {
		t.Fatalf("validate-only: %v", rs[0].Err)
	}
	// Unknown topic; a broker's static settings do not change (its only
	// dynamic configs are the replication throttles).
	rs, _ = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: sp("1")}}, "nope")
	if !errors.Is(rs[0].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown topic: %v", rs[0].Err)
	}
	brs, _ := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: sp("1")}}, 1)
	if len(brs) != 1 || !errors.Is(brs[0].Err, kerr.InvalidConfig) {
		t.Fatalf("broker alter: %+v", brs)
	}
}

func TestMirrorModeOnlyAtCreation(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	adm := b.admin()
	ctx := ctxT(t)
	r, _ := adm.CreateTopic(ctx, 2, 1, map[string]*string{"mirror.mode": sp("push"), "mirror.source.cluster.id": sp("src-1")}, "m")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if cfg := b.srv.cluster.topic("m").Config(); !cfg.MirrorPush || cfg.MirrorSourceClusterID != "src-1" {
		t.Fatalf("mirror config %+v", cfg)
	}
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	dres := kmsg.NewDescribeConfigsRequestResource()
	dres.ResourceType, dres.ResourceName = kmsg.ConfigResourceTypeTopic, "m"
	dreq.Resources = append(dreq.Resources, dres)
	dresp, err := dreq.RequestWith(ctx, b.client())
	if err != nil {
		t.Fatal(err)
	}
	var mirrorReadOnly, retentionReadOnly bool
	for _, c := range dresp.Resources[0].Configs {
		switch c.Name {
		case "mirror.mode":
			mirrorReadOnly = c.ReadOnly && c.Value != nil && *c.Value == "push"
		case "retention.ms":
			retentionReadOnly = c.ReadOnly
		}
	}
	if !mirrorReadOnly || retentionReadOnly {
		t.Fatalf("read-only flags: mirror.mode %v retention.ms %v", mirrorReadOnly, retentionReadOnly)
	}
	for _, tc := range []struct {
		ac  kadm.AlterConfig
		msg string
	}{
		// A DELETE of mirror.mode is the mirror stop: mirror_stop_test.go.
		{kadm.AlterConfig{Op: kadm.SetConfig, Name: "mirror.mode", Value: sp("push")}, ""},
		{kadm.AlterConfig{Op: kadm.SetConfig, Name: "mirror.source.cluster.id", Value: sp("other")}, "cannot be changed"},
		{kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "mirror.source.cluster.id"}, "cannot be changed"},
	} {
		rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{tc.ac}, "m")
		if err != nil {
			t.Fatal(err)
		}
		if tc.msg == "" {
			// Setting the same value is no change and is accepted.
			if rs[0].Err != nil {
				t.Errorf("%+v: %v", tc.ac, rs[0].Err)
			}
			continue
		}
		if !errors.Is(rs[0].Err, kerr.InvalidConfig) || !strings.Contains(rs[0].ErrMessage, tc.msg) {
			t.Errorf("%+v: got %v %q", tc.ac, rs[0].Err, rs[0].ErrMessage)
		}
	}
	// Legacy AlterConfigs without mirror.mode would remove it: refused.
	rs, _ := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: sp("1")}}, "m")
	if !errors.Is(rs[0].Err, kerr.InvalidConfig) {
		t.Fatalf("legacy alter dropping mirror.mode: %v", rs[0].Err)
	}
	if !b.srv.cluster.topic("m").Config().MirrorPush {
		t.Fatal("mirror.mode was removed")
	}
	// Other configs of a mirror topic can change.
	rs2, _ := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: sp("5000")}}, "m")
	if rs2[0].Err != nil {
		t.Fatal(rs2[0].Err)
	}
}

func TestCreatePartitions(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	adm := b.admin()
	ctx := ctxT(t)
	if r, _ := adm.CreateTopic(ctx, 2, 1, nil, "p"); r.Err != nil {
		t.Fatal(r.Err)
	}
	rs, err := adm.UpdatePartitions(ctx, 5, "p", "missing")
	if err != nil {
		t.Fatal(err)
	}
	if rs["p"].Err != nil || !errors.Is(rs["missing"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("%+v", rs)
	}
	if n := len(b.srv.cluster.topic("p").Partitions()); n != 5 {
		t.Fatalf("%d partitions", n)
	}
	rs, _ = adm.UpdatePartitions(ctx, 3, "p")
	if !errors.Is(rs["p"].Err, kerr.InvalidPartitions) || !strings.Contains(rs["p"].ErrMessage, "higher than the requested 3") {
		t.Fatalf("shrink: %v %q", rs["p"].Err, rs["p"].ErrMessage)
	}
	rs, _ = adm.ValidateUpdatePartitions(ctx, 9, "p")
	if rs["p"].Err != nil || len(b.srv.cluster.topic("p").Partitions()) != 5 {
		t.Fatalf("validate-only: %v", rs["p"].Err)
	}
	md, _ := b.admin().Metadata(ctx, "p")
	if len(md.Topics["p"].Partitions) != 5 {
		t.Fatalf("metadata shows %d partitions", len(md.Topics["p"].Partitions))
	}
}

func TestRestartRecoversTopics(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir, nil)
	adm := b.admin()
	ctx := ctxT(t)
	r, _ := adm.CreateTopic(ctx, 3, 1, map[string]*string{"retention.ms": sp("42000"), "mirror.mode": sp("push")}, "keep")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if r, _ := adm.CreateTopic(ctx, 1, 1, nil, "gone"); r.Err != nil {
		t.Fatal(r.Err)
	}
	// Simulate the storage's partition dir, which deletion must remove.
	if err := os.MkdirAll(filepath.Join(dir, "gone-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "gone-0", "00000000000000000000.log"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if dr, _ := adm.DeleteTopics(ctx, "gone"); dr["gone"].Err != nil {
		t.Fatal(dr["gone"].Err)
	}
	if _, err := os.Stat(filepath.Join(dir, "gone-0")); !os.IsNotExist(err) {
		t.Fatalf("partition dir of deleted topic still there: %v", err)
	}
	if _, err := adm.UpdatePartitions(ctx, 4, "keep"); err != nil {
		t.Fatal(err)
	}
	if err := b.srv.SetLeaderEpochAtLeast(b.srv.Topic("keep").Partition(1), 13); err != nil {
		t.Fatal(err)
	}
	clusterID := b.srv.ClusterID()
	id := b.srv.Topic("keep").ID
	b.stop()

	// A leftover tombstone dir from a crash mid-delete is cleaned on start.
	if err := os.MkdirAll(filepath.Join(dir, "old-0.abcd-delete"), 0o755); err != nil {
		t.Fatal(err)
	}
	b2 := startBroker(t, dir, nil)
	if b2.srv.ClusterID() != clusterID {
		t.Fatalf("cluster id changed: %s -> %s", clusterID, b2.srv.ClusterID())
	}
	tp := b2.srv.Topic("keep")
	if tp == nil || tp.ID != id || len(tp.Partitions()) != 4 {
		t.Fatalf("topic after restart: %+v", tp)
	}
	if e := tp.Partition(1).LeaderEpoch(); e != 13 {
		t.Fatalf("leader epoch after restart %d", e)
	}
	if cfg := tp.Config(); cfg.RetentionMs != 42000 || !cfg.MirrorPush {
		t.Fatalf("config after restart: %+v", cfg)
	}
	if b2.srv.Topic("gone") != nil {
		t.Fatal("deleted topic came back")
	}
	if _, err := os.Stat(filepath.Join(dir, "old-0.abcd-delete")); !os.IsNotExist(err) {
		t.Fatal("tombstone dir not removed on start")
	}
	md, err := b2.admin().Metadata(ctxT(t), "keep")
	if err != nil {
		t.Fatal(err)
	}
	if md.Cluster != clusterID || md.Topics["keep"].Partitions[1].LeaderEpoch != 13 {
		t.Fatalf("metadata after restart: cluster %s epoch %d", md.Cluster, md.Topics["keep"].Partitions[1].LeaderEpoch)
	}
}

func TestMetadataEdgeCases(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	cl := b.client()
	ctx := ctxT(t)
	if r, _ := b.admin().CreateTopic(ctx, 1, 1, nil, "known"); r.Err != nil {
		t.Fatal(r.Err)
	}
	id := b.srv.Topic("known").ID
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	for _, n := range []string{"known", "unknown", "bad name"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = sp(n)
		req.Topics = append(req.Topics, rt)
	}
	byID := kmsg.NewMetadataRequestTopic()
	byID.TopicID = id
	req.Topics = append(req.Topics, byID)
	missingID := kmsg.NewMetadataRequestTopic()
	missingID.TopicID = [16]byte{1}
	req.Topics = append(req.Topics, missingID)
	req.IncludeTopicAuthorizedOperations = true
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	want := []int16{0, kerr.UnknownTopicOrPartition.Code, kerr.InvalidTopicException.Code, 0, kerr.UnknownTopicID.Code}
	for i, mt := range resp.Topics {
		if mt.ErrorCode != want[i] {
			t.Errorf("topic %d: code %d want %d", i, mt.ErrorCode, want[i])
		}
	}
	if resp.Topics[3].Topic == nil || *resp.Topics[3].Topic != "known" {
		t.Error("lookup by id did not return the name")
	}
	if resp.Topics[0].AuthorizedOperations != topicAllOps {
		t.Errorf("authorized operations %d", resp.Topics[0].AuthorizedOperations)
	}
	if b.srv.Topic("unknown") != nil {
		t.Fatal("topic auto-created although auto-create is off")
	}

	// An empty (non-null) list asks for no topics from v1 on.
	req = kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	resp, err = req.RequestWith(ctx, cl)
	if err != nil || len(resp.Topics) != 0 {
		t.Fatalf("empty list: %v %d topics", err, len(resp.Topics))
	}
}

func TestMetadataAutoCreate(t *testing.T) {
	b := startBroker(t, t.TempDir(), func(c *Config) { c.AutoCreateTopics = true; c.DefaultPartitions = 3 })
	cl := b.client()
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = sp("auto")
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 3 {
		t.Fatalf("auto-create: code %d partitions %d", resp.Topics[0].ErrorCode, len(resp.Topics[0].Partitions))
	}
	// Not allowed by the request: not created.
	req.AllowAutoTopicCreation = false
	req.Topics[0].Topic = sp("auto2")
	resp, _ = req.RequestWith(ctxT(t), cl)
	if resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("auto-create disallowed by request: code %d", resp.Topics[0].ErrorCode)
	}
}

func TestPartitionLimit(t *testing.T) {
	b := startBroker(t, t.TempDir(), func(c *Config) { c.MaxPartitions = 5 })
	adm := b.admin()
	ctx := ctxT(t)
	if r, _ := adm.CreateTopic(ctx, 3, 1, nil, "a"); r.Err != nil {
		t.Fatal(r.Err)
	}
	r, _ := adm.CreateTopic(ctx, 3, 1, nil, "b")
	if !errors.Is(r.Err, kerr.InvalidPartitions) || !strings.Contains(r.ErrMessage, "limit of 5 partitions") {
		t.Fatalf("create over the limit: %v %q", r.Err, r.ErrMessage)
	}
	rs, _ := adm.UpdatePartitions(ctx, 6, "a")
	if !errors.Is(rs["a"].Err, kerr.InvalidPartitions) {
		t.Fatalf("grow over the limit: %v", rs["a"].Err)
	}
	if rs, _ := adm.UpdatePartitions(ctx, 5, "a"); rs["a"].Err != nil {
		t.Fatalf("grow to the limit: %v", rs["a"].Err)
	}
	if b.srv.Topic("b") != nil || len(b.srv.Topic("a").Partitions()) != 5 {
		t.Fatal("limit not enforced as expected")
	}
}

func TestInternalTopicsProtected(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	if _, err := b.srv.internalTopic(offsetsTopic); err != nil {
		t.Fatal(err)
	}
	adm := b.admin()
	ctx := ctxT(t)
	md, err := adm.Metadata(ctx, offsetsTopic)
	if err != nil || !md.Topics[offsetsTopic].IsInternal {
		t.Fatalf("metadata: %v internal=%v", err, md.Topics[offsetsTopic].IsInternal)
	}
	dr, _ := adm.DeleteTopics(ctx, offsetsTopic)
	if !errors.Is(dr[offsetsTopic].Err, kerr.InvalidRequest) || b.srv.Topic(offsetsTopic) == nil {
		t.Fatalf("delete internal topic: %v", dr[offsetsTopic].Err)
	}
	n := len(b.srv.Topic(offsetsTopic).Partitions())
	rs, _ := adm.UpdatePartitions(ctx, n+1, offsetsTopic)
	if !errors.Is(rs[offsetsTopic].Err, kerr.InvalidRequest) || len(b.srv.Topic(offsetsTopic).Partitions()) != n {
		t.Fatalf("grow internal topic: %v", rs[offsetsTopic].Err)
	}
}
