//go:build peerbench

package benchmarks

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/interop"
)

// probeAck is one write of the failover producer.
type probeAck struct {
	sent, at time.Time
	err      error
}

// runFailover measures one leader failover on c: a topic of 3 partitions
// (RF 3, min.insync.replicas=2), a franz-go producer writing one record at
// a time to a partition whose leader holds no control-plane role (the
// KRaft leader; Verbatim's controller or etcd leader), the SIGKILL of
// that leader after 2 s of steady writes, and the time from the signal
// to the acknowledgement of the first record sent after it. The killed
// broker is restarted and the partitions are back in sync before it
// returns. A producer that never gets a write acknowledged again within
// 90 s is an error of the test and a metric failover_timeout, not a
// number.
func runFailover(t *testing.T, c *benchCluster, topic string, round int) map[string]float64 {
	_, view := createReplicated(t, c, topic, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	roles := c.control(ctx)
	var free []int
	for p, pv := range view {
		if roles[pv.Leader] == "" {
			free = append(free, p)
		}
	}
	part, controlPlane := round%len(view), 1.0
	if len(free) > 0 {
		part, controlPlane = free[round%len(free)], 0
	}
	victim := view[part].Leader
	t.Logf("%s failover round %d: control plane %v; killing broker %d, leader of %s/%d at epoch %d", c.name, round+1, roles, victim, topic, part, view[part].Epoch)

	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.bs, ",")...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(2*time.Minute), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var (
		mu   sync.Mutex
		acks []probeAck
		wg   sync.WaitGroup
	)
	stop := make(chan struct{})
	value := bytes.Repeat([]byte("f"), 100)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			sent := time.Now()
			err := cl.ProduceSync(ctx, &kgo.Record{Partition: int32(part), Value: value}).FirstErr()
			mu.Lock()
			acks = append(acks, probeAck{sent: sent, at: time.Now(), err: err})
			mu.Unlock()
		}
	}()
	stopProbe := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}
	defer stopProbe()
	// count returns the acknowledged writes sent at or after since, and the
	// first one's acknowledgement time.
	count := func(since time.Time) (n, errs int, first time.Time) {
		mu.Lock()
		defer mu.Unlock()
		for _, a := range acks {
			switch {
			case a.err != nil:
				errs++
			case !a.sent.Before(since):
				if n == 0 {
					first = a.at
				}
				n++
			}
		}
		return n, errs, first
	}
	begin := time.Now()
	for {
		n, _, _ := count(begin)
		if n >= 50 && time.Since(begin) >= 2*time.Second {
			break
		}
		if time.Since(begin) > time.Minute {
			t.Fatalf("%s: only %d writes acknowledged in a minute before the kill", c.name, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	before, _, _ := count(begin)
	killed := c.kill(victim)
	m := map[string]float64{"killed_control_plane": controlPlane, "acked_before_kill": float64(before)}
	var failover time.Duration
	for {
		n, _, first := count(killed)
		if n > 0 {
			failover = first.Sub(killed)
			break
		}
		if time.Since(killed) > 90*time.Second {
			t.Errorf("%s: no write acknowledged within 90 s of the SIGKILL of broker %d, leader of %s/%d", c.name, victim, topic, part)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Any acknowledgement after the signal (also of a write sent before it).
	mu.Lock()
	for _, a := range acks {
		if a.err == nil && a.at.After(killed) {
			m["first_ack_after_kill_ms"] = float64(a.at.Sub(killed)) / 1e6
			break
		}
	}
	mu.Unlock()
	if failover > 0 {
		m["failover_ms"] = float64(failover) / 1e6
		time.Sleep(time.Second)
	} else {
		m["failover_timeout"] = 1
	}
	stopProbe()
	after, errs, _ := count(killed)
	m["acked_after_kill"], m["produce_errors"] = float64(after), float64(errs)
	var newLeader, newEpoch int32 = -1, -1
	for _, id := range c.ids {
		if id == victim {
			continue
		}
		if v, _, err := interop.BrokerPartitions(ctx, cl, id, topic); err == nil && part < len(v) {
			newLeader, newEpoch = v[part].Leader, v[part].Epoch
			break
		}
	}
	t.Logf("%s failover round %d: next acknowledged write %.0f ms after the SIGKILL of broker %d (any acknowledgement after %.0f ms); new leader %d at epoch %d; %d writes before, %d after, %d errors",
		c.name, round+1, m["failover_ms"], victim, m["first_ack_after_kill_ms"], newLeader, newEpoch, before, after, errs)
	c.restart(victim)
	waitReplicated(t, c, cl, topic, len(view))
	return m
}

// waitGone waits until process pid has exited (gone, or a zombie waiting
// to be reaped by whoever started it).
func waitGone(pid int) {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		// The state follows the command name in parentheses.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'Z' {
			return
		}
	}
}

// etcdLeader returns the node id whose embedded etcd member leads the
// Verbatim cluster's etcd (each member's client URL is in its node's
// server.properties).
func etcdLeader(ctx context.Context, v *interop.VCluster) (int32, error) {
	urls := map[string]int32{}
	var eps []string
	for _, n := range v.Nodes {
		b, err := os.ReadFile(filepath.Join(n.Dir, "server.properties"))
		if err != nil {
			return 0, err
		}
		for _, l := range strings.Split(string(b), "\n") {
			if u, ok := strings.CutPrefix(l, "metadata.etcd.embed.client.url="); ok {
				urls[u] = n.ID
				eps = append(eps, u)
			}
		}
	}
	slices.Sort(eps)
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	var errs []string
	for _, ep := range eps {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := cli.Status(sctx, ep)
		cancel()
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if st.Header != nil && st.Header.MemberId == st.Leader {
			return urls[ep], nil
		}
	}
	return 0, fmt.Errorf("no member says it leads (%s)", strings.Join(errs, "; "))
}
