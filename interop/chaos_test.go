package interop

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The fault test (docs/cluster.md "Fault testing"): a 3-broker Verbatim
// cluster on an external 3-member etcd, with acks=all producers
// (idempotent and transactional) and consumer groups (read_committed for
// the transactional topic) running while brokers are SIGKILLed and
// restarted, SIGSTOPped past their session timeout and resumed, and etcd
// members SIGKILLed and restarted. Afterwards chaos_check_test.go checks
// the histories and chaos_replicas_test.go the replicas' logs.
//
// Sizes: `make test` runs the small one (3 faults, a few thousand
// records); `make chaos` sets VERBATIM_CHAOS=large (30 faults, more
// producers and records). VERBATIM_CHAOS_FAULTS and VERBATIM_CHAOS_SEED
// override the fault count and the seed of the fault schedule;
// VERBATIM_CHAOS_KEEP=DIR keeps the nodes' logs of a failed run there.

const (
	chaosIdemTopic = "chaos-idem"
	chaosTxnTopic  = "chaos-txn"
	chaosParts     = 3
	// chaosSessionMS is broker.session.timeout.ms: a pause lasts longer.
	chaosSessionMS = 3000
)

type chaosSize struct {
	faults        int
	idemProducers int
	// pace is the pause between one producer's batches; batch its records.
	pace  time.Duration
	batch int
	// maxRecords caps each idempotent producer.
	maxRecords int
	// txnRecs are a transaction's records per partition.
	txnRecs int
}

func chaosSizeFromEnv(t *testing.T) (chaosSize, int64) {
	sz := chaosSize{faults: 3, idemProducers: 2, pace: 20 * time.Millisecond, batch: 40, maxRecords: 20000, txnRecs: 4}
	if os.Getenv("VERBATIM_CHAOS") == "large" {
		sz = chaosSize{faults: 30, idemProducers: 3, pace: 10 * time.Millisecond, batch: 100, maxRecords: 500000, txnRecs: 10}
	}
	if v := os.Getenv("VERBATIM_CHAOS_FAULTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			t.Fatalf("VERBATIM_CHAOS_FAULTS=%q", v)
		}
		sz.faults = n
	}
	seed := time.Now().UnixNano()
	if v := os.Getenv("VERBATIM_CHAOS_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("VERBATIM_CHAOS_SEED=%q", v)
		}
		seed = n
	}
	return sz, seed
}

// chaosRun is the workload's shared state: the history and the outcomes.
type chaosRun struct {
	t0   time.Time
	hist chaosHistory
	stop chan struct{} // the producers'
	wg   sync.WaitGroup
	// consStop ends the consumers (once they drained the logs), cwg
	// waits for them.
	consStop chan struct{}
	cwg      sync.WaitGroup
	bs       string
	acked    atomic.Int64 // idempotent records acknowledged
	commits  atomic.Int64 // transactions committed

	mu sync.Mutex
	// unknown are values whose produce failed (they may or may not be
	// in the log, at most once).
	unknown map[string]bool
	txns    []chaosTxn
	errs    []string
}

// chaosTxn is one transaction: its records' values and its outcome.
type chaosTxn struct {
	values  []string
	outcome string // "commit", "abort" or "unknown" (an error on the way)
}

func (r *chaosRun) now() int64 { return int64(time.Since(r.t0)) }

func (r *chaosRun) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

func (r *chaosRun) logErr(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) < 20 {
		r.errs = append(r.errs, fmt.Sprintf(format, args...))
	}
}

// idemProducer writes batches of values "i<id>-<seq>" round-robin over
// the partitions with acks=all (franz-go's idempotent default).
func (r *chaosRun) idemProducer(t *testing.T, id int, sz chaosSize) {
	cl := verbatimClient(t, r.bs, kgo.DefaultProduceTopic(chaosIdemTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(60*time.Second), kgo.ProducerLinger(0))
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for seq, n := 0, 0; seq < sz.maxRecords && !r.stopped(); n++ {
			time.Sleep(sz.pace)
			p := int32(n % chaosParts)
			recs := make([]*kgo.Record, sz.batch)
			for i := range recs {
				recs[i] = &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("i%d-%07d", id, seq))}
				seq++
			}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			res := cl.ProduceSync(ctx, recs...)
			cancel()
			r.recordProduce(chaosIdemTopic, res, nil)
			for _, pr := range res {
				if pr.Err == nil {
					r.acked.Add(1)
				}
			}
		}
	}()
}

