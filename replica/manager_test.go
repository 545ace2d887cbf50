package replica

// The Manager against a real single-node Verbatim broker as the leader (it
// serves replica fetches as consumer fetches): every byte of a topic with
// several partitions copied over one connection, truncation of a suffix
// the leader does not have, Unfollow, num.replica.fetchers.

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

const leaderNode = 1

// leaderFixture is a broker leading topic "r" (parts partitions) and a
// host of in-memory replicas whose dials are counted.
type leaderFixture struct {
	t     *testing.T
	ctx   context.Context
	dest  *testkit.Dest
	cl    *kgo.Client
	host  *memHost
	dials atomic.Int32
	parts []broker.FollowedPartition
}

func newLeaderFixture(t *testing.T, parts int) *leaderFixture {
	fx := &leaderFixture{t: t, ctx: testkit.Ctx(t), dest: testkit.StartDest(t, t.TempDir())}
	fx.cl = testkit.Client(t, fx.dest.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "r", int32(parts), 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(fx.ctx, fx.cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatal(err)
	}
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("r")
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(fx.ctx, fx.cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range mresp.Topics[0].Partitions {
		fx.parts = append(fx.parts, broker.FollowedPartition{
			TopicPartition: broker.TopicPartition{Topic: "r", Partition: p.Partition},
			TopicID:        mresp.Topics[0].TopicID, Leader: leaderNode, LeaderEpoch: p.LeaderEpoch,
		})
	}
	if len(fx.parts) != parts {
		t.Fatalf("metadata: %d partitions", len(fx.parts))
	}
	fx.host = newMemHost(2)
	fx.host.addrs[leaderNode] = fx.dest.Addr
	fx.host.opts.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		fx.dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	return fx
}

// produce writes n records to each partition: plain, then a committed and
// an aborted transaction on partition 0 (control batches).
func (fx *leaderFixture) produce(n int, tag string) {
	fx.t.Helper()
	for i := 0; i < n; i++ {
		for p := range fx.parts {
			v := strings.Repeat(tag, 1+i%50)
			if err := fx.cl.ProduceSync(fx.ctx, &kgo.Record{Topic: "r", Partition: int32(p), Value: []byte(v)}).FirstErr(); err != nil {
				fx.t.Fatal(err)
			}
		}
	}
	tx, err := kgo.NewClient(kgo.SeedBrokers(fx.dest.Addr), kgo.TransactionalID("tx-"+tag), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		fx.t.Fatal(err)
	}
	defer tx.Close()
	for _, commit := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
		if err := tx.BeginTransaction(); err != nil {
			fx.t.Fatal(err)
		}
		if err := tx.ProduceSync(fx.ctx, &kgo.Record{Topic: "r", Partition: 0, Value: []byte(tag)}).FirstErr(); err != nil {
			fx.t.Fatal(err)
		}
		if err := tx.EndTransaction(fx.ctx, commit); err != nil {
			fx.t.Fatal(err)
		}
	}
}

// cluster is a client.Cluster on the leader, closed with the test.
func (fx *leaderFixture) cluster() *client.Cluster {
	cl, err := client.NewCluster(fx.dest.Addr, client.Options{})
	if err != nil {
		fx.t.Fatal(err)
	}
	fx.t.Cleanup(cl.Close)
	return cl
}

// leaderLog is the partition's batches on the leader.
func (fx *leaderFixture) leaderLog(p int32) []byte { return testkit.RawLog(fx.t, fx.dest.Addr, "r", p) }

// replicaBytes is the in-memory replica's batches.
func (fx *leaderFixture) replicaBytes(p int32) []byte {
	l := fx.host.replica(clientTP("r", p)).snapshot()
	return bytes.Join(l.batches, nil)
}

// waitCopied waits until the replicas of ps hold the leader's bytes.
func (fx *leaderFixture) waitCopied(ps ...int32) {
	fx.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range ps {
		want := fx.leaderLog(p)
		for !bytes.Equal(fx.replicaBytes(p), want) {
			if bad := fx.host.replica(clientTP("r", p)).counts().bad; bad != "" {
				fx.t.Fatalf("partition %d: %s", p, bad)
			}
			if time.Now().After(deadline) {
				fx.t.Fatalf("partition %d: replica has %d bytes, leader %d", p, len(fx.replicaBytes(p)), len(want))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestManagerCopiesTopic: every byte of a 4-partition topic (transaction
// markers included) is copied over one connection, later appends too; a
// replica holding a suffix the leader never had is truncated by
// the leader's answers; an unfollowed partition is no longer
// written; with nothing followed the connection goes.
func TestManagerCopiesTopic(t *testing.T) {
	fx := newLeaderFixture(t, 4)
	fx.produce(30, "a")

	// Partition 3's replica holds a batch the leader does not have, at
	// the leader's epoch, beyond the leader's log end.
	rep3 := fx.host.replica(clientTP("r", 3))
	if err := rep3.Append(fx.leaderLog(3), 0, 0); err != nil {
		t.Fatal(err)
	}
	bogus := kbatch.NewBatch(1, kbatch.Record{Value: []byte("never on the leader")})
	bogus.BaseOffset, bogus.LeaderEpoch = rep3.LogEndOffset(), fx.parts[3].LeaderEpoch
	raw := kbatchtest.Encode(t, bogus)
	if err := rep3.Append(raw, 0, 0); err != nil {
		t.Fatal(err)
	}

	m := NewManager(Config{Host: fx.host, MaxWaitMs: 20, PartitionMaxBytes: 2048, Log: quietLog()})
	defer m.Close()
	m.Follow(fx.parts)
	fx.waitCopied(0, 1, 2, 3)
	if c := rep3.counts(); c.truncates != 1 || c.resets != 0 {
		t.Fatalf("partition 3: %d truncations, %d full truncations; want the one of OffsetForLeaderEpoch", c.truncates, c.resets)
	}
	fx.produce(20, "b")
	fx.waitCopied(0, 1, 2, 3)
	if n := fx.dials.Load(); n != 1 || m.Connections() != 1 {
		t.Fatalf("%d dials, %d fetchers for one leader; want 1", n, m.Connections())
	}
	if r := fx.host.replica(clientTP("r", 0)); r.counts().hw != r.LogEndOffset() {
		t.Fatalf("partition 0: high watermark %d, log end %d", r.counts().hw, r.LogEndOffset())
	}

	// Unfollow 1: later appends reach the others only.
	before := fx.replicaBytes(1)
	m.Unfollow([]broker.TopicPartition{fx.parts[1].TopicPartition})
	fx.produce(5, "c")
	fx.waitCopied(0, 2, 3)
	if !bytes.Equal(fx.replicaBytes(1), before) {
		t.Fatal("an unfollowed partition was written")
	}
	// Following again at the same epoch resumes from the replica's end.
	m.Follow(fx.parts[1:2])
	fx.waitCopied(1)
	m.Unfollow([]broker.TopicPartition{fx.parts[0].TopicPartition, fx.parts[1].TopicPartition, fx.parts[2].TopicPartition, fx.parts[3].TopicPartition})
	if m.Connections() != 0 {
		t.Fatalf("%d fetchers with nothing followed", m.Connections())
	}
}

// TestManagerFetchers: with num.replica.fetchers 2 the partitions of one
// leader spread over two connections, each copying its own.
func TestManagerFetchers(t *testing.T) {
	fx := newLeaderFixture(t, 6)
	fx.produce(5, "x")
	m := NewManager(Config{Host: fx.host, Fetchers: 2, MaxWaitMs: 20, Log: quietLog()})
	defer m.Close()
	used := map[int]bool{}
	for _, p := range fx.parts {
		used[m.index(clientTP(p.Topic, p.Partition))] = true
	}
	m.Follow(fx.parts)
	fx.waitCopied(0, 1, 2, 3, 4, 5)
	if m.Connections() != len(used) || int(fx.dials.Load()) != len(used) {
		t.Fatalf("%d fetchers, %d dials; the partitions hash to %d", m.Connections(), fx.dials.Load(), len(used))
	}
	if len(used) != 2 {
		t.Fatalf("6 partitions hash to %d of 2 fetchers", len(used))
	}
}

// TestManagerOutOfRange: against the real leader, a replica whose log end
// is beyond the leader's is truncated to the leader's end, and one below
// the leader's log start (DeleteRecords) starts again at it (ListOffsets
// as a replica, both).
func TestManagerOutOfRange(t *testing.T) {
	fx := newLeaderFixture(t, 2)
	fx.produce(10, "o")
	rep0 := fx.host.replica(clientTP("r", 0)) // empty, starts beyond the leader
	if err := rep0.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = "r"
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = 1, 4
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(fx.ctx, fx.cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); err != nil {
		t.Fatal(err)
	}
	cl := fx.cluster()
	_, end0 := testkit.ReadLog(t, fx.ctx, cl, "r", 0)
	m := NewManager(Config{Host: fx.host, MaxWaitMs: 20, Log: quietLog()})
	defer m.Close()
	m.Follow(fx.parts)
	// Partition 0 restarts at the leader's end, partition 1 at its log
	// start.
	deadline := time.Now().Add(30 * time.Second)
	for {
		s0, s1 := fx.host.replica(clientTP("r", 0)).snapshot(), fx.host.replica(clientTP("r", 1)).snapshot()
		if s0.start == end0 && s1.start == 4 && bytes.Equal(fx.replicaBytes(1), fx.leaderLog(1)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicas %s and %s; want partition 0 from %d, 1 from 4", describe(&s0), describe(&s1), end0)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// What follows is copied.
	fx.produce(3, "p")
	for {
		s0 := fx.host.replica(clientTP("r", 0)).snapshot()
		_, end := testkit.ReadLog(t, fx.ctx, cl, "r", 0)
		if s0.start == end0 && s0.end == end {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition 0: replica %s, leader ends at %d", describe(&s0), end)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// flakyConn breaks after reading left bytes: a leader connection lost
// in the middle of an answer.
type flakyConn struct {
	net.Conn
	left int
}

func (c *flakyConn) Read(b []byte) (int, error) {
	if c.left <= 0 {
		c.Conn.Close()
		return 0, net.ErrClosed
	}
	n, err := c.Conn.Read(b[:min(len(b), c.left)])
	c.left -= n
	return n, err
}

// TestManagerReconnects: connections that break every few answers (lost
// answers, requests cut off) are dialled again and the copy is still
// exact.
func TestManagerReconnects(t *testing.T) {
	fx := newLeaderFixture(t, 3)
	fx.produce(20, "z")
	fx.host.opts.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		fx.dials.Add(1)
		var d net.Dialer
		cn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &flakyConn{Conn: cn, left: 3000}, nil
	}
	m := NewManager(Config{Host: fx.host, MaxWaitMs: 20, PartitionMaxBytes: 512, Log: quietLog()})
	defer m.Close()
	m.Follow(fx.parts)
	fx.waitCopied(0, 1, 2)
	if n := fx.dials.Load(); n < 2 {
		t.Fatalf("%d dials: the connections did not break", n)
	} else {
		t.Logf("%d dials", n)
	}
}
