package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/clustermeta"
	"github.com/verbatim-kafka/verbatim/clustermeta/memstore"
	"github.com/verbatim-kafka/verbatim/coordlog"
)

// testCluster is n brokers in cluster mode over one in-memory store.
type testCluster struct {
	t       *testing.T
	store   *memstore.Store
	brokers map[int32]*testBroker
	dirs    map[int32]string
	mod     func(*ClusterConfig)
	// modCfg, when set, changes each broker's Config too.
	modCfg func(*Config)
	// listener, when set, is the one listener every broker serves (nil:
	// PLAINTEXT).
	listener *Listener
	// followers records each broker's Follow and Unfollow calls.
	followers map[int32]*recordingFollowers
}

// recordingFollowers is a Followers that records what it is told.
type recordingFollowers struct {
	mu     sync.Mutex
	events []string
}

func (f *recordingFollowers) Follow(parts []FollowedPartition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range parts {
		f.events = append(f.events, fmt.Sprintf("follow %s-%d from %d at %d", p.Topic, p.Partition, p.Leader, p.LeaderEpoch))
	}
}

func (f *recordingFollowers) Unfollow(parts []TopicPartition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range parts {
		f.events = append(f.events, fmt.Sprintf("unfollow %s-%d", p.Topic, p.Partition))
	}
}

func (f *recordingFollowers) log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events)
}

func startTestCluster(t *testing.T, n int, mod func(*ClusterConfig)) *testCluster {
	t.Helper()
	tc := &testCluster{t: t, store: memstore.New(), brokers: map[int32]*testBroker{}, dirs: map[int32]string{}, mod: mod,
		followers: map[int32]*recordingFollowers{}}
	for id := int32(1); id <= int32(n); id++ {
		tc.start(id)
	}
	tc.awaitAll(func(s *clustermeta.Snapshot) bool { return len(s.Brokers) == n })
	return tc
}

// start opens (or reopens) broker id over its data dir and joins it.
func (tc *testCluster) start(id int32) *testBroker {
	t := tc.t
	t.Helper()
	dir := tc.dirs[id]
	if dir == "" {
		dir = t.TempDir()
		tc.dirs[id] = dir
	}
	b := startBrokerOn(t, dir, func(cfg *Config) {
		cfg.NodeID = id
		if tc.modCfg != nil {
			tc.modCfg(cfg)
		}
		cc := &ClusterConfig{Store: tc.store}
		if tc.mod != nil {
			tc.mod(cc)
		}
		cfg.Cluster = cc
	}, tc.listener)
	if tc.followers != nil {
		f := &recordingFollowers{}
		tc.followers[id] = f
		b.srv.SetFollowers(f)
	}
	host, port, _ := net.SplitHostPort(b.addr)
	p, _ := strconv.Atoi(port)
	ep := []clustermeta.Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: host, Port: int32(p)}}
	if l := tc.listener; l != nil {
		ep[0].Listener, ep[0].SecurityProtocol = l.Name, string(l.Protocol)
	}
	if err := b.srv.JoinCluster(ctxT(t), ep); err != nil {
		t.Fatalf("JoinCluster %d: %v", id, err)
	}
	tc.brokers[id] = b
	return b
}

// stop shuts broker id down (its registration is revoked).
func (tc *testCluster) stop(id int32) {
	tc.brokers[id].stop()
	delete(tc.brokers, id)
}

// awaitAll waits until every running broker applied a snapshot for which
// done holds.
func (tc *testCluster) awaitAll(done func(*clustermeta.Snapshot) bool) {
	tc.t.Helper()
	for id, b := range tc.brokers {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ok := b.srv.cm.awaitSnapshot(ctx, done)
		cancel()
		if !ok {
			tc.t.Fatalf("broker %d never applied the awaited snapshot", id)
		}
	}
}

// awaitRevision waits until every running broker applied the store's
// current revision.
func (tc *testCluster) awaitCurrent() {
	tc.t.Helper()
	snap, err := tc.store.Snapshot(context.Background())
	if err != nil {
		tc.t.Fatal(err)
	}
	tc.awaitAll(func(s *clustermeta.Snapshot) bool { return s.Revision >= snap.Revision })
}

func createTopicReq(name string, partitions int32, rf int16) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	return req
}