// recordProduce adds the acknowledged records of one produce as ack
// operations (one per partition, at the acknowledgement's time) and the
// failed ones to unknown (or to txn's values only).
func (r *chaosRun) recordProduce(topic string, res kgo.ProduceResults, failed *[]string) {
	at := r.now()
	byPart := map[int32][]chaosRec{}
	for _, pr := range res {
		if pr.Err != nil {
			if failed != nil {
				*failed = append(*failed, string(pr.Record.Value))
				continue
			}
			r.mu.Lock()
			r.unknown[string(pr.Record.Value)] = true
			r.mu.Unlock()
			r.logErr("produce %s: %v", pr.Record.Value, pr.Err)
			continue
		}
		byPart[pr.Record.Partition] = append(byPart[pr.Record.Partition], chaosRec{pr.Record.Offset, string(pr.Record.Value)})
	}
	for p, recs := range byPart {
		r.hist.add(chaosOpAck, topic, p, recs, at, at)
	}
}

// txnProducer runs transactions of one record per partition, committing
// three of four and aborting the fourth; an error on the way makes the
// transaction's outcome unknown and the producer starts over with a new
// client of the same transactional id (which fences the old one).
func (r *chaosRun) txnProducer(t *testing.T, sz chaosSize) {
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(r.bs, ",")...), kgo.DefaultProduceTopic(chaosTxnTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID("chaos-txn-producer"), kgo.TransactionTimeout(60 * time.Second),
		kgo.RecordDeliveryTimeout(60 * time.Second), kgo.ProducerLinger(0)}
	// The first client here (the options are checked on the test's
	// goroutine), later ones on the producer's.
	first, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		cl := first
		// The last transaction is a commit: it closes every partition, so
		// readers know they read everything once they read it.
		last := ""
		maxTxns := sz.maxRecords / (chaosParts * sz.txnRecs)
		for n, extra := 0, 0; last != "commit" || (n < maxTxns && !r.stopped()); n++ {
			closing := r.stopped() || n >= maxTxns
			if closing {
				if extra++; extra > 30 {
					r.logErr("no closing commit in 30 transactions")
					break
				}
			}
			time.Sleep(2 * sz.pace)
			txn := chaosTxn{outcome: "commit"}
			if n%4 == 3 && !closing {
				txn.outcome = "abort"
			}
			// Each partition's last record of the transaction is the
			// partition's own, so the closing commit is last everywhere.
			var recs []*kgo.Record
			for i := range sz.txnRecs {
				for p := range chaosParts {
					v := fmt.Sprintf("t%06d-%d-%d", n, p, i)
					txn.values = append(txn.values, v)
					recs = append(recs, &kgo.Record{Partition: int32(p), Value: []byte(v)})
				}
			}
			err := cl.BeginTransaction()
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
				var failed []string
				res := cl.ProduceSync(ctx, recs...)
				r.recordProduce(chaosTxnTopic, res, &failed)
				err = res.FirstErr()
				end := kgo.TryCommit
				if txn.outcome == "abort" {
					end = kgo.TryAbort
				}
				if err == nil {
					err = cl.EndTransaction(ctx, end)
				}
				cancel()
			}
			if err != nil {
				txn.outcome = "unknown"
				r.logErr("transaction %d: %v", n, err)
				cl.Close()
				if cl, err = kgo.NewClient(opts...); err != nil {
					r.logErr("transactional client: %v", err)
					return
				}
			} else if txn.outcome == "commit" {
				r.commits.Add(1)
			}
			last = txn.outcome
			r.mu.Lock()
			r.txns = append(r.txns, txn)
			r.mu.Unlock()
		}
		cl.Close()
	}()
}

