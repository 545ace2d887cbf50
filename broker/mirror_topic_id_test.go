package broker

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/wireext"
)

// topicIDTag is a MirrorTopicID value (version 0).
func topicIDTag(id [16]byte) []byte {
	return (&wireext.MirrorTopicID{TopicID: id}).AppendTo(nil)
}

// createWithID sends CreateTopics v7 for one topic with the tag value
// tag (nil: no tag) and returns the topic's answer.
func createWithID(t *testing.T, b *testBroker, name string, configs map[string]string, tag []byte, validateOnly bool) kmsg.CreateTopicsResponseTopic {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	req.TimeoutMillis = 10000
	req.ValidateOnly = validateOnly
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 2, -1
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	if tag != nil {
		rt.UnknownTags.Set(wireext.MirrorTag, tag)
	}
	req.Topics = append(req.Topics, rt)
	return rawRequest[*kmsg.CreateTopicsResponse](t, b, req).Topics[0]
}

var mirrorCfg = map[string]string{"mirror.mode": "push"}

// TestCreateTopicWithSourceID: a mirror topic created with the tag has
// that id in the CreateTopics answer, Metadata, DescribeTopicPartitions
// and Fetch by id (v13), and keeps it across a restart.
func TestCreateTopicWithSourceID(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir, nil)
	id := [16]byte{0x5a, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	st := createWithID(t, b, "m", mirrorCfg, topicIDTag(id), false)
	if st.ErrorCode != 0 || st.TopicID != id {
		t.Fatalf("create: %v %q id %x", kerr.ErrorForCode(st.ErrorCode), strPtr(st.ErrorMessage), st.TopicID)
	}
	check := func(when string) {
		t.Helper()
		if got := b.srv.cluster.topic("m"); got == nil || got.ID != id || b.srv.cluster.topicByID(id) != got {
			t.Fatalf("%s: topic %+v", when, got)
		}
		mreq := kmsg.NewPtrMetadataRequest()
		mreq.Version = 12
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr("m")
		mreq.Topics = append(mreq.Topics, mt)
		md := rawRequest[*kmsg.MetadataResponse](t, b, mreq)
		if len(md.Topics) != 1 || md.Topics[0].TopicID != id || len(md.Topics[0].Partitions) != 2 {
			t.Fatalf("%s: metadata %+v", when, md.Topics)
		}
		dreq := kmsg.NewPtrDescribeTopicPartitionsRequest()
		dt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		dt.Topic = "m"
		dreq.Topics = append(dreq.Topics, dt)
		dr := rawRequest[*kmsg.DescribeTopicPartitionsResponse](t, b, dreq)
		if len(dr.Topics) != 1 || dr.Topics[0].TopicID != id || dr.Topics[0].ErrorCode != 0 {
			t.Fatalf("%s: DescribeTopicPartitions %+v", when, dr.Topics)
		}
		freq := fetchReq(13, "", 0, 0)
		freq.Topics[0].TopicID = id
		fr := rawRequest[*kmsg.FetchResponse](t, b, freq)
		if len(fr.Topics) != 1 || fr.Topics[0].TopicID != id || fr.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("%s: fetch by id %+v", when, fr.Topics)
		}
	}
	check("after create")
	registerTestWriter(t, b, "m", 2)
	mirrorTo(t, b, "m", 0, stopBatch(t, 0, 1, -1, -1, 2, false), 0)
	b.stop()
	b = startBroker(t, dir, nil)
	check("after restart")
	// The same id again, under another name, also after the restart.
	st = createWithID(t, b, "other", mirrorCfg, topicIDTag(id), false)
	if st.ErrorCode != kerr.TopicAlreadyExists.Code || !strings.Contains(strPtr(st.ErrorMessage), "already used by topic 'm'") {
		t.Fatalf("a used id: %v %q", kerr.ErrorForCode(st.ErrorCode), strPtr(st.ErrorMessage))
	}
	if b.srv.cluster.topic("other") != nil {
		t.Fatal("a refused create created the topic")
	}
}