func createTopicOn(t *testing.T, b *testBroker, req *kmsg.CreateTopicsRequest) kmsg.CreateTopicsResponseTopic {
	t.Helper()
	return rawRequest[*kmsg.CreateTopicsResponse](t, b, req).Topics[0]
}

func metadataOn(t *testing.T, b *testBroker, version int16, topics ...string) *kmsg.MetadataResponse {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = version
	for _, n := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	return rawRequest[*kmsg.MetadataResponse](t, b, req)
}

func dirExists(dir string) bool {
	_, err := os.Stat(dir)
	return err == nil
}

func TestClusterCreateTopicReachesEveryBroker(t *testing.T) {
	tc := startTestCluster(t, 3, nil)
	b1, b2, b3 := tc.brokers[1], tc.brokers[2], tc.brokers[3]

	got := createTopicOn(t, b1, createTopicReq("orders", 4, 3))
	if got.ErrorCode != 0 || got.ReplicationFactor != 3 || got.NumPartitions != 4 {
		t.Fatalf("create: code %d rf %d partitions %d (%v)", got.ErrorCode, got.ReplicationFactor, got.NumPartitions, kmsg.StringPtr(""))
	}
	// The creating broker answers once it has applied the creation.
	if b1.srv.Topic("orders") == nil {
		t.Fatal("the creating broker does not have the topic after its answer")
	}
	tc.awaitCurrent()
	stored, _ := tc.store.Snapshot(context.Background())
	leaders := map[int32]int{}
	for id, b := range tc.brokers {
		top := b.srv.Topic("orders")
		if top == nil || top.ID != got.TopicID || len(top.Partitions()) != 4 {
			t.Fatalf("broker %d: topic %+v", id, top)
		}
		for _, p := range top.Partitions() {
			want := stored.Partitions["orders"][p.Index]
			st := p.cstate.Load()
			if st == nil || !slices.Equal(st.Replicas, want.Replicas) || st.Leader != want.Leader {
				t.Fatalf("broker %d partition %d: state %+v, store %+v", id, p.Index, st, want)
			}
			if len(want.Replicas) != 3 || !slices.Equal(want.ISR, want.Replicas) || want.Leader != want.Replicas[0] {
				t.Fatalf("partition %d created as %+v", p.Index, want)
			}
			if p.Log == nil || !dirExists(filepath.Join(tc.dirs[id], p.Dir())) {
				t.Fatalf("broker %d hosts partition %d but its log is not open", id, p.Index)
			}
			if id == 1 {
				leaders[want.Leader]++
			}
		}
	}
	if len(leaders) != 3 {
		t.Fatalf("the 4 leaders are not spread over the 3 brokers: %v", leaders)
	}

	// Replication factor 1: only the replica's broker opens a log.
	one := createTopicOn(t, b2, createTopicReq("single", 3, 1))
	if one.ErrorCode != 0 || one.ReplicationFactor != 1 {
		t.Fatalf("create rf 1: %+v", one)
	}
	tc.awaitCurrent()
	for id, b := range tc.brokers {
		// Another broker's replica is no offline partition here.
		if tot := b.srv.totals(); tot.OfflinePartitions != 0 || tot.Partitions != 4+1 {
			t.Fatalf("broker %d counts %d partitions, %d offline", id, tot.Partitions, tot.OfflinePartitions)
		}
		for _, p := range b.srv.Topic("single").Partitions() {
			hosted := p.cstate.Load().Replicas[0] == id
			if (p.Log != nil) != hosted || dirExists(filepath.Join(tc.dirs[id], p.Dir())) != hosted {
				t.Fatalf("broker %d partition %d: hosted %v, log %v", id, p.Index, hosted, p.Log != nil)
			}
		}
	}

	// Kafka's refusals.
	if r := createTopicOn(t, b3, createTopicReq("orders", 1, 1)); r.ErrorCode != kerr.TopicAlreadyExists.Code {
		t.Fatalf("second create: %d", r.ErrorCode)
	}
	r := createTopicOn(t, b3, createTopicReq("wide", 1, 4))
	if r.ErrorCode != kerr.InvalidReplicationFactor.Code || r.ErrorMessage == nil ||
		*r.ErrorMessage != "Unable to replicate the partition 4 time(s): The target replication factor of 4 cannot be reached because only 3 broker(s) are registered." {
		t.Fatalf("rf 4 on 3 brokers: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	manual := createTopicReq("manual", -1, -1)
	for i, reps := range [][]int32{{3, 1}, {2, 9}} {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(i), reps
		manual.Topics[0].ReplicaAssignment = append(manual.Topics[0].ReplicaAssignment, a)
	}
	if r := createTopicOn(t, b3, manual); r.ErrorCode != kerr.InvalidReplicaAssignment.Code {
		t.Fatalf("assignment naming broker 9: %d", r.ErrorCode)
	}
	manual.Topics[0].ReplicaAssignment[1].Replicas = []int32{2, 3}
	validate := createTopicReq("", 0, 0)
	validate.Topics, validate.ValidateOnly = manual.Topics, true
	if r := createTopicOn(t, b3, validate); r.ErrorCode != 0 || r.ReplicationFactor != 2 {
		t.Fatalf("validate-only: %+v", r)
	}
	if s, _ := tc.store.Snapshot(context.Background()); s.Topics["manual"].Name != "" {
		t.Fatal("validate-only created the topic")
	}
	if r := createTopicOn(t, b3, manual); r.ErrorCode != 0 {
		t.Fatalf("manual assignment: %+v", r)
	}
	tc.awaitCurrent()
	for id, b := range tc.brokers {
		ps := b.srv.Topic("manual").Partitions()
		if st := ps[0].cstate.Load(); !slices.Equal(st.Replicas, []int32{3, 1}) || st.Leader != 3 {
			t.Fatalf("broker %d: manual partition 0 is %+v", id, st)
		}
	}

	// CreatePartitions on another broker keeps the replication factor.
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Version, cp.TimeoutMillis = 3, 10000
	ct := kmsg.NewCreatePartitionsRequestTopic()
	ct.Topic, ct.Count = "orders", 6
	cp.Topics = append(cp.Topics, ct)
	if r := rawRequest[*kmsg.CreatePartitionsResponse](t, b2, cp); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreatePartitions: %+v", r.Topics[0])
	}
	tc.awaitCurrent()
	for id, b := range tc.brokers {
		ps := b.srv.Topic("orders").Partitions()
		if len(ps) != 6 || len(ps[5].cstate.Load().Replicas) != 3 || ps[5].Log == nil {
			t.Fatalf("broker %d after CreatePartitions: %d partitions", id, len(ps))
		}
	}

	// A config change on one broker reaches the others' topics.
	ia := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "orders"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "retention.ms", kmsg.StringPtr("123456")
	res.Configs = append(res.Configs, c)
	ia.Resources = append(ia.Resources, res)
	if r := rawRequest[*kmsg.IncrementalAlterConfigsResponse](t, b3, ia); r.Resources[0].ErrorCode != 0 {
		t.Fatalf("IncrementalAlterConfigs: %+v", r.Resources[0])
	}
	tc.awaitCurrent()
	for id, b := range tc.brokers {
		if ms := b.srv.Topic("orders").Config().RetentionMs; ms != 123456 {
			t.Fatalf("broker %d: retention.ms %d", id, ms)
		}
	}
}

func TestClusterMetadataAgrees(t *testing.T) {
	tc := startTestCluster(t, 3, nil)
	if r := createTopicOn(t, tc.brokers[2], createTopicReq("events", 3, 2)); r.ErrorCode != 0 {
		t.Fatalf("create: %+v", r)
	}
	tc.awaitCurrent()
	stored, _ := tc.store.Snapshot(context.Background())
	check := func(want map[int32]bool) {
		t.Helper()
		for id, b := range tc.brokers {
			for _, v := range []int16{1, 9, 12} {
				m := metadataOn(t, b, v, "events")
				var ids []int32
				for _, mb := range m.Brokers {
					ids = append(ids, mb.NodeID)
					if want[mb.NodeID] && mb.Port != int32(portOf(t, tc.brokers[mb.NodeID].addr)) {
						t.Fatalf("broker %d v%d names broker %d at port %d", id, v, mb.NodeID, mb.Port)
					}
				}
				if len(ids) != len(want) || m.ControllerID != 1 {
					t.Fatalf("broker %d v%d: brokers %v, controller %d", id, v, ids, m.ControllerID)
				}
				mt := m.Topics[0]
				if mt.ErrorCode != 0 || len(mt.Partitions) != 3 {
					t.Fatalf("broker %d v%d: topic %+v", id, v, mt)
				}
				for _, mp := range mt.Partitions {
					st := stored.Partitions["events"][mp.Partition]
					leader := st.Leader
					if !want[leader] {
						leader = -1 // no controller here moves it
					}
					if mp.Leader != leader || !slices.Equal(mp.Replicas, st.Replicas) || !slices.Equal(mp.ISR, st.ISR) {
						t.Fatalf("broker %d v%d partition %d: leader %d replicas %v isr %v, store %+v", id, v, mp.Partition, mp.Leader, mp.Replicas, mp.ISR, st)
					}
					var offline []int32
					for _, r := range st.Replicas {
						if !want[r] {
							offline = append(offline, r)
						}
					}
					if v >= 5 && !slices.Equal(offline, mp.OfflineReplicas) {
						t.Fatalf("broker %d partition %d: offline %v, want %v", id, mp.Partition, mp.OfflineReplicas, offline)
					}
				}
			}
		}
	}
	check(map[int32]bool{1: true, 2: true, 3: true})

	// DescribeCluster and DescribeTopicPartitions agree.
	for id, b := range tc.brokers {
		dc := rawRequest[*kmsg.DescribeClusterResponse](t, b, kmsg.NewPtrDescribeClusterRequest())
		if len(dc.Brokers) != 3 || dc.ControllerID != 1 || dc.ClusterID != tc.store.ClusterID() {
			t.Fatalf("broker %d DescribeCluster: %+v", id, dc)
		}
		dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
		dt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		dt.Topic = "events"
		dtp.Topics = append(dtp.Topics, dt)
		r := rawRequest[*kmsg.DescribeTopicPartitionsResponse](t, b, dtp)
		for _, sp := range r.Topics[0].Partitions {
			if st := stored.Partitions["events"][sp.Partition]; sp.LeaderID != st.Leader || !slices.Equal(sp.Replicas, st.Replicas) {
				t.Fatalf("broker %d DescribeTopicPartitions %d: %+v", id, sp.Partition, sp)
			}
		}
	}

	// No leader: LEADER_NOT_AVAILABLE with leader -1.
	st := stored.Partitions["events"][1]
	st.Leader, st.LeaderEpoch, st.PartitionEpoch = clustermeta.NoLeader, st.LeaderEpoch+1, st.PartitionEpoch+1
	if _, err := tc.store.CASPartitions(context.Background(), clustermeta.Fence{}, []clustermeta.PartitionState{st}); err != nil {
		t.Fatal(err)
	}
	tc.awaitCurrent()
	for id, b := range tc.brokers {
		mp := metadataOn(t, b, 12, "events").Topics[0].Partitions[1]
		if mp.ErrorCode != kerr.LeaderNotAvailable.Code || mp.Leader != -1 || mp.LeaderEpoch != st.LeaderEpoch {
			t.Fatalf("broker %d: leaderless partition answered %+v", id, mp)
		}
	}
	if b := tc.brokers[1]; b.srv.Topic("events").Partition(1).LeaderEpoch() != st.LeaderEpoch {
		t.Fatal("the partition's leader epoch did not follow the store")
	}
	st.Leader, st.LeaderEpoch, st.PartitionEpoch = st.Replicas[0], st.LeaderEpoch+1, st.PartitionEpoch+1
	st.Version = 0
	cur, _ := tc.store.Snapshot(context.Background())
	st.Version = cur.Partitions["events"][1].Version
	if _, err := tc.store.CASPartitions(context.Background(), clustermeta.Fence{}, []clustermeta.PartitionState{st}); err != nil {
		t.Fatal(err)
	}

	// A stopped broker leaves the broker lists; its replicas are offline.
	tc.stop(3)
	tc.awaitAll(func(s *clustermeta.Snapshot) bool { return len(s.Brokers) == 2 })
	stored, _ = tc.store.Snapshot(context.Background())
	check(map[int32]bool{1: true, 2: true})
}

func portOf(t *testing.T, addr string) int {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	return p
}

func TestClusterDeleteTopicRemovesEveryReplica(t *testing.T) {
	tc := startTestCluster(t, 3, nil)
	for _, name := range []string{"doomed", "later"} {
		if r := createTopicOn(t, tc.brokers[1], createTopicReq(name, 2, 3)); r.ErrorCode != 0 {
			t.Fatalf("create %s: %+v", name, r)
		}
	}
	tc.awaitCurrent()
	dirs := func(id int32, topic string) []string {
		return []string{filepath.Join(tc.dirs[id], topic+"-0"), filepath.Join(tc.dirs[id], topic+"-1")}
	}
	for id := range tc.brokers {
		for _, d := range dirs(id, "doomed") {
			if !dirExists(d) {
				t.Fatalf("broker %d has no %s", id, d)
			}
		}
	}
	del := func(b *testBroker, name string) {
		t.Helper()
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.Version, req.TimeoutMillis = 6, 10000
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, dt)
		if r := rawRequest[*kmsg.DeleteTopicsResponse](t, b, req); r.Topics[0].ErrorCode != 0 {
			t.Fatalf("delete %s: %+v", name, r.Topics[0])
		}
	}
	doomed := tc.brokers[3].srv.Topic("doomed")
	del(tc.brokers[2], "doomed")
	if tc.brokers[2].srv.Topic("doomed") != nil {
		t.Fatal("the deleting broker still has the topic after its answer")
	}
	tc.awaitCurrent()
	for id, b := range tc.brokers {
		if b.srv.Topic("doomed") != nil {
			t.Fatalf("broker %d still has the topic", id)
		}
		for _, d := range dirs(id, "doomed") {
			if dirExists(d) {
				t.Fatalf("broker %d still has %s", id, d)
			}
		}
	}
	if !doomed.Deleted() {
		t.Fatal("a handler's *Topic of the deleted topic does not say so")
	}

	// Deleted while a replica's broker is down: it removes the log when
	// it starts again.
	tc.stop(3)
	del(tc.brokers[1], "later")
	if r := createTopicOn(t, tc.brokers[1], createTopicReq("while-down", 1, 2)); r.ErrorCode != 0 {
		t.Fatalf("create while broker 3 is down: %+v", r)
	}
	for _, d := range dirs(3, "later") {
		if !dirExists(d) {
			t.Fatalf("the stopped broker lost %s before it started", d)
		}
	}
	b3 := tc.start(3)
	if b3.srv.Topic("later") != nil {
		t.Fatal("the restarted broker has the deleted topic")
	}
	// What was created meanwhile (on the two registered brokers) is there
	// at Open, as another broker's partition.
	if top := b3.srv.Topic("while-down"); top == nil || top.Partition(0).Log != nil || top.Partition(0).cstate.Load() == nil {
		t.Fatalf("topic created while broker 3 was down: %+v", top)
	}
	for _, d := range dirs(3, "later") {
		if dirExists(d) {
			t.Fatalf("the restarted broker kept %s", d)
		}
	}
	// Re-created under the same name: a new topic (id), fresh logs.
	tc.awaitAll(func(s *clustermeta.Snapshot) bool { return len(s.Brokers) == 3 })
	r := createTopicOn(t, tc.brokers[1], createTopicReq("later", 1, 3))
	if r.ErrorCode != 0 {
		t.Fatalf("re-create: %+v", r)
	}
	tc.awaitCurrent()
	if top := b3.srv.Topic("later"); top == nil || top.ID != r.TopicID || top.Partition(0).Log == nil {
		t.Fatalf("re-created topic on the restarted broker: %+v", top)
	}
}