// groupConsumer consumes topic in group with isolation, recording every
// poll's records per partition as a read operation and, per partition,
// the sequence it saw (reset at every assignment change).
func (r *chaosRun) groupConsumer(t *testing.T, id int, topic, group string, committed bool) *chaosConsumer {
	c := &chaosConsumer{id: id, topic: topic, committed: committed, seen: map[int32][]chaosSeen{}}
	bump := func(context.Context, *kgo.Client, map[string][]int32) { c.gen.Add(1) }
	opts := []kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(bump), kgo.OnPartitionsRevoked(bump), kgo.OnPartitionsLost(bump)}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl := verbatimClient(t, r.bs, opts...)
	r.cwg.Add(1)
	go func() {
		defer r.cwg.Done()
		defer cl.Close()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			fs := cl.PollFetches(ctx)
			cancel()
			select {
			case <-r.consStop:
				return
			default:
			}
			at := r.now()
			gen := c.gen.Load()
			fs.EachPartition(func(p kgo.FetchTopicPartition) {
				if len(p.Records) == 0 {
					return
				}
				recs := make([]chaosRec, len(p.Records))
				for i, rec := range p.Records {
					recs[i] = chaosRec{rec.Offset, string(rec.Value)}
				}
				r.hist.add(chaosOpRead, topic, p.Partition, recs, at, at)
				c.saw(p.Partition, gen, recs)
			})
		}
	}()
	return c
}

// etcdLeader is the member (1-based, cluster.sh's numbering) that leads
// the external etcd's raft group.
func etcdLeader(t *testing.T, c *VCluster) int {
	t.Helper()
	eps := strings.Split(c.EtcdEndpoints, ",")
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, ep := range eps {
		st, err := cli.Status(ctx, ep)
		if err == nil && st.Header.MemberId == st.Leader {
			return i + 1
		}
	}
	t.Fatalf("no etcd member of %s says it leads", c.EtcdEndpoints)
	return 0
}

// chaosFault is one injected fault.
type chaosFault struct {
	kind   string // "broker-kill", "broker-pause", "etcd-kill"
	target int
	what   string // what the target was
}

// inject runs the fault and heals it: a killed broker or member is
// restarted, a paused broker resumed after its session timeout passed.
func (f chaosFault) inject(t *testing.T, c *VCluster) {
	switch f.kind {
	case "broker-kill":
		c.Kill(t, int32(f.target))
		time.Sleep(time.Second)
		c.Restart(t, int32(f.target))
	case "broker-pause":
		c.Pause(t, int32(f.target))
		time.Sleep(chaosSessionMS*time.Millisecond + 2*time.Second)
		c.Resume(t, int32(f.target))
	case "etcd-kill":
		c.KillEtcd(t, f.target)
		time.Sleep(2 * time.Second)
		c.RestartEtcd(t, f.target)
	}
}

