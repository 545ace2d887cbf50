package broker

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/clustermeta"
	"github.com/verbatim-kafka/verbatim/controller"
)

func alterReassignment(t *testing.T, addr, topic string, replicas []int32) kmsg.AlterPartitionAssignmentsResponse {
	t.Helper()
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.Version = 1
	req.AllowReplicationFactorChange = true
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	rp.Partition, rp.Replicas = 0, replicas
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := rawRoundTrip(addr, req)
	if err != nil {
		t.Fatal(err)
	}
	return *resp.(*kmsg.AlterPartitionAssignmentsResponse)
}

func listReassignments(t *testing.T, addr string) []kmsg.ListPartitionReassignmentsResponseTopic {
	t.Helper()
	resp, err := rawRoundTrip(addr, kmsg.NewPtrListPartitionReassignmentsRequest())
	if err != nil {
		t.Fatal(err)
	}
	r := resp.(*kmsg.ListPartitionReassignmentsResponse)
	if r.ErrorCode != 0 {
		t.Fatalf("list reassignments: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	return r.Topics
}

func reassignCode(r kmsg.AlterPartitionAssignmentsResponse) int16 {
	return r.Topics[0].Partitions[0].ErrorCode
}

// A replica added by a reassignment catches up and joins the ISR; the
// controller's step completes the move, and the replica removed drops its
// role and its log.
func TestReassignmentMovesAReplica(t *testing.T) {
	c := newReplCluster(t, 4, nil)
	c.createTopic("mv", []int32{1, 2, 3}, nil)
	for _, v := range []string{"a", "b", "c"} {
		if pr := c.produce(1, "mv", 1, v); pr.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(pr.ErrorCode))
		}
	}
	c.replicate(2)
	addr := c.nodes[2].b.addr

	// Kafka's errors first.
	if code := reassignCode(alterReassignment(t, addr, "mv", nil)); code != kerr.NoReassignmentInProgress.Code {
		t.Fatalf("cancel without a reassignment: %v", kerr.ErrorForCode(code))
	}
	if code := reassignCode(alterReassignment(t, addr, "mv", []int32{1, 2, 9})); code != kerr.InvalidReplicaAssignment.Code {
		t.Fatalf("unregistered broker: %v", kerr.ErrorForCode(code))
	}
	if code := reassignCode(alterReassignment(t, addr, "nope", []int32{1})); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %v", kerr.ErrorForCode(code))
	}

	if code := reassignCode(alterReassignment(t, addr, "mv", []int32{1, 2, 4})); code != 0 {
		t.Fatalf("reassign: %v", kerr.ErrorForCode(code))
	}
	st := c.state("mv")
	if !slices.Equal(st.Replicas, []int32{1, 2, 4, 3}) || !slices.Equal(st.AddingReplicas, []int32{4}) || !slices.Equal(st.RemovingReplicas, []int32{3}) {
		t.Fatalf("state after the request: %+v", st)
	}
	c.sync(st.Version)
	got := listReassignments(t, c.nodes[3].b.addr)
	if len(got) != 1 || got[0].Topic != "mv" || !slices.Equal(got[0].Partitions[0].AddingReplicas, []int32{4}) || !slices.Equal(got[0].Partitions[0].RemovingReplicas, []int32{3}) {
		t.Fatalf("listed %+v", got)
	}

	// Node 4 follows, catches up and the leader adds it to the ISR.
	waitUntil(t, "replica 4 in the ISR", func() bool { c.replicate(1); return slices.Contains(c.state("mv").ISR, 4) })
	if !bytes.Equal(c.logBytes(4, "mv"), c.logBytes(1, "mv")) {
		t.Fatal("the added replica's log differs from the leader's")
	}
	// The controller completes the move.
	st = c.state("mv")
	done, ok := controller.Complete(st, mustSnapshot(t, c).Brokers)
	if !ok {
		t.Fatalf("not complete: %+v", st)
	}
	done.PartitionEpoch-- // write raises it again
	st = c.write(done)
	if !slices.Equal(st.Replicas, []int32{1, 2, 4}) || slices.Contains(st.ISR, 3) || controller.Reassigning(st) {
		t.Fatalf("completed state %+v", st)
	}
	if got := listReassignments(t, addr); len(got) != 0 {
		t.Fatalf("listed after completion: %+v", got)
	}
	// Node 3 dropped the replica: no role, no log, no directory.
	s3 := c.nodes[3].srv()
	p := s3.cluster.topic("mv").Partition(0)
	if p.repl.Load() != nil || p.Log != nil {
		t.Fatal("node 3 still has the replica's role or log")
	}
	if _, err := os.Stat(filepath.Join(c.nodes[3].b.dir, "mv-0")); !os.IsNotExist(err) {
		t.Fatalf("node 3's partition dir: %v", err)
	}
	if c.nodes[3].fetcher.followed() != nil {
		t.Fatal("node 3 still follows the partition")
	}
	// Writes go on with the new ISR.
	ch := c.produceAsync(1, "mv", -1, 10000, "d")
	c.waitLEO(1, "mv", 4)
	c.replicate(2)
	if pr := awaitProduce(t, ch); pr.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(pr.ErrorCode))
	}
}