func TestClusterProducerIDsUniqueAcrossBrokers(t *testing.T) {
	tc := startTestCluster(t, 2, func(c *ClusterConfig) { c.InternalReplicationFactor = 3 })
	seen := map[int64]int32{}
	for i := 0; i < 6; i++ {
		id := int32(i%2 + 1)
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version = 4
		r := rawRequest[*kmsg.InitProducerIDResponse](t, tc.brokers[id], req)
		if r.ErrorCode != 0 || r.ProducerID < 0 {
			t.Fatalf("InitProducerId on %d: %+v", id, r)
		}
		if other, dup := seen[r.ProducerID]; dup {
			t.Fatalf("producer id %d handed out by brokers %d and %d", r.ProducerID, other, id)
		}
		seen[r.ProducerID] = id
	}
	// A mirrored producer's id: later ids are above it on every broker.
	if err := tc.brokers[1].srv.pids.ensureAbove(5000); err != nil {
		t.Fatal(err)
	}
	if id, err := tc.brokers[1].srv.pids.allocate(); err != nil || id <= 5000 {
		t.Fatalf("after ensureAbove(5000): %d, %v", id, err)
	}
	if id, err := tc.brokers[2].srv.pids.allocate(); err != nil || seen[id] != 0 {
		t.Fatalf("broker 2 after its block: %d, %v", id, err)
	}
	first, _ := tc.store.AllocateProducerIDs(context.Background(), 1)
	if first <= 5000 {
		t.Fatalf("the store's allocator is at %d, below the mirrored id", first)
	}

	// FindCoordinator creates the internal topic with as many replicas as
	// there are brokers (2 of the 3 asked for) and names the leader of the
	// key's partition.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorType, fc.CoordinatorKeys = 4, 1, []string{"txn-a", "txn-b"}
	r := rawRequest[*kmsg.FindCoordinatorResponse](t, tc.brokers[2], fc)
	snap := tc.brokers[2].srv.clusterSnapshot()
	for _, c := range r.Coordinators {
		p := coordlog.PartitionForKey(c.Key, int32(len(snap.Partitions[txnStateTopic])))
		st := snap.Partitions[txnStateTopic][p]
		if c.ErrorCode != 0 || c.NodeID != st.Leader || len(st.Replicas) != 2 || c.Port != int32(portOf(t, tc.brokers[c.NodeID].addr)) {
			t.Fatalf("coordinator of %s: %+v, partition %+v", c.Key, c, st)
		}
	}
}