func TestChaos(t *testing.T) {
	sz, seed := chaosSizeFromEnv(t)
	rng := rand.New(rand.NewSource(seed))
	t.Logf("fault schedule seed %d (VERBATIM_CHAOS_SEED), %d faults", seed, sz.faults)
	bin, etcdBin := BuildVerbatim(t), BuildEtcd(t)
	c := StartVCluster(t, bin, 3, VClusterOptions{EtcdMembers: 3, EtcdBin: etcdBin, Props: []string{
		fmt.Sprintf("broker.session.timeout.ms=%d", chaosSessionMS),
		"replica.lag.time.max.ms=5000",
		"group.initial.rebalance.delay.ms=0",
		"min.insync.replicas=2",
	}})
	if keep := os.Getenv("VERBATIM_CHAOS_KEEP"); keep != "" {
		// The nodes' logs of a failed run, kept for a post-mortem.
		t.Cleanup(func() {
			if t.Failed() {
				_ = os.MkdirAll(keep, 0o755)
				files, _ := filepath.Glob(filepath.Join(c.Dir, "*", "*.log"))
				for _, f := range files {
					if b, err := os.ReadFile(f); err == nil {
						_ = os.WriteFile(filepath.Join(keep, filepath.Base(filepath.Dir(f))+".log"), b, 0o644)
					}
				}
				t.Logf("node and etcd logs kept in %s", keep)
			}
		})
	}
	cl := verbatimClient(t, c.Bootstrap())
	adm := kadm.NewClient(cl)
	for _, topic := range []string{chaosIdemTopic, chaosTxnTopic} {
		createTopicRF(t, adm, topic, chaosParts, 3, map[string]string{"min.insync.replicas": "2"})
		waitInSync(t, c, cl, topic, chaosParts, 3)
	}

	r := &chaosRun{t0: time.Now(), stop: make(chan struct{}), consStop: make(chan struct{}), bs: c.Bootstrap(), unknown: map[string]bool{}}
	r.hist.init()
	var consumers []*chaosConsumer
	for i := range 2 {
		consumers = append(consumers, r.groupConsumer(t, i, chaosIdemTopic, "chaos-idem-group", false))
		consumers = append(consumers, r.groupConsumer(t, 2+i, chaosTxnTopic, "chaos-txn-group", true))
	}
	for i := range sz.idemProducers {
		r.idemProducer(t, i, sz)
	}
	r.txnProducer(t, sz)
	monitor := r.endMonitor(adm)
	stopAll := func() {
		select {
		case <-r.stop:
		default:
			close(r.stop)
		}
		r.wg.Wait()
		monitor()
	}
	defer func() {
		stopAll()
		r.stopConsumers()
	}()

	// progress waits (bounded) until the producers made progress after a
	// fault was healed: more idempotent acknowledgements and a commit.
	progress := func(what string) {
		a, cm := r.acked.Load(), r.commits.Load()
		for deadline := time.Now().Add(60 * time.Second); r.acked.Load() < a+int64(sz.batch) || r.commits.Load() < cm+1; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no progress in 60 s (acknowledged %d -> %d, commits %d -> %d); errors: %v", what, a, r.acked.Load(), cm, r.commits.Load(), r.errs)
			}
		}
	}
	progress("before the first fault")
	kinds := []string{"broker-kill", "broker-pause", "etcd-kill"}
	counts := map[string]int{}
	// views are both topics' partitions once every replica is in sync.
	views := func() []partitionView {
		var v []partitionView
		for _, topic := range []string{chaosIdemTopic, chaosTxnTopic} {
			v = append(v, waitInSync(t, c, cl, topic, chaosParts, 3)...)
		}
		return v
	}
	before := views()
	leaderChanges := 0
	for i := range sz.faults {
		// A broker fault hits the leader of a random partition; an etcd
		// fault a random member.
		f := chaosFault{kind: kinds[i%len(kinds)], target: 1 + rng.Intn(3)}
		switch {
		case f.kind != "etcd-kill":
			f.target, f.what = int(before[rng.Intn(len(before))].leader), " (a partition leader)"
		case counts["etcd-kill"]%2 == 0:
			// Every other etcd fault takes the raft leader: a new etcd
			// election under the brokers' leases and watches.
			f.target, f.what = etcdLeader(t, c), " (the raft leader)"
		}
		start := time.Now()
		f.inject(t, c)
		counts[f.kind]++
		progress(fmt.Sprintf("fault %d (%s %d)", i+1, f.kind, f.target))
		after := views()
		moved := 0
		for p := range after {
			if after[p].epoch > before[p].epoch {
				moved++
			}
		}
		leaderChanges += moved
		before = after
		t.Logf("fault %d: %s %d%s, healed and in sync after %v; %d of %d partitions changed leader epoch",
			i+1, f.kind, f.target, f.what, time.Since(start).Round(time.Millisecond), moved, len(after))
	}
	stopAll()
	for _, topic := range []string{chaosIdemTopic, chaosTxnTopic} {
		waitInSync(t, c, cl, topic, chaosParts, 3)
	}
	if len(r.errs) > 0 {
		t.Logf("client errors during the faults (outcomes recorded as unknown): %v", r.errs)
	}

	checked := r.check(t, c, cl, consumers)
	c.Stop(t)
	batches := checkReplicaLogs(t, c)
	t.Logf("chaos: %d faults injected (%d broker SIGKILL+restart, %d broker SIGSTOP past the session timeout, %d etcd member SIGKILL+restart), %d partition leader changes; "+
		"%d records checked (%d idempotent acknowledged, %d of failed produces present; %d transactions: %s), %d history operations linearizable, %d consumer records checked, %d replica batch pairs compared",
		sz.faults, counts["broker-kill"], counts["broker-pause"], counts["etcd-kill"], leaderChanges,
		checked.records, r.acked.Load(), checked.unknownIn, len(r.txns), checked.txnSummary, checked.ops, checked.consumed, batches)
}
