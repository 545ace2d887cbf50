package interop

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/link"
	"github.com/verbatim-kafka/verbatim/props"
	"github.com/verbatim-kafka/verbatim/secret"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// TestLinkSyncFromSecuredKafka runs a link from a Kafka 4.4 node that
// requires SASL_SSL with SCRAM-SHA-512, its credentials stored encrypted
// with password.encoder.secret, and checks continuous sync against the
// real thing: a topic config altered on Kafka reaches the mirror topic,
// committed group offsets arrive with Kafka's leader epochs, clamped to
// the destination's high watermark, and a topic deleted and then
// re-created on Kafka (KRaft deletes asynchronously) puts the partition
// in FAILED, the second time naming both topic ids.
func TestLinkSyncFromSecuredKafka(t *testing.T) {
	src := startSecureSource(t, map[string]string{"link": "link-secret-pw"})
	k := src.k
	const topic = "synced"
	k.CreateTopic(t, topic, 1, 1, map[string]string{"retention.ms": "3600000"})
	produceSync(t, k.Client(t), keyed(topic, 20, "a")...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := k.Admin(t)
	commit := func(group string, at int64, md string) {
		t.Helper()
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: topic, Partition: 0, At: at, LeaderEpoch: 0, Metadata: md})
		r, err := adm.CommitOffsets(ctx, group, os)
		if err == nil {
			err = r.Error()
		}
		if err != nil {
			t.Fatalf("commit %s on Kafka: %v", group, err)
		}
	}
	commit("g-app", 7, "seven")
	commit("g-ahead", 1000, "ahead")

	// The destination, in process: its links' credentials need the secret.
	d := testkit.StartDestConfig(t, broker.Config{DataDir: t.TempDir(), NodeID: 1, LinkSecrets: secret.Config{Secret: "destination-secret"}})
	srv := d.Srv
	m, err := link.Open(link.Config{Host: srv, SyncInterval: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv.SetLinkService(m)
	t.Cleanup(func() {
		srv.SetLinkService(nil)
		_ = m.Close()
		d.Stop()
	})

	p, err := props.ReadFile(src.clientProps(t, "link", "link-secret-pw"))
	if err != nil {
		t.Fatal(err)
	}
	sc := map[string]string{}
	for _, key := range p.Keys() {
		sc[key], _ = p.Get(key)
	}
	cfg := wireext.LinkConfig{Name: "sec", SourceBootstrap: k.Nodes[0].SecureAddr, SourceConfig: sc, Topics: topic, Groups: "g-.*", SyncConfigs: true}
	if err := m.CreateLink(ctx, "User:admin", cfg, false); err != nil {
		t.Fatal(err)
	}
	raw, err := srv.ReadLinkMeta("link-sec.json")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "link-secret-pw") || !strings.Contains(string(raw), "encryptedPassword:") {
		t.Fatalf("the stored link holds the clear password or no encoded one:\n%s", raw)
	}

	syncWaitFor(t, "the mirror caught up and the groups synced", func() (bool, string) {
		_, leo, err := srv.MirrorLogRange(topic, 0)
		app, _ := srv.LinkGroupOffsets("g-app")
		ahead, _ := srv.LinkGroupOffsets("g-ahead")
		ok := err == nil && leo == 20 && len(app) == 1 && len(ahead) == 1 && ahead[0].Offset == 20
		return ok, fmt.Sprint(leo, err, app, ahead)
	})
	app, _ := srv.LinkGroupOffsets("g-app")
	ahead, _ := srv.LinkGroupOffsets("g-ahead")
	if app[0] != (broker.LinkGroupOffset{Topic: topic, Partition: 0, Offset: 7, LeaderEpoch: 0, Metadata: "seven"}) || ahead[0].Metadata != "ahead" {
		t.Fatalf("synced offsets: %+v %+v", app, ahead)
	}

	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("7200000")}}, topic)
	if err == nil {
		err = rs[0].Err
	}
	if err != nil {
		t.Fatal(err)
	}
	syncWaitFor(t, "the config change on Kafka reached the mirror topic", func() (bool, string) {
		info, _ := srv.LinkTopic(topic)
		return info.Configs["retention.ms"] == "7200000", fmt.Sprint(info.Configs)
	})

	oldInfo, _ := srv.LinkTopic(topic)
	if _, err := adm.DeleteTopics(ctx, topic); err != nil {
		t.Fatal(err)
	}
	syncWaitFor(t, "the deleted topic's partition FAILED", func() (bool, string) {
		st := syncStatus(t, m, topic)
		return st.State == wireext.StateFailed && st.Reason == "source topic deleted", fmt.Sprint(st)
	})
	var newID [16]byte
	syncWaitFor(t, "Kafka re-created the topic", func() (bool, string) {
		_, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
		md, merr := adm.Metadata(ctx, topic)
		if merr == nil && md.Topics[topic].Err == nil {
			newID = md.Topics[topic].ID
			return newID != oldInfo.ID && newID != ([16]byte{}), fmt.Sprint(err)
		}
		return false, fmt.Sprint(err, merr)
	})
	want := "source topic re-created: id " + syncKafkaID(newID) + ", was " + syncKafkaID(oldInfo.ID)
	syncWaitFor(t, "the re-created topic's partition FAILED naming both ids", func() (bool, string) {
		st := syncStatus(t, m, topic)
		return st.State == wireext.StateFailed && st.Reason == want, fmt.Sprint(st)
	})
	produceSync(t, k.Client(t), keyed(topic, 5, "new")...)
	time.Sleep(time.Second) // a few sync rounds: nothing of the new topic is copied
	if _, leo, _ := srv.MirrorLogRange(topic, 0); leo != 20 {
		t.Fatalf("the mirror moved to %d after the source topic was re-created", leo)
	}
}

func syncKafkaID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// syncStatus is the status of topic's partition 0 in link sec.
func syncStatus(t *testing.T, m *link.Manager, topic string) wireext.MirrorPartitionStatus {
	t.Helper()
	sts, err := m.DescribeMirrors(context.Background(), wireext.DescribeMirrorsRequest{Link: "sec", Topics: []string{topic}})
	if err != nil || len(sts) == 0 {
		return wireext.MirrorPartitionStatus{Reason: fmt.Sprint(err)}
	}
	return sts[0]
}

// syncWaitFor polls cond for up to a minute (generous: about correctness,
// not speed).
func syncWaitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute; last %s", what, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
