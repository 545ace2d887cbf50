package broker

import (
	"bytes"
	"encoding/hex"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// mirrorProduceAsync sends a mirror produce (acks=all, the pusher's) of
// set to node, stating the log end expect, as writer epoch testWriterEpoch.
func (c *replCluster) mirrorProduceAsync(node int32, topic string, set []byte, expect int64) <-chan produceResult {
	return c.sendProduce(node, mirrorProduce(11, topic, 0, set, expect, -1))
}

// replicateUntil runs fetch rounds until the produce is answered (the
// followers learn a raised epoch from the store asynchronously: a round
// before that is refused) and returns its answer.
func (c *replCluster) replicateUntil(ch <-chan produceResult) kmsg.ProduceResponseTopicPartition {
	c.t.Helper()
	r := replicateUntilAnswered(c, "the produce answered", ch)
	if r.err != nil {
		c.t.Fatal(r.err)
	}
	return r.pr
}

// The KIP-1279 raise a mirror append asks for is a compare-and-swap of
// the partition's state; applying that state must not end the
// leadership it came from: an acks=all append waiting for the followers
// when another append raises the epoch is acknowledged once the
// followers have it (not NOT_LEADER_OR_FOLLOWER), the followers' copies
// are the leader's bytes, and the store holds the raised epoch.
func TestMirrorEpochRaiseKeepsTheLeadership(t *testing.T) {
	c := newReplCluster(t, 3, nil)
	c.createTopic("m", []int32{1, 2, 3}, map[string]string{"mirror.mode": "push"})
	registerAs(t, c.nodes[1].b, "m", writerID{}, 0)
	b1, b2, b3 := data(0, 2, 3).encode(t), data(3, 5, 1).encode(t), data(4, 10, 1).encode(t)
	first := c.mirrorProduceAsync(1, "m", b1, 0) // epoch 2: raised to 12
	c.waitLEO(1, "m", 3)
	if r := c.replicateUntil(first); r.ErrorCode != 0 {
		t.Fatalf("first mirror produce: %+v", r)
	}
	waiting := c.mirrorProduceAsync(1, "m", b2, 3) // epoch 5: no raise
	c.waitLEO(1, "m", 4)
	notAnswered(t, waiting, "before the followers fetched it")
	raising := c.mirrorProduceAsync(1, "m", b3, 4) // epoch 10: raised to 22
	waitUntil(t, "the raised epoch applied", func() bool {
		rs := c.nodes[1].srv().cluster.topic("m").Partition(0).repl.Load()
		return rs != nil && rs.leader && rs.epoch == 22
	})
	if st := c.state("m"); st.LeaderEpoch != 22 || st.Leader != 1 {
		t.Fatalf("store after the raises: leader %d epoch %d, want 1 at 22", st.Leader, st.LeaderEpoch)
	}
	notAnswered(t, waiting, "before the followers fetched it, after the raise")
	for what, ch := range map[string]<-chan produceResult{"waiting": waiting, "raising": raising} {
		if r := c.replicateUntil(ch); r.ErrorCode != 0 {
			t.Fatalf("the %s mirror produce: %+v", what, r)
		}
	}
	for _, id := range []int32{2, 3} {
		if got := c.logBytes(id, "m"); !bytes.Equal(got, concat(b1, b2, b3)) {
			t.Fatalf("follower %d holds %d bytes, want the mirrored batches", id, len(got))
		}
	}
}

// The writer registration is the cluster store's: after a leader change
// the new leader admits the writer the old one registered (at its
// epoch), a later registrant on the new leader gets the next epoch, and
// the old writer is fenced there.
func TestMirrorWriterSurvivesLeaderChange(t *testing.T) {
	c := newReplCluster(t, 3, nil)
	c.createTopic("m", []int32{1, 2, 3}, map[string]string{"mirror.mode": "push"})
	if e := registerAs(t, c.nodes[1].b, "m", writerID{}, 0); e != testWriterEpoch {
		t.Fatalf("first registration: epoch %d", e)
	}
	b1, b2, b3 := data(0, 2, 3).encode(t), data(3, 2, 1).encode(t), data(4, 2, 1).encode(t)
	ch := c.mirrorProduceAsync(1, "m", b1, 0)
	c.waitLEO(1, "m", 3)
	if r := c.replicateUntil(ch); r.ErrorCode != 0 {
		t.Fatalf("produce to the first leader: %+v", r)
	}
	c.elect("m", 2, []int32{1, 2, 3})
	ch = c.mirrorProduceAsync(2, "m", b2, 3)
	c.waitLEO(2, "m", 4)
	if r := c.replicateUntil(ch); r.ErrorCode != 0 || r.BaseOffset != 3 {
		t.Fatalf("the same writer on the new leader: %+v", r)
	}
	if e := registerAs(t, c.nodes[2].b, "m", writerID{9}, 0); e != testWriterEpoch+1 {
		t.Fatalf("a new registrant on the new leader: epoch %d, want %d", e, testWriterEpoch+1)
	}
	if r := awaitProduce(t, c.mirrorProduceAsync(2, "m", b3, 4)); r.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("the old writer after a newer registration: %+v", r)
	}
	// Every broker's view is the store's record.
	for id := int32(1); id <= 3; id++ {
		srv := c.nodes[id].srv()
		waitUntil(t, "every broker sees the registration", func() bool {
			st, err := srv.mirrorStateOf(srv.cluster.topic("m"))
			return err == nil && st.Partitions[0].WriterEpoch == testWriterEpoch+1 && st.Partitions[0].WriterID == (writerID{9})
		})
	}
	if dir, err := c.nodes[1].srv().fs.ReadDir(mirrorStateDir); err == nil && len(dir) > 0 {
		t.Fatalf("cluster mode wrote local mirror state files: %v", dir)
	}
}