// Moving the leader away: the completion elects a target replica in a
// new epoch; a cancellation goes back to the original replicas.
func TestReassignmentCancelAndLeaderMove(t *testing.T) {
	c := newReplCluster(t, 4, nil)
	c.createTopic("lm", []int32{1, 2, 3}, nil)
	addr := c.nodes[1].b.addr
	if code := reassignCode(alterReassignment(t, addr, "lm", []int32{4, 2, 3})); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	c.replicate(2)
	if code := reassignCode(alterReassignment(t, addr, "lm", nil)); code != 0 {
		t.Fatalf("cancel: %v", kerr.ErrorForCode(code))
	}
	st := c.state("lm")
	// The original replicas in the union's order (the target's first), as
	// Kafka's controller reverts them.
	if !slices.Equal(st.Replicas, []int32{2, 3, 1}) || controller.Reassigning(st) || slices.Contains(st.ISR, 4) {
		t.Fatalf("cancelled: %+v", st)
	}
	c.sync(st.Version)
	if p := c.nodes[4].srv().cluster.topic("lm").Partition(0); p.Log != nil || p.repl.Load() != nil {
		t.Fatal("node 4 keeps the replica of a cancelled reassignment")
	}
	if code := reassignCode(alterReassignment(t, addr, "lm", []int32{4, 2, 3})); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	c.sync(c.state("lm").Version)
	waitUntil(t, "replica 4 in the ISR", func() bool { c.replicate(1); return slices.Contains(c.state("lm").ISR, 4) })
	st = c.state("lm")
	done, ok := controller.Complete(st, mustSnapshot(t, c).Brokers)
	if !ok || done.Leader != 4 || done.LeaderEpoch != st.LeaderEpoch+1 {
		t.Fatalf("completion %+v %v", done, ok)
	}
	done.PartitionEpoch--
	c.write(done)
	ch := c.produceAsync(4, "lm", -1, 10000, "x")
	c.waitLEO(4, "lm", 1)
	c.replicate(2)
	if pr := awaitProduce(t, ch); pr.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(pr.ErrorCode))
	}
	if p := c.nodes[1].srv().cluster.topic("lm").Partition(0); p.Log != nil {
		t.Fatal("the old leader keeps its log")
	}
}

func mustSnapshot(t *testing.T, c *replCluster) *clustermeta.Snapshot {
	t.Helper()
	snap, err := c.store.Snapshot(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// On a single node every partition is on this node: the assignment it has
// succeeds, anything else is refused.
func TestReassignmentSingleNode(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "one", 1, nil)
	if code := reassignCode(alterReassignment(t, b.addr, "one", []int32{b.srv.cfg.NodeID})); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if code := reassignCode(alterReassignment(t, b.addr, "one", []int32{b.srv.cfg.NodeID + 1})); code != kerr.InvalidReplicaAssignment.Code {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if code := reassignCode(alterReassignment(t, b.addr, "one", nil)); code != kerr.NoReassignmentInProgress.Code {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if got := listReassignments(t, b.addr); len(got) != 0 {
		t.Fatal(got)
	}
}

// A broker that was down while its replica was moved away removes the
// replica's directory when it starts; one whose topic was deleted and
// created again under the same name meanwhile starts that partition
// empty (partition.metadata names the old topic id).
func TestReassignmentWhileDown(t *testing.T) {
	c := newReplCluster(t, 4, nil)
	c.createTopic("away", []int32{1, 2, 3}, nil)
	c.createTopic("again", []int32{1, 2, 3}, nil)
	for _, topic := range []string{"away", "again"} {
		if pr := c.produce(1, topic, 1, "old"); pr.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(pr.ErrorCode))
		}
	}
	c.replicate(2)
	dir3 := c.nodes[3].b.dir
	for _, d := range []string{"away-0", "again-0"} {
		if _, err := os.Stat(filepath.Join(dir3, d, partitionMetadataFile)); err != nil {
			t.Fatalf("node 3's %s: %v", d, err)
		}
	}
	c.nodes[3].b.stop()

	// "away" moves to 1, 2, 4.
	if code := reassignCode(alterReassignment(t, c.nodes[1].b.addr, "away", []int32{1, 2, 4})); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	c.sync(c.state("away").Version)
	waitUntil(t, "replica 4 in the ISR", func() bool { c.replicate(1); return slices.Contains(c.state("away").ISR, 4) })
	done, ok := controller.Complete(c.state("away"), mustSnapshot(t, c).Brokers)
	if !ok {
		t.Fatal("not complete")
	}
	done.PartitionEpoch--
	c.write(done)
	// "again" is deleted and created under a new id on the same brokers.
	old := c.state("again")
	if err := c.store.DeleteTopic(ctxT(t), "again", old.TopicID); err != nil {
		t.Fatal(err)
	}
	id := old.TopicID
	id[15] ^= 0xff
	_, parts, err := c.store.CreateTopic(ctxT(t), clustermeta.TopicRecord{Name: "again", ID: id, Partitions: 1},
		[]clustermeta.PartitionState{{Topic: "again", TopicID: id, Partition: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1}})
	if err != nil {
		t.Fatal(err)
	}
	c.sync(parts[0].Version)

	c.start(3, dir3)
	c.sync(mustSnapshot(t, c).Revision)
	if _, err := os.Stat(filepath.Join(dir3, "away-0")); !os.IsNotExist(err) {
		t.Fatalf("node 3 kept the directory of the replica moved away: %v", err)
	}
	if end := c.handle(3, "again").log.LogEndOffset(); end != 0 {
		t.Fatalf("node 3's replica of the re-created topic starts at log end %d, want an empty log", end)
	}
	data, err := os.ReadFile(filepath.Join(dir3, "again-0", partitionMetadataFile))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := parsePartitionMetadata(data); err != nil || got != id {
		t.Fatalf("node 3's partition.metadata names %v (%v), want the new topic id", got, err)
	}
}
