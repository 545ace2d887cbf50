package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startGroupBroker starts a broker whose groups skip the initial
// rebalance delay (3 s in Kafka and in production), so group tests do not
// wait for it.
func startGroupBroker(t *testing.T, dir string) *testBroker {
	t.Helper()
	old := initialRebalanceDelay
	initialRebalanceDelay = 0
	t.Cleanup(func() { initialRebalanceDelay = old })
	return startBroker(t, dir, nil)
}

func produceValues(t *testing.T, b *testBroker, topic string, n int) {
	t.Helper()
	cl := b.client(kgo.DefaultProduceTopic(topic))
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(ctxT(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// groupConsumer polls in the background and records what it gets.
type groupConsumer struct {
	cl   *kgo.Client
	mu   sync.Mutex
	got  map[string]int
	stop context.CancelFunc
	done chan struct{}
}

func startGroupConsumer(t *testing.T, b *testBroker, group, topic string, opts ...kgo.Opt) *groupConsumer {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(200 * time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gc := &groupConsumer{cl: cl, got: map[string]int{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(gc.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				gc.mu.Lock()
				gc.got[string(r.Value)]++
				gc.mu.Unlock()
			})
			if len(fs.Records()) > 0 {
				_ = cl.CommitUncommittedOffsets(ctx)
			}
		}
	}()
	t.Cleanup(gc.close)
	return gc
}

func (gc *groupConsumer) close() {
	if gc.stop == nil {
		return
	}
	gc.stop()
	<-gc.done
	gc.cl.Close() // leaves the group
	gc.stop = nil
}

func (gc *groupConsumer) count() int {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	return len(gc.got)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func describeGroup(t *testing.T, b *testBroker, group string) kadm.DescribedGroup {
	t.Helper()
	dg, err := b.admin().DescribeGroups(ctxT(t), group)
	if err != nil {
		t.Fatal(err)
	}
	return dg[group]
}

func committed(t *testing.T, b *testBroker, group string) map[int32]int64 {
	t.Helper()
	resp, err := b.admin().FetchOffsets(ctxT(t), group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			t.Fatalf("offset %s/%d: %v", o.Topic, o.Partition, o.Err)
		}
		out[o.Partition] = o.At
	})
	return out
}

func TestGroupConsumersShareAndRebalance(t *testing.T) {
	b := startGroupBroker(t, t.TempDir())
	createTopic(t, b, "g1", 4, nil)
	produceValues(t, b, "g1", 200)
	c1 := startGroupConsumer(t, b, "grp", "g1")
	c2 := startGroupConsumer(t, b, "grp", "g1")
	// franz-go's default balancer is cooperative: when c2 joins, c1 first
	// gives up the partitions that move (a Stable generation in which they
	// are assigned to nobody) and rejoins, so the group passes through
	// Stable states that are not the final assignment. Wait for the one in
	// which the two members share all four partitions, and judge that
	// same description.
	var d kadm.DescribedGroup
	waitFor(t, "both consumers to share every partition and read everything between them", func() bool {
		d = describeGroup(t, b, "grp")
		if d.State != "Stable" || len(d.Members) != 2 {
			return false
		}
		owners := map[int32]string{}
		for _, m := range d.Members {
			ca, ok := m.Assigned.AsConsumer()
			if !ok {
				t.Fatalf("member %s assignment does not decode", m.MemberID)
			}
			n := 0
			for _, tp := range ca.Topics {
				if tp.Topic != "g1" {
					t.Fatalf("member %s assigned topic %q", m.MemberID, tp.Topic)
				}
				for _, p := range tp.Partitions {
					if o, dup := owners[p]; dup {
						t.Fatalf("partition %d assigned to both %s and %s", p, o, m.MemberID)
					}
					owners[p] = m.MemberID
					n++
				}
			}
			if n == 0 {
				return false // mid cooperative rebalance
			}
		}
		return len(owners) == 4 && committedSum(t, b, "grp") == 200
	})
	if d.Protocol == "" || d.ProtocolType != "consumer" {
		t.Fatalf("describe: %+v", d)
	}
	// One consumer leaves: the other gets every partition and reads new
	// records from all of them.
	c1.close()
	waitFor(t, "the group to shrink to one member", func() bool {
		d := describeGroup(t, b, "grp")
		return d.State == "Stable" && len(d.Members) == 1
	})
	before := c2.count()
	produceValues(t, b, "g1", 0)
	cl := b.client(kgo.DefaultProduceTopic("g1"))
	for i := 200; i < 240; i++ {
		if err := cl.ProduceSync(ctxT(t), &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the remaining consumer to read the new records", func() bool { return committedSum(t, b, "grp") == 240 })
	if c2.count() < before+40 {
		t.Fatalf("remaining consumer got %d new records", c2.count()-before)
	}
	c2.close()
	waitFor(t, "the group to become empty", func() bool { return describeGroup(t, b, "grp").State == "Empty" })
	// Offsets survive an empty group; ListGroups shows it.
	lg, err := b.admin().ListGroups(ctxT(t))
	if err != nil || lg["grp"].State != "Empty" || lg["grp"].ProtocolType != "consumer" {
		t.Fatalf("list groups: %v %+v", err, lg)
	}
}

func committedSum(t *testing.T, b *testBroker, group string) int64 {
	var n int64
	for _, o := range committed(t, b, group) {
		n += o
	}
	return n
}

func TestGroupOffsetsKeepEpochAndMetadataAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	b := startGroupBroker(t, dir)
	createTopic(t, b, "o1", 2, nil)
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 9
	req.Group, req.Generation = "standalone", -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "o1"
	for p := int32(0); p < 2; p++ {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p, 10+int64(p), 3+p, sp(fmt.Sprint("meta", p))
		rt.Partitions = append(rt.Partitions, rp)
	}
	unknown := kmsg.NewOffsetCommitRequestTopic()
	unknown.Topic = "nope"
	unknown.Partitions = []kmsg.OffsetCommitRequestTopicPartition{kmsg.NewOffsetCommitRequestTopicPartition()}
	req.Topics = []kmsg.OffsetCommitRequestTopic{rt, unknown}
	resp, err := req.RequestWith(ctxT(t), b.client())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Topics[0].Partitions[0].ErrorCode != 0 || resp.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("commit: %+v", resp.Topics)
	}
	check := func(b *testBroker) {
		t.Helper()
		f := kmsg.NewPtrOffsetFetchRequest()
		f.Version = 8
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = "standalone" // Topics nil: everything committed
		g2 := kmsg.NewOffsetFetchRequestGroup()
		g2.Group = "absent"
		g2.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "o1", Partitions: []int32{0}}}
		f.Groups = []kmsg.OffsetFetchRequestGroup{g, g2}
		fr, err := f.RequestWith(ctxT(t), b.client())
		if err != nil {
			t.Fatal(err)
		}
		if len(fr.Groups) != 2 || len(fr.Groups[0].Topics) != 1 || len(fr.Groups[0].Topics[0].Partitions) != 2 {
			t.Fatalf("fetch: %+v", fr.Groups)
		}
		for _, p := range fr.Groups[0].Topics[0].Partitions {
			if p.Offset != 10+int64(p.Partition) || p.LeaderEpoch != 3+p.Partition || p.Metadata == nil || *p.Metadata != fmt.Sprint("meta", p.Partition) {
				t.Fatalf("partition %+v", p)
			}
		}
		if p := fr.Groups[1].Topics[0].Partitions[0]; p.Offset != -1 || p.LeaderEpoch != -1 || p.ErrorCode != 0 {
			t.Fatalf("absent group: %+v", p)
		}
	}
	check(b)
	b.stop()
	check(startGroupBroker(t, dir))
}

