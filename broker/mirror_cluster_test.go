package broker

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// mirrorProduceAsync sends a mirror produce (acks=all, the pusher's) of
// set to node, stating the log end expect, as writer epoch testWriterEpoch.
func (c *replCluster) mirrorProduceAsync(node int32, topic string, set []byte, expect int64) <-chan produceResult {
	req := mirrorProduce(11, topic, 0, set, expect, -1)
	addr := c.nodes[node].b.addr
	out := make(chan produceResult, 1)
	go func() {
		resp, err := rawRoundTrip(addr, req)
		if err != nil {
			out <- produceResult{err: err}
			return
		}
		out <- produceResult{pr: resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]}
	}()
	return out
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
	c.replicate(2)
	if r := awaitProduce(t, first); r.ErrorCode != 0 {
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
	c.replicate(3)
	for what, ch := range map[string]<-chan produceResult{"waiting": waiting, "raising": raising} {
		if r := awaitProduce(t, ch); r.ErrorCode != 0 {
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
	c.replicate(2)
	if r := awaitProduce(t, ch); r.ErrorCode != 0 {
		t.Fatalf("produce to the first leader: %+v", r)
	}
	c.elect("m", 2, []int32{1, 2, 3})
	ch = c.mirrorProduceAsync(2, "m", b2, 3)
	c.waitLEO(2, "m", 4)
	c.replicate(2)
	if r := awaitProduce(t, ch); r.ErrorCode != 0 || r.BaseOffset != 3 {
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
