package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/kbatch"
)

// TestMirrorIntoVerbatimCluster mirrors from Apache Kafka 4.4 into a
// 3-broker Verbatim cluster (replication factor 3, min.insync.replicas
// 2): `mirror push --follow` goes on while the destination leader of a
// mirrored partition is SIGKILLed (it re-reads the new leader and
// continues: `verify` exact afterwards; a compacted topic whose first
// records the source's cleaner removed holds the source's epoch at its
// log start on every replica), then `mirror stop` runs while
// the leader of a partition is killed again and completes once: every
// partition holds exactly one MIRROR_PID_RESET barrier after the
// mirrored data on every replica and the topic is writable.
func TestMirrorIntoVerbatimCluster(t *testing.T) {
	bin := BuildVerbatim(t)
	k := StartKafka(t, KafkaOptions{})
	c := startMirrorVCluster(t, bin)
	src, dst := k.Bootstrap(), c.Bootstrap()
	scl := testkit.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	dcl := verbatimClient(t, dst)
	const topic = "mc"
	createTopicOn(t, kadm.NewClient(scl), topic, 2, nil)
	produceBoth := func(tag string, n int) {
		var rs []*kgo.Record
		for i, r := range keyed(topic, n, tag) {
			r.Partition = int32(i % 2)
			rs = append(rs, r)
		}
		produceSync(t, scl, rs...)
	}
	// A compacted topic whose first records Kafka's cleaner removes
	// before the copy: every replica must answer EARLIEST's epoch as
	// the source (the pusher's forward, recorded for the followers).
	const compacted = "mcc"
	createTopicOn(t, kadm.NewClient(scl), compacted, 1, map[string]string{"cleanup.policy": "compact", "segment.ms": "100",
		"min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0", "delete.retention.ms": "0"})
	for round := range 4 {
		rs := keyed(compacted, 40, fmt.Sprintf("r%d", round))
		rs = append(rs, &kgo.Record{Topic: compacted, Key: []byte("key-3")}) // a tombstone
		produceSync(t, scl, rs...)
		time.Sleep(150 * time.Millisecond)
	}
	for i := range 20 {
		produceBoth(fmt.Sprintf("before-%d", i), 50)
	}
	for deadline := time.Now().Add(60 * time.Second); firstBase(t, src, compacted) <= 0; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Kafka's cleaner did not remove the first records of %s within 60s", compacted)
		}
	}
	srcEarliest := earliestAnswer(t, src, compacted)
	t.Logf("%s: the source's first batch at %d, EARLIEST offset %d epoch %d", compacted, firstBase(t, src, compacted), srcEarliest.Offset, srcEarliest.LeaderEpoch)

	pushLog := filepath.Join(t.TempDir(), "push.log")
	pusher := StartProc(t, "pusher", pushLog, t.TempDir(), nil,
		bin, "mirror", "push", "--source", src, "--dest", dst, "--topics", topic+","+compacted, "--create-topics", "--follow",
		"--fetch-bytes", "4096", "--log-format", "json")
	waitDestEnd(t, pusher, dst, topic, 0, 1)
	view := waitInSync(t, c, dcl, topic, 2, 3)
	victim := view[0].leader
	// The source keeps growing while the destination fails over.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 20 {
			produceBoth(fmt.Sprintf("during-%d", i), 20)
			time.Sleep(100 * time.Millisecond)
		}
	}()
	c.Kill(t, victim)
	t.Logf("killed node %d, the leader of %s/0 at epoch %d", victim, topic, view[0].epoch)
	wg.Wait()
	ends := sourceEnds(t, src, topic, 2)
	for p := range int32(2) {
		waitDestEnd(t, pusher, dst, topic, p, ends[p])
	}
	c.Restart(t, victim)
	pusher.Signal(syscall.SIGTERM)
	if !pusher.Wait(30 * time.Second) {
		t.Fatalf("the pusher did not stop\n%s", pusher.LogTail(20))
	}
	if v := runVerify(t, bin, src, dst, topic, 0); !*v.Exact {
		t.Fatalf("not exact after the leader's SIGKILL: %+v", v)
	}
	if v := runVerify(t, bin, src, dst, compacted, 0); !*v.Exact {
		t.Fatalf("%s not exact: %+v", compacted, v)
	}
	for _, nd := range c.Nodes {
		waitEpochAtLogStart(t, nd, compacted+"-0", srcEarliest)
	}

	// mirror stop while partition 1's leader dies.
	view = waitInSync(t, c, dcl, topic, 2, 3)
	victim = view[1].leader
	// The stop is decided (the DELETE of mirror.mode, sent to a broker
	// that survives) while partition 1's leader is killed: the new
	// leader carries out what the dead one did not. `mirror stop` after
	// it finds the decision taken and reports the result.
	var other int32
	for _, nd := range c.Nodes {
		if nd.ID != victim {
			other = nd.ID
		}
	}
	otherAddr := c.Node(t, other).Addr
	decided := make(chan error, 1)
	go func() { decided <- deleteMirrorModeVia(otherAddr, topic) }()
	// SIGKILL at once (cluster.sh's kill starts a shell first): the
	// decision lands at about the same moment.
	time.Sleep(5 * time.Millisecond)
	pid := c.PID(t, victim)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill node %d: %v", victim, err)
	}
	for syscall.Kill(pid, 0) == nil {
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("killed node %d, the leader of %s/1 at epoch %d, during the stop: the DELETE was answered %v", victim, topic, view[1].epoch, <-decided)
	res := stopUntilDone(t, bin, dst, topic)
	t.Logf("mirror stop:\n%s", res.Stdout)
	c.Restart(t, victim)
	waitInSync(t, c, dcl, topic, 2, 3)
	wantStopBarriers(t, c, topic, ends)
	// Writable: an ordinary produce to the stopped topic.
	wcl := verbatimClient(t, dst, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	produceSync(t, wcl, &kgo.Record{Value: []byte("after the stop")})
	if n := strings.Count(allLogs(c), "mirror stopped: the topic is writable"); n != 1 {
		t.Errorf("the brokers logged the topic's stop %d times, want once", n)
	}
}

// stopUntilDone runs `mirror stop --topics topic` until it exits 0
// (bounded): a stop that cannot reach a failing leader (reading the log
// ends first) or whose answer waits past the request timeout for a
// failover fails; repeated, it finds the decision taken and waits for it.
func stopUntilDone(t *testing.T, bin, dst, topic string) *Result {
	t.Helper()
	stopCmd := []string{bin, "mirror", "stop", "--dest", dst, "--topics", topic}
	res, _ := RunTool(t, Cmd{Timeout: 2 * time.Minute}, stopCmd...)
	for deadline := time.Now().Add(40 * time.Second); res.ExitCode != 0; {
		t.Logf("mirror stop during the leader change: exit %d: %s; repeating it", res.ExitCode, tail(res.Stderr, 3))
		if time.Now().After(deadline) {
			t.Fatalf("mirror stop: exit %d\n%s\n%s", res.ExitCode, res.Stdout, tail(res.Stderr, 20))
		}
		time.Sleep(500 * time.Millisecond)
		res, _ = RunTool(t, Cmd{Timeout: 2 * time.Minute}, stopCmd...)
	}
	return res
}

// wantStopBarriers waits until every node's replica of every partition p
// of topic ends with its one barrier at ends[p] (waitReplicaBarrier) and
// checks the replicas of each partition hold the same bytes.
func wantStopBarriers(t *testing.T, c *VCluster, topic string, ends []int64) {
	t.Helper()
	for p := range int32(len(ends)) {
		var want []byte
		for _, nd := range c.Nodes {
			got := waitReplicaBarrier(t, nd, topic, p, ends[p])
			if want == nil {
				want = got
			} else if string(got) != string(want) {
				t.Fatalf("%s/%d: node %d's log differs from node 1's after the stop", topic, p, nd.ID)
			}
		}
	}
}

// waitDestEnd waits until the destination's log end (read_uncommitted, on
// the partition's leader) of topic/p reaches end, while the pusher runs.
func waitDestEnd(t *testing.T, pusher *Proc, dst, topic string, p int32, end int64) {
	t.Helper()
	last := int64(-1)
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := pusher.Alive(); err != nil {
			t.Fatalf("the pusher ended: %v\n%s", err, pusher.LogTail(30))
		}
		if last = clusterEnd(dst, topic, p); last >= end {
			return
		}
	}
	t.Fatalf("%s/%d: the destination ends at %d after 60 s, want %d\n%s", topic, p, last, end, pusher.LogTail(30))
}