func TestGroupMetadataTooLargeAndIllegalGeneration(t *testing.T) {
	b := startGroupBroker(t, t.TempDir())
	createTopic(t, b, "o2", 1, nil)
	commit := func(group string, gen int32, member, md string) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation, req.MemberID = group, gen, member
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "o2"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset, rp.Metadata = 1, &md
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctxT(t), b.client())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if c := commit("g", -1, "", string(make([]byte, 4097))); c != kerr.OffsetMetadataTooLarge.Code {
		t.Fatalf("large metadata: %d", c)
	}
	if c := commit("g2", 3, "m", ""); c != kerr.IllegalGeneration.Code {
		t.Fatalf("unknown group with a generation: %d", c)
	}
	if c := commit("g", -1, "", "ok"); c != 0 {
		t.Fatalf("standalone: %d", c)
	}
	if c := commit("g", 1, "someone", ""); c != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member of an empty group: %d", c)
	}
}

func TestGroupDeleteAndOffsetDelete(t *testing.T) {
	b := startGroupBroker(t, t.TempDir())
	createTopic(t, b, "d1", 2, nil)
	produceValues(t, b, "d1", 20)
	c := startGroupConsumer(t, b, "del", "d1")
	waitFor(t, "commits", func() bool { return committedSum(t, b, "del") == 20 })
	adm := b.admin()
	dr, err := adm.DeleteGroups(ctxT(t), "del")
	if err != nil || !errors_Is(dr["del"].Err, kerr.NonEmptyGroup) {
		t.Fatalf("delete of an active group: %v %+v", err, dr)
	}
	// OffsetDelete of a subscribed topic is refused while members exist.
	odr, err := adm.DeleteOffsets(ctxT(t), "del", kadm.TopicsSet{"d1": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if e := odr["d1"][0]; !errors_Is(e, kerr.GroupSubscribedToTopic) {
		t.Fatalf("offset delete while subscribed: %v", e)
	}
	c.close()
	waitFor(t, "empty", func() bool { return describeGroup(t, b, "del").State == "Empty" })
	odr, err = adm.DeleteOffsets(ctxT(t), "del", kadm.TopicsSet{"d1": {0: {}}})
	if err != nil || odr["d1"][0] != nil {
		t.Fatalf("offset delete of an empty group: %v %+v", err, odr)
	}
	if got := committed(t, b, "del"); len(got) != 1 {
		t.Fatalf("after offset delete: %v", got)
	}
	dr, err = adm.DeleteGroups(ctxT(t), "del")
	if err != nil || dr["del"].Err != nil {
		t.Fatalf("delete: %v %+v", err, dr)
	}
	dr, err = adm.DeleteGroups(ctxT(t), "del")
	if err != nil || !errors_Is(dr["del"].Err, kerr.GroupIDNotFound) {
		t.Fatalf("second delete: %v %+v", err, dr)
	}
	if got := committed(t, b, "del"); len(got) != 0 {
		t.Fatalf("offsets after delete: %v", got)
	}
}

// A JoinGroup that waits for other members is a deferred reply; it is
// answered REBALANCE_IN_PROGRESS before the request timeout closes the
// connection, and the member's later rejoin gets the generation.
func TestGroupJoinWaitEndsBeforeRequestTimeout(t *testing.T) {
	old := initialRebalanceDelay
	initialRebalanceDelay = 0
	t.Cleanup(func() { initialRebalanceDelay = old })
	b := startBroker(t, t.TempDir(), func(c *Config) { c.RequestTimeout = 2 * time.Second })
	join := func(member string) *kmsg.JoinGroupResponse { return wireJoin(t, b, "w", member, nil, 60000) }
	// m1 alone: generation 1, synced.
	m1 := join("").MemberID
	if r := join(m1); r.ErrorCode != 0 || r.Generation != 1 {
		t.Fatalf("m1 join: %+v", r)
	}
	if r := wireSync(t, b, "w", m1, nil, 1, m1); r.ErrorCode != 0 {
		t.Fatalf("m1 sync: %+v", r)
	}
	first := join("")
	if first.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("first join: %+v", first)
	}
	// m1 never rejoins, so this join would wait for the rebalance
	// timeout (60 s); it is answered before the 2 s request timeout
	// closes the connection instead.
	start := time.Now()
	resp := join(first.MemberID)
	if resp.ErrorCode != kerr.RebalanceInProgress.Code || resp.MemberID != first.MemberID {
		t.Fatalf("waiting join: %+v", resp)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("answered after %v, beyond the request timeout", el)
	}
	// m1 rejoins: the rebalance completes for both (the member that got
	// REBALANCE_IN_PROGRESS is answered again when it rejoins).
	if r := join(m1); r.ErrorCode != 0 || r.Generation != 2 {
		t.Fatalf("after m1 rejoined: %+v", r)
	}
	if again := join(first.MemberID); again.ErrorCode != 0 || again.Generation != 2 {
		t.Fatalf("rejoin of the member that got REBALANCE_IN_PROGRESS: %+v", again)
	}
}

// wireJoin sends JoinGroup v9 for member (empty: a new member) of group
// with a "range" subscription and a 10 s session.
func wireJoin(t *testing.T, b *testBroker, group, member string, inst *string, rebalanceMs int32) *kmsg.JoinGroupResponse {
	t.Helper()
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 9
	req.Group, req.MemberID, req.InstanceID, req.ProtocolType = group, member, inst, "consumer"
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("md")}}
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, rebalanceMs
	return rawRequest[*kmsg.JoinGroupResponse](t, b, req)
}

// wireSync sends SyncGroup v5 for member of group at generation gen; a
// leader passes the members to assign ("a-<id>" each).
func wireSync(t *testing.T, b *testBroker, group, member string, inst *string, gen int32, assign ...string) *kmsg.SyncGroupResponse {
	t.Helper()
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.InstanceID, req.Generation = group, member, inst, gen
	req.ProtocolType, req.Protocol = sp("consumer"), sp("range")
	for _, m := range assign {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m, MemberAssignment: []byte("a-" + m)})
	}
	return rawRequest[*kmsg.SyncGroupResponse](t, b, req)
}