func TestClusterAutoCreateAndLeaderEpochRaise(t *testing.T) {
	tc := &testCluster{t: t, store: memstore.New(), brokers: map[int32]*testBroker{}, dirs: map[int32]string{},
		mod:    func(c *ClusterConfig) { c.DefaultReplicationFactor = 2 },
		modCfg: func(c *Config) { c.AutoCreateTopics = true; c.DefaultPartitions = 2 }}
	tc.start(1)
	tc.start(2)
	tc.awaitAll(func(s *clustermeta.Snapshot) bool { return len(s.Brokers) == 2 })

	// Metadata auto-creates with default.replication.factor.
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.Version, mreq.AllowAutoTopicCreation = 9, true
	mreq.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("auto")}}
	m := rawRequest[*kmsg.MetadataResponse](t, tc.brokers[2], mreq)
	if mt := m.Topics[0]; mt.ErrorCode != 0 || len(mt.Partitions) != 2 || len(mt.Partitions[0].Replicas) != 2 || mt.Partitions[0].Leader < 1 {
		t.Fatalf("auto-created topic: %+v", mt)
	}
	tc.awaitCurrent()

	// The mirror's leader-epoch raise goes to the store, from the leader
	// only, and never lowers the epoch.
	st := tc.brokers[1].srv.clusterSnapshot().Partitions["auto"][0]
	leader, other := tc.brokers[st.Leader], tc.brokers[3-st.Leader]
	lp := leader.srv.Topic("auto").Partition(0)
	if err := leader.srv.SetLeaderEpochAtLeast(lp, 12); err != nil || lp.LeaderEpoch() != 12 {
		t.Fatalf("raise on the leader: %v, epoch %d", err, lp.LeaderEpoch())
	}
	if err := leader.srv.SetLeaderEpochAtLeast(lp, 5); err != nil || lp.LeaderEpoch() != 12 {
		t.Fatalf("a lower raise: %v, epoch %d", err, lp.LeaderEpoch())
	}
	if got, _ := tc.store.Snapshot(context.Background()); got.Partitions["auto"][0].LeaderEpoch != 12 || got.Partitions["auto"][0].PartitionEpoch != st.PartitionEpoch+1 {
		t.Fatalf("store after the raise: %+v", got.Partitions["auto"][0])
	}
	tc.awaitCurrent()
	op := other.srv.Topic("auto").Partition(0)
	if op.LeaderEpoch() != 12 {
		t.Fatalf("the other replica's epoch %d", op.LeaderEpoch())
	}
	if err := other.srv.SetLeaderEpochAtLeast(op, 20); err == nil {
		t.Fatal("a follower raised the leader epoch")
	}

	// FindCoordinator while the key's partition has no leader.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKeys = 4, []string{"g"}
	if r := rawRequest[*kmsg.FindCoordinatorResponse](t, tc.brokers[1], fc); r.Coordinators[0].ErrorCode != 0 {
		t.Fatalf("FindCoordinator: %+v", r.Coordinators[0])
	}
	tc.awaitCurrent()
	snap, _ := tc.store.Snapshot(context.Background())
	cst := snap.Partitions[offsetsTopic][coordlog.PartitionForKey("g", int32(len(snap.Partitions[offsetsTopic])))]
	cst.Leader, cst.LeaderEpoch, cst.PartitionEpoch = clustermeta.NoLeader, cst.LeaderEpoch+1, cst.PartitionEpoch+1
	if _, err := tc.store.CASPartitions(context.Background(), clustermeta.Fence{}, []clustermeta.PartitionState{cst}); err != nil {
		t.Fatal(err)
	}
	tc.awaitCurrent()
	if r := rawRequest[*kmsg.FindCoordinatorResponse](t, tc.brokers[2], fc); r.Coordinators[0].ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("FindCoordinator without a leader: %+v", r.Coordinators[0])
	}
}