// startMirrorVCluster starts the 3 brokers the mirroring tests copy
// into: failure detection in 3 s, min.insync.replicas 2, and props.
func startMirrorVCluster(t *testing.T, bin string, props ...string) *VCluster {
	t.Helper()
	return StartVCluster(t, bin, 3, VClusterOptions{Props: append([]string{
		"broker.session.timeout.ms=3000",
		"replica.lag.time.max.ms=5000",
		"min.insync.replicas=2",
	}, props...)})
}

// clusterEnd is topic/p's log end on its leader (-1: not answered).
func clusterEnd(addr, topic string, p int32) int64 {
	return clusterOffset(addr, topic, p, client.ReadUncommitted)
}

// clusterOffset is topic/p's latest offset at isolation level iso (the
// log end or the last stable offset) on its leader (-1: not answered).
func clusterOffset(addr, topic string, p int32, iso int8) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, err := client.NewCluster(addr, client.Options{ClientID: "interop"})
	if err != nil {
		return -1
	}
	defer cl.Close()
	cn, _, err := cl.Leader(ctx, topic, p)
	if err != nil {
		return -1
	}
	a, err := client.ListOffset(ctx, cn, topic, p, client.Latest, iso)
	if err != nil {
		return -1
	}
	return a.Offset
}

// sourceEnds are the source partitions' log ends.
func sourceEnds(t *testing.T, addr, topic string, n int32) []int64 {
	t.Helper()
	out := make([]int64, n)
	for p := range n {
		if out[p] = clusterEnd(addr, topic, p); out[p] < 0 {
			t.Fatalf("source %s/%d: no log end", topic, p)
		}
	}
	return out
}