// barriers counts the MIRROR_PID_RESET batches of node's log of topic.
func (c *replCluster) barriers(node int32, topic string) int {
	c.t.Helper()
	n := 0
	for it := kbatch.Batches(c.logBytes(node, topic)); it.Next(); {
		if typ, ok := kbatch.ControlType(it.Batch()); ok && typ == kbatch.ControlMirrorPidReset {
			n++
		}
	}
	return n
}

// A mirror stop is one decision in the store carried out by the
// partition's leader; when the leader changes after writing the barrier
// (replicated) but before recording the partition stopped, the new
// leader finishes the stop without a second barrier: the stop completes
// once, every replica holds the same log with one barrier after the
// mirrored data, and the topic is writable.
func TestMirrorStopAcrossLeaderChange(t *testing.T) {
	c := newReplCluster(t, 3, nil)
	c.createTopic("m", []int32{1, 2, 3}, map[string]string{"mirror.mode": "push", "mirror.source.cluster.id": "src-A", "retention.ms": "-1"})
	registerAs(t, c.nodes[1].b, "m", writerID{}, 0)
	ch := c.mirrorProduceAsync(1, "m", data(0, 2, 3).encode(t), 0)
	c.waitLEO(1, "m", 3)
	if r := c.replicateUntil(ch); r.ErrorCode != 0 {
		t.Fatalf("mirror produce: %+v", r)
	}
	// Node 1 stops short of recording the partition stopped.
	hold := holdStopsAtBarrier(t)
	answer := c.deleteMirrorModeAsync(3, "m") // any broker takes the stop
	c.waitLEO(1, "m", 4)                      // node 1 wrote the barrier
	waitUntil(t, "the barrier replicated", func() bool {
		c.replicate(1)
		return c.handle(2, "m").log.LogEndOffset() == 4 && c.handle(3, "m").log.LogEndOffset() == 4
	})
	if n := c.barriers(2, "m"); n != 1 {
		t.Fatalf("node 2 holds %d barriers before the leader change, want the replicated one", n)
	}
	c.elect("m", 2, []int32{1, 2, 3})
	hold.Store(false)
	want := c.completeStop(answer, "m")
	for id := int32(1); id <= 3; id++ {
		if n := c.barriers(id, "m"); n != 1 {
			t.Fatalf("node %d holds %d barriers, want 1", id, n)
		}
		if got := c.logBytes(id, "m"); !bytes.Equal(got, want) {
			t.Fatalf("node %d's log differs from the leader's", id)
		}
		srv := c.nodes[id].srv()
		waitUntil(t, "the config without mirror.mode applied", func() bool {
			return !srv.cluster.topic("m").Config().MirrorPush
		})
		// The link's view of the former mirror (its partitions STOPPED), read
		// before anything else refreshes the broker's cached state.
		waitUntil(t, "the link sees the topic stopped", func() bool {
			info, ok := srv.LinkTopic("m")
			return ok && info.MirrorState == mirrorStateStopped
		})
		st, err := srv.mirrorStateOf(srv.cluster.topic("m"))
		if err != nil || st.State != mirrorStateStopped || !st.Partitions[0].Stopped || st.Partitions[0].StopFrom != 3 || st.Partitions[0].LastMirroredOffset != 2 {
			t.Fatalf("node %d's mirror state after the stop: %+v (%v)", id, st, err)
		}
	}
	// Writable: an ordinary produce to the new leader.
	if r := c.produce(2, "m", 1, "after"); r.ErrorCode != 0 {
		t.Fatalf("ordinary produce after the stop: %+v", r)
	}
}

// Deleting a mirror topic deletes its record from the store.
func TestMirrorRecordDeletedWithTopic(t *testing.T) {
	c := newReplCluster(t, 1, nil)
	c.createTopic("m", []int32{1}, map[string]string{"mirror.mode": "push"})
	registerAs(t, c.nodes[1].b, "m", writerID{}, 0)
	id := c.nodes[1].srv().cluster.topic("m").ID
	name := hex.EncodeToString(id[:])
	snap, err := c.store.Snapshot(ctxT(t))
	if _, ok := snap.Record(mirrorRecordKind, name); err != nil || !ok {
		t.Fatalf("no mirror record after the registration (%v)", err)
	}
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TopicNames = []string{"m"}
	req.TimeoutMillis = 10000
	if resp := rawRequest[*kmsg.DeleteTopicsResponse](t, c.nodes[1].b, req); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(resp.Topics[0].ErrorCode))
	}
	snap, err = c.store.Snapshot(ctxT(t))
	if _, ok := snap.Record(mirrorRecordKind, name); err != nil || ok {
		t.Fatalf("the mirror record outlived its topic (%v)", err)
	}
}