func TestClusterFencedBrokerRegistersAgain(t *testing.T) {
	tc := startTestCluster(t, 2, nil)
	b2 := tc.brokers[2]
	manual := createTopicReq("led-by-1", -1, -1)
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Replicas = []int32{1, 2}
	manual.Topics[0].ReplicaAssignment = append(manual.Topics[0].ReplicaAssignment, a)
	if r := createTopicOn(t, tc.brokers[1], manual); r.ErrorCode != 0 {
		t.Fatalf("create: %+v", r)
	}
	tc.awaitCurrent()
	if got := tc.followers[2].log(); !slices.Equal(got, []string{"follow led-by-1-0 from 1 at 0"}) {
		t.Fatalf("broker 2's fetcher was told %q", got)
	}
	before := b2.srv.brokerEpoch()
	if before == 0 || b2.srv.clusterSession() == nil {
		t.Fatal("no registration after JoinCluster")
	}
	tc.store.Expire(2)
	tc.awaitAll(func(s *clustermeta.Snapshot) bool { b, ok := s.Brokers[2]; return ok && b.Epoch > before })
	if after := b2.srv.brokerEpoch(); after <= before {
		t.Fatalf("broker epoch %d after re-registering, %d before", after, before)
	}
	// Fenced, it stopped following; registered again, it follows anew.
	want := []string{"follow led-by-1-0 from 1 at 0", "unfollow led-by-1-0", "follow led-by-1-0 from 1 at 0"}
	if got := tc.followers[2].log(); !slices.Equal(got, want) {
		t.Fatalf("broker 2's fetcher was told %q, want %q", got, want)
	}
	// It keeps serving the cluster's state.
	if r := createTopicOn(t, b2, createTopicReq("after-fence", 1, 2)); r.ErrorCode != 0 {
		t.Fatalf("create after the fence: %+v", r)
	}
	// Shutdown unregisters.
	tc.stop(2)
	tc.awaitAll(func(s *clustermeta.Snapshot) bool { _, ok := s.Brokers[2]; return !ok })
}