// waitReplicaBarrier waits until node's replica of topic/p holds one
// MIRROR_PID_RESET barrier as its last batch (the followers copy it), at
// offset at (right after the mirrored data: the stop point), and returns
// the replica's segment bytes.
func waitReplicaBarrier(t *testing.T, nd VNode, topic string, p int32, at int64) []byte {
	t.Helper()
	var n int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		b := partitionLogBytes(t, nd, fmt.Sprintf("%s-%d", topic, p))
		lastIsBarrier := false
		n = 0
		for it := kbatch.Batches(b); it.Next(); {
			typ, ok := kbatch.ControlType(it.Batch())
			lastIsBarrier = ok && typ == kbatch.ControlMirrorPidReset
			if lastIsBarrier {
				n++
				if off := kbatch.BaseOffset(it.Batch()); off != at {
					t.Fatalf("%s/%d: node %d holds the barrier at offset %d, want %d (the source's log end)", topic, p, nd.ID, off, at)
				}
			}
		}
		if n > 1 {
			t.Fatalf("%s/%d: node %d holds %d barriers, want 1", topic, p, nd.ID, n)
		}
		if n == 1 && lastIsBarrier {
			return b
		}
	}
	t.Fatalf("%s/%d: node %d holds no barrier as its last batch after 30 s (%d barriers)", topic, p, nd.ID, n)
	return nil
}

// allLogs is every node's log.
func allLogs(c *VCluster) string {
	var sb strings.Builder
	for _, nd := range c.Nodes {
		b, _ := os.ReadFile(nd.LogPath)
		sb.Write(b)
	}
	return sb.String()
}

// waitEpochAtLogStart waits until node's replica dir's leader-epoch
// checkpoint starts with the source's EARLIEST answer (its epoch at its
// log start): the replica answers EARLIEST as the source once it leads.
func waitEpochAtLogStart(t *testing.T, nd VNode, dir string, want client.OffsetAnswer) {
	t.Helper()
	wantLine := fmt.Sprintf("%d %d", want.LeaderEpoch, want.Offset)
	var first string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		b, err := os.ReadFile(filepath.Join(nd.Dir, "data", dir, "leader-epoch-checkpoint"))
		if err != nil {
			continue
		}
		// Kafka's format: the version, the entry count, "epoch offset" lines.
		if lines := strings.Split(string(b), "\n"); len(lines) > 2 {
			if first = strings.TrimSpace(lines[2]); first == wantLine {
				return
			}
		}
	}
	t.Fatalf("%s on node %d: the epoch cache starts with %q after 30 s, want %q (the source's EARLIEST)", dir, nd.ID, first, wantLine)
}