// When the leader that began a stop dies with its last mirror appends
// and its barrier on its log only, the new leader records the stop point
// again at its own log end and writes the barrier there; the old leader,
// back as a follower, truncates to the new leader's log.
func TestMirrorStopNewLeaderRecordsItsStopPoint(t *testing.T) {
	c := newReplCluster(t, 3, nil)
	c.createTopic("m", []int32{1, 2, 3}, map[string]string{"mirror.mode": "push", "mirror.source.cluster.id": "src-A", "retention.ms": "-1"})
	registerAs(t, c.nodes[1].b, "m", writerID{}, 0)
	if r := c.replicateUntil(c.mirrorProduceAsync(1, "m", data(0, 2, 3).encode(t), 0)); r.ErrorCode != 0 {
		t.Fatalf("mirror produce: %+v", r)
	}
	// Offsets 3-4 reach node 1 only (acks=all: never acknowledged).
	c.mirrorProduceAsync(1, "m", data(3, 2, 2).encode(t), 3)
	c.waitLEO(1, "m", 5)
	hold := holdStopsAtBarrier(t)
	answer := c.deleteMirrorModeAsync(3, "m")
	c.waitLEO(1, "m", 6) // node 1's barrier at 5, on node 1 only
	c.elect("m", 2, []int32{2, 3})
	hold.Store(false)
	c.completeStop(answer, "m")
	if end := c.handle(2, "m").log.LogEndOffset(); end != 4 || c.barriers(2, "m") != 1 {
		t.Fatalf("the new leader ends at %d with %d barriers, want its barrier at 3", end, c.barriers(2, "m"))
	}
	st, err := c.nodes[2].srv().mirrorStateOf(c.nodes[2].srv().cluster.topic("m"))
	if ps := st.Partitions[0]; err != nil || st.State != mirrorStateStopped || ps.StopFrom != 3 || ps.LastMirroredOffset != 2 {
		t.Fatalf("the stop point after the leader change: %+v (%v), want stop_from 3, last mirrored 2", st, err)
	}
}

// holdStopsAtBarrier makes every broker's stop step fail after the
// barrier (before the partition is recorded stopped) until the returned
// flag is cleared.
func holdStopsAtBarrier(t *testing.T) *atomic.Bool {
	hold := new(atomic.Bool)
	hold.Store(true)
	hook := func(topic string, partition int32, step int) error {
		if step == stopStepBarrier && hold.Load() {
			return errors.New("held by the test")
		}
		return nil
	}
	mirrorStopHook.Store(&hook)
	t.Cleanup(func() { mirrorStopHook.Store(nil) })
	return hold
}

// deleteMirrorModeAsync sends the DELETE of topic's mirror.mode (the
// stop) to node and delivers the resource's error code (-1: no answer).
func (c *replCluster) deleteMirrorModeAsync(node int32, topic string) <-chan int16 {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.Configs = kmsg.ConfigResourceTypeTopic, topic, []kmsg.IncrementalAlterConfigsRequestResourceConfig{iacDelete("mirror.mode")}
	req.Resources = append(req.Resources, rr)
	addr := c.nodes[node].b.addr
	out := make(chan int16, 1)
	go func() {
		resp, err := rawRoundTrip(addr, req)
		if err != nil {
			out <- -1
			return
		}
		out <- resp.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode
	}()
	return out
}

// completeStop waits for the stop behind answer (of topic, after node 2
// was elected its leader) to succeed and for nodes 1 and 3 to hold node
// 2's log, which it returns.
func (c *replCluster) completeStop(answer <-chan int16, topic string) []byte {
	c.t.Helper()
	if code := c.replicateUntilStopped(answer); code != 0 {
		c.t.Fatalf("the stop: %v", kerr.ErrorForCode(code))
	}
	want := c.logBytes(2, topic)
	waitUntil(c.t, "the followers have the new leader's log", func() bool {
		c.replicate(1)
		return bytes.Equal(c.logBytes(1, topic), want) && bytes.Equal(c.logBytes(3, topic), want)
	})
	return want
}

// replicateUntilStopped runs fetch rounds until the stop is answered.
func (c *replCluster) replicateUntilStopped(answer <-chan int16) int16 {
	c.t.Helper()
	return replicateUntilAnswered(c, "the stop answered", answer)
}

// replicateUntilAnswered runs fetch rounds on c until answer yields a
// value (what names it if it never does) and returns that value.
func replicateUntilAnswered[T any](c *replCluster, what string, answer <-chan T) T {
	c.t.Helper()
	var v T
	waitUntil(c.t, what, func() bool {
		c.replicate(1)
		select {
		case v = <-answer:
			return true
		default:
			return false
		}
	})
	return v
}