// conflictOnce is a store whose node id is held by an old registration
// until the first Register that conflicts with it (a restarted broker's
// previous process, whose lease has not expired yet).
type conflictOnce struct {
	clustermeta.Store
	old       *clustermeta.Session
	conflicts int
}

func (c *conflictOnce) Register(ctx context.Context, b clustermeta.BrokerInfo, ttl int64) (*clustermeta.Session, error) {
	sess, err := c.Store.Register(ctx, b, ttl)
	if errors.Is(err, clustermeta.ErrConflict) {
		c.conflicts++
		if err := c.old.Close(ctx); err != nil {
			return nil, err
		}
	}
	return sess, err
}

func TestClusterJoinWaitsForThePreviousRegistration(t *testing.T) {
	store := memstore.New()
	old, err := store.Register(context.Background(), clustermeta.BrokerInfo{NodeID: 1, Incarnation: "previous"}, 10)
	if err != nil {
		t.Fatal(err)
	}
	wrapped := &conflictOnce{Store: store, old: old}
	tc := &testCluster{t: t, store: store, brokers: map[int32]*testBroker{}, dirs: map[int32]string{},
		mod: func(c *ClusterConfig) { c.Store = wrapped }}
	b := tc.start(1)
	if wrapped.conflicts != 1 {
		t.Fatalf("%d conflicting registrations, want 1", wrapped.conflicts)
	}
	snap, _ := store.Snapshot(context.Background())
	if got := snap.Brokers[1]; got.Incarnation == "previous" || got.Epoch != b.srv.brokerEpoch() {
		t.Fatalf("registered %+v, broker epoch %d", got, b.srv.brokerEpoch())
	}
}