// TestCreateTopicWithIDRefusals: the tag is refused, precisely and
// creating nothing, on a topic that is not a mirror, for the zero and the
// reserved metadata id, for malformed values and for an id in use
// (validateOnly included); an ordinary create still gets a fresh id.
func TestCreateTopicWithIDRefusals(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	used := b.srv.cluster.topicByID
	plain := createWithID(t, b, "plain", nil, nil, false)
	if plain.ErrorCode != 0 || plain.TopicID == ([16]byte{}) {
		t.Fatalf("plain create: %v", kerr.ErrorForCode(plain.ErrorCode))
	}
	good := [16]byte{0xab, 15: 0xcd}
	cases := []struct {
		name    string
		configs map[string]string
		tag     []byte
		code    int16
		msg     string
	}{
		{"notmirror", nil, topicIDTag(good), kerr.InvalidRequest.Code, "may only be given to a mirror topic"},
		{"notmirror2", map[string]string{"retention.ms": "1000"}, topicIDTag(good), kerr.InvalidRequest.Code, "mirror.mode=push"},
		{"zero", mirrorCfg, topicIDTag([16]byte{}), kerr.InvalidRequest.Code, "zero topic id is reserved"},
		{"reserved", mirrorCfg, topicIDTag(metadataTopicID), kerr.InvalidRequest.Code, "reserved for the metadata topic"},
		{"short", mirrorCfg, topicIDTag(good)[:10], kerr.InvalidRequest.Code, "malformed MirrorTopicID"},
		{"long", mirrorCfg, append(topicIDTag(good), 7), kerr.InvalidRequest.Code, "malformed MirrorTopicID"},
		{"negversion", mirrorCfg, append([]byte{0xff, 0xff}, topicIDTag(good)[2:]...), kerr.InvalidRequest.Code, "malformed MirrorTopicID"},
		{"empty", mirrorCfg, []byte{}, kerr.InvalidRequest.Code, "malformed MirrorTopicID"},
		{"taken", mirrorCfg, topicIDTag(plain.TopicID), kerr.TopicAlreadyExists.Code, "already used by topic 'plain'"},
	}
	for _, c := range cases {
		for _, vo := range []bool{true, false} {
			st := createWithID(t, b, c.name, c.configs, c.tag, vo)
			if st.ErrorCode != c.code || !strings.Contains(strPtr(st.ErrorMessage), c.msg) {
				t.Fatalf("%s (validateOnly %v): %v %q, want code %d %q", c.name, vo, kerr.ErrorForCode(st.ErrorCode), strPtr(st.ErrorMessage), c.code, c.msg)
			}
			if b.srv.cluster.topic(c.name) != nil {
				t.Fatalf("%s: a refused create created the topic", c.name)
			}
		}
	}
	if used(good) != nil {
		t.Fatal("the refused id got used")
	}
	// validateOnly with a good id checks and creates nothing; the real
	// create then takes the id; a name already taken stays
	// TOPIC_ALREADY_EXISTS by name.
	if st := createWithID(t, b, "ok", mirrorCfg, topicIDTag(good), true); st.ErrorCode != 0 || b.srv.cluster.topic("ok") != nil {
		t.Fatalf("validateOnly: %v", kerr.ErrorForCode(st.ErrorCode))
	}
	if st := createWithID(t, b, "ok", mirrorCfg, topicIDTag(good), false); st.ErrorCode != 0 || st.TopicID != good {
		t.Fatalf("create: %v id %x", kerr.ErrorForCode(st.ErrorCode), st.TopicID)
	}
	if st := createWithID(t, b, "ok", mirrorCfg, topicIDTag([16]byte{1, 15: 1}), false); st.ErrorCode != kerr.TopicAlreadyExists.Code {
		t.Fatalf("existing name: %v", kerr.ErrorForCode(st.ErrorCode))
	}
}

// TestCreateTopicWithIDAfterDelete: a mirror topic deleted after its stop
// and created again with the same source id starts as a fresh mirror: the
// stopped state and writer epoch its predecessor left under the id are
// forgotten (in memory and on disk, so also after a restart).
func TestCreateTopicWithIDAfterDelete(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir, nil)
	id := [16]byte{7, 15: 7}
	if st := createWithID(t, b, "m", mirrorCfg, topicIDTag(id), false); st.ErrorCode != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(st.ErrorCode))
	}
	for i := 0; i < 3; i++ {
		registerAs(t, b, "m", writerID{}, 0)
	}
	if pr := mirrorAs(t, b, 2, stopBatch(t, 0, 1, -1, -1, 1, false), 0); pr.ErrorCode != 0 {
		t.Fatalf("mirror produce: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	if err, msg := incrementalAlter(t, b, "m", false, iacDelete("mirror.mode")); err != nil {
		t.Fatalf("stop: %v %q", err, msg)
	}
	if st, _ := b.srv.mirrorStateOf(b.srv.cluster.topic("m")); st.State != mirrorStateStopped {
		t.Fatalf("state %s after the stop", st.State)
	}
	if _, err := b.admin().DeleteTopics(ctxT(t), "m"); err != nil {
		t.Fatal(err)
	}
	if st := createWithID(t, b, "m", mirrorCfg, topicIDTag(id), false); st.ErrorCode != 0 || st.TopicID != id {
		t.Fatalf("re-create: %v %q", kerr.ErrorForCode(st.ErrorCode), strPtr(st.ErrorMessage))
	}
	if e := registerAs(t, b, "m", writerID{1}, 0); e != 0 {
		t.Fatalf("the re-created topic assigned epoch %d, want 0 (fresh)", e)
	}
	if pr := mirrorAsID(t, b, 0, writerID{1}, stopBatch(t, 0, 1, -1, -1, 1, false), 0); pr.ErrorCode != 0 {
		t.Fatalf("mirror produce to the re-created topic (writer 0 < the old 2): %v %q", kerr.ErrorForCode(pr.ErrorCode), strPtr(pr.ErrorMessage))
	}
	b.stop()
	b = startBroker(t, dir, nil)
	st, err := b.srv.mirrorStateOf(b.srv.cluster.topic("m"))
	if err != nil || st.State != mirrorStateMirroring || st.Partitions[0].WriterEpoch != 0 || st.Partitions[0].WriterID != (writerID{1}) {
		t.Fatalf("after a restart: %+v %v", st, err)
	}
}

// TestApiVersionsAdvertisesMirrorTopicID: the CreateTopics extension is
// discoverable (v3+ supported features).
func TestApiVersionsAdvertisesMirrorTopicID(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	resp := rawApiVersions(t, b, 3)
	found := false
	for _, f := range resp.SupportedFeatures {
		found = found || f.Name == "verbatim.mirror.topic.id" && f.MinVersion == 0 && f.MaxVersion == 0
	}
	if !found {
		t.Fatalf("features %+v", resp.SupportedFeatures)
	}
}
