//go:build peerbench

package benchmarks

import (
	"context"
	"flag"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/interop"
)

var (
	clusterRounds   = flag.Int("clusterbench.rounds", 3, "throughput rounds (Kafka and Verbatim alternate; medians are reported)")
	clusterFailRnds = flag.Int("clusterbench.failover-rounds", 3, "leader SIGKILL rounds per system (0: none)")
	clusterRawMB    = flag.Int("clusterbench.raw-mb", 256, "MiB the raw generator sends per run")
	clusterPPRecs   = flag.Int("clusterbench.pp-records", 50_000, "ProducerPerformance records (1 KiB) per run")
	clusterSession  = flag.Int("clusterbench.session-ms", 6000, "broker.session.timeout.ms of both clusters (Kafka's broker.heartbeat.interval.ms is a third of it, as etcd's lease keep-alive)")
	clusterWarmMB   = flag.Int("clusterbench.warmup-mb", 64, "MiB of the raw generator's lead-in per cluster, not recorded (0: no lead-in)")
	clusterWarmRecs = flag.Int("clusterbench.warmup-records", 10_000, "ProducerPerformance records of the lead-in per cluster")
	clusterOut      = flag.String("clusterbench.out", "tmp", "directory (relative to benchmarks/) for <date>-<commit>-cluster.jsonl")
	clusterQuiet    = flag.String("clusterbench.wait-file", "", "wait (polling every 30 s) until this file exists before starting the clusters")
)

// Systems of the cluster benchmark.
const (
	sysKafka    = "kafka"
	sysVerbatim = "verbatim"
)

// benchCluster is one 3-broker cluster under measurement.
type benchCluster struct {
	name string
	bs   string
	ids  []int32
	pids func() []int
	// kill SIGKILLs broker id, returns once it is gone, and returns the
	// time the signal was sent.
	kill    func(id int32) time.Time
	restart func(id int32)
	// control lists the nodes holding the cluster's control plane now
	// (Kafka: the KRaft quorum leader, which is the active controller;
	// Verbatim: the controller and the etcd leader), each with its role.
	control func(ctx context.Context) map[int32]string
}

// TestClusterBench runs issue 18's benchmark: a 3-broker Verbatim
// cluster (scripts/cluster.sh, embedded etcd) beside a 3-broker Apache
// Kafka 4.4 cluster (the interop harness's KRaft cluster), both on this
// machine with the same settings where they correspond, rounds
// alternating: acks=all produce at replication factor 3 with the raw
// generator and with ProducerPerformance (MB/s, p99, Verbatim/Kafka), and
// the time from the SIGKILL of a partition leader to a producer's next
// acknowledged write. Measured and reported, never asserted; see
// benchmarks/README.md "Replicated cluster beside Kafka".
//
//	make bench-cluster
//	go test -tags peerbench -count=1 -timeout 30m -run '^TestClusterBench$' ./benchmarks/ -v -args -clusterbench.rounds=1 -clusterbench.raw-mb=8 -clusterbench.pp-records=2000 -clusterbench.failover-rounds=1
func TestClusterBench(t *testing.T) {
	root, err := interop.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	commit := headCommit(t, root, "benchmarks", "broker", "replica", "controller", "clustermeta", "storage", "cmd", "scripts")
	session := time.Duration(*clusterSession) * time.Millisecond
	bin := interop.BuildVerbatim(t)
	waitForFile(t, *clusterQuiet, "starting the clusters")
	work := t.TempDir()
	machine := DescribeMachine(work)
	kafka := startKafkaBench(t, session)
	verb := startVerbatimBench(t, bin, session)
	all := []*benchCluster{kafka, verb}
	waitAllIdle(all)

	var lines []ClusterLine
	add := func(scen, params string, rounds map[string]Rounds) {
		for _, sys := range []string{sysKafka, sysVerbatim} {
			lines = append(lines, ClusterLine{Entry: rounds[sys].Entry(scen, sys, params), Rounds: rounds[sys]})
		}
	}
	order := func(r int) []*benchCluster {
		if r%2 == 1 {
			return []*benchCluster{verb, kafka}
		}
		return []*benchCluster{kafka, verb}
	}

	// A lead-in of each load per cluster, not recorded: the JVMs' JIT
	// (brokers' and the tool's class loading) must not land in round 1.
	rawBytes := int64(*clusterRawMB) << 20
	if *clusterWarmMB > 0 {
		for _, c := range all {
			m := runRaw(t, c, all, "warm-raw", int64(*clusterWarmMB)<<20)
			p := runPerf(t, c, all, "warm-perf", *clusterWarmRecs)
			t.Logf("lead-in %s (not recorded): raw %.1f MB/s, ProducerPerformance %.1f MB/s", c.name, m["mb_per_s"], p["mb_per_s"])
		}
	}

	// 1. The raw generator: Produce v9, acks=-1, to each partition's leader.
	{
		rounds := map[string]Rounds{sysKafka: {}, sysVerbatim: {}}
		for r := range *clusterRounds {
			got := map[string]map[string]float64{}
			for _, c := range order(r) {
				topic := fmt.Sprintf("raw-%d", r)
				got[c.name] = runRaw(t, c, all, topic, rawBytes)
				t.Logf("produce-raw round %d %s: %.1f MB/s, p99 %.1f ms, %.2f cluster CPU s/GB", r+1, c.name, got[c.name]["mb_per_s"], got[c.name]["p99_ms"], got[c.name]["cluster_cpu_s_per_gb"])
			}
			addRatios(got)
			for sys, m := range got {
				rounds[sys].Add(m)
			}
		}
		add("cluster-produce-raw", fmt.Sprintf("raw Produce v9 (the benchmarks' generator), acks=-1, 64 KiB batches of 1000-byte records, 4 partitions x RF 3 (min.insync.replicas=2), one connection per partition to its leader x 8 in flight, %d MiB per run; cluster CPU = the 3 brokers' CPU", *clusterRawMB), rounds)
	}

	// 2. ProducerPerformance, acks=all, idempotent, through the bootstrap list.
	{
		rounds := map[string]Rounds{sysKafka: {}, sysVerbatim: {}}
		for r := range *clusterRounds {
			got := map[string]map[string]float64{}
			for _, c := range order(r) {
				topic := fmt.Sprintf("perf-%d", r)
				m := runPerf(t, c, all, topic, *clusterPPRecs)
				got[c.name] = m
				t.Logf("produce-perf round %d %s: %.1f MB/s, p99 %.0f ms, %.2f cluster CPU s/GB", r+1, c.name, m["mb_per_s"], m["p99_ms"], m["cluster_cpu_s_per_gb"])
			}
			addRatios(got)
			for sys, m := range got {
				rounds[sys].Add(m)
			}
		}
		add("cluster-produce-perf", fmt.Sprintf("Kafka's ProducerPerformance (kafka-producer-perf-test, 4.4), %d records of 1 KiB, acks=all, enable.idempotence=true, linger.ms=5, uncompressed, 4 partitions x RF 3 (min.insync.replicas=2), bootstrap = the 3 brokers", *clusterPPRecs), rounds)
	}

	// 3. Leader failover: SIGKILL of a partition leader under a steady
	// acks=all producer, to the producer's next acknowledged write.
	if *clusterFailRnds > 0 {
		rounds := map[string]Rounds{sysKafka: {}, sysVerbatim: {}}
		for r := range *clusterFailRnds {
			got := map[string]map[string]float64{}
			for _, c := range order(r) {
				waitAllIdle(all)
				got[c.name] = runFailover(t, c, fmt.Sprintf("failover-%d", r), r)
			}
			addRatio(got, "failover_ms")
			for sys, m := range got {
				rounds[sys].Add(m)
			}
		}
		add("cluster-failover", fmt.Sprintf("topic of 3 partitions x RF 3 (min.insync.replicas=2); one franz-go producer (idempotent, acks=all, one 100-byte record at a time, retry backoff 50 ms, metadata min age 100 ms) writing one partition whose leader holds no control-plane role; that leader SIGKILLed after >= 2 s of steady writes; failover_ms = SIGKILL to the acknowledgement of the first record sent after it; broker.session.timeout.ms=%d on both (Kafka broker.heartbeat.interval.ms=%d; etcd's lease keep-alive runs every TTL/3)", session.Milliseconds(), session.Milliseconds()/3), rounds)
	}

	name, err := WriteClusterLines(filepath.Join(root, "benchmarks", *clusterOut), ClusterHeader{
		Date: time.Now().UTC().Format("2006-01-02T15:04Z"), Commit: commit, Command: "make bench-cluster",
		Profile: fmt.Sprintf("%d throughput rounds, %d failover rounds, raw %d MiB, ProducerPerformance %d records", *clusterRounds, *clusterFailRnds, *clusterRawMB, *clusterPPRecs),
		Machine: machine, LoadAvgEnd: DescribeMachine(work).LoadAvg,
		Settings: fmt.Sprintf("both: 3 brokers on loopback, RF 3, min.insync.replicas=2, acks=all, broker.session.timeout.ms=%d, replica.lag.time.max.ms=30000 (default), num.replica.fetchers=1, page cache (no flush per message; Verbatim --flush never); Kafka 4.4 KRaft combined nodes (broker+controller, static quorum of the 3), 1 GiB heap each, G1, full JIT; Verbatim: scripts/cluster.sh, every broker with its embedded etcd member", session.Milliseconds()),
	}, lines)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if l.System == sysVerbatim {
			t.Logf("RESULT %s: %s", l.Scenario, l.summary())
		}
	}
	t.Logf("wrote %s", name)
}

// runRaw creates topic (4 partitions, RF 3) on c and runs the raw
// generator into it: one connection per partition, to its leader.
func runRaw(t *testing.T, c *benchCluster, all []*benchCluster, topic string, bytes int64) map[string]float64 {
	leaders, _ := createReplicated(t, c, topic, 4, map[string]string{"max.message.bytes": strconv.Itoa(2 << 20)})
	waitAllIdle(all)
	var res LoadResult
	cpu := clusterCPU(t, c, func() {
		var err error
		res, err = RunLoad(context.Background(), Load{Addrs: leaders, Topic: topic, BatchBytes: 64 << 10, Conns: 4, InFlight: 8,
			TotalBytes: bytes, Timeout: 10 * time.Minute})
		if err != nil {
			t.Fatalf("raw generator on %s: %v", c.name, err)
		}
	})
	return map[string]float64{"mb_per_s": res.MBps(), "p50_ms": res.Percentile(0.5), "p99_ms": res.Percentile(0.99),
		"p999_ms": res.Percentile(0.999), "cluster_cpu_s": cpu, "cluster_cpu_s_per_gb": cpu / (float64(res.Bytes) / 1e9)}
}

// runPerf creates topic (4 partitions, RF 3) on c and runs Kafka's
// ProducerPerformance into it through the bootstrap list.
func runPerf(t *testing.T, c *benchCluster, all []*benchCluster, topic string, records int) map[string]float64 {
	createReplicated(t, c, topic, 4, nil)
	waitAllIdle(all)
	var m map[string]float64
	cpu := clusterCPU(t, c, func() {
		res, err := interop.RunJavaTool(t, interop.Cmd{Timeout: 15 * time.Minute, JVMOpts: perfJVM}, "kafka-producer-perf-test",
			"--bootstrap-server", c.bs, "--topic", topic, "--num-records", strconv.Itoa(records),
			"--record-size", "1024", "--throughput", "-1", "--command-property", "acks=all",
			"enable.idempotence=true", "linger.ms=5")
		if err != nil {
			t.Fatalf("ProducerPerformance on %s: %v", c.name, err)
		}
		if m, err = parseProducerPerf(res.Stdout); err != nil {
			t.Fatalf("ProducerPerformance on %s: %v\n%s", c.name, err, res.Stdout)
		}
	})
	m["cluster_cpu_s"], m["cluster_cpu_s_per_gb"] = cpu, cpu/(float64(records)*1024/1e9)
	return m
}

// addRatios puts one round's Verbatim/Kafka ratios into Verbatim's metrics.
func addRatios(got map[string]map[string]float64) {
	for _, m := range []string{"mb_per_s", "p99_ms"} {
		addRatio(got, m)
	}
}

// addRatio sets Verbatim's ratio_<metric> to Verbatim/Kafka when both
// measured it.
func addRatio(got map[string]map[string]float64, metric string) {
	v, vok := got[sysVerbatim][metric]
	k, kok := got[sysKafka][metric]
	if vok && kok && k > 0 {
		got[sysVerbatim]["ratio_"+metric] = v / k
	}
}

func startKafkaBench(t *testing.T, session time.Duration) *benchCluster {
	k := interop.StartKafkaCluster(t, 3, interop.KafkaOptions{FullJIT: true, HeapMB: 1024, LogLevel: "warn", Props: map[string]string{
		"auto.create.topics.enable":    "false",
		"default.replication.factor":   "3",
		"min.insync.replicas":          "2",
		"broker.session.timeout.ms":    strconv.FormatInt(session.Milliseconds(), 10),
		"broker.heartbeat.interval.ms": strconv.FormatInt(session.Milliseconds()/3, 10),
	}})
	c := &benchCluster{name: sysKafka, bs: k.Bootstrap()}
	for _, n := range k.Nodes {
		c.ids = append(c.ids, int32(n.ID))
	}
	c.pids = func() []int {
		var ps []int
		for _, n := range k.Nodes {
			ps = append(ps, n.PID())
		}
		return ps
	}
	c.kill = func(id int32) time.Time {
		at := time.Now()
		k.Nodes[id-1].Kill()
		return at
	}
	c.restart = func(id int32) { k.Nodes[id-1].Restart(t) }
	c.control = func(ctx context.Context) map[int32]string {
		cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addrs()...))
		if err != nil {
			return nil
		}
		defer cl.Close()
		req := kmsg.NewPtrDescribeQuorumRequest()
		rt := kmsg.NewDescribeQuorumRequestTopic()
		rt.Topic = "__cluster_metadata"
		rp := kmsg.NewDescribeQuorumRequestTopicPartition()
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Logf("kafka: DescribeQuorum: %v", err)
			return nil
		}
		return map[int32]string{resp.Topics[0].Partitions[0].LeaderID: "KRaft leader (active controller)"}
	}
	return c
}

func startVerbatimBench(t *testing.T, bin string, session time.Duration) *benchCluster {
	v := interop.StartVCluster(t, bin, 3, interop.VClusterOptions{Props: []string{
		"min.insync.replicas=2",
		"default.replication.factor=3",
		"auto.create.topics.enable=false",
		fmt.Sprintf("broker.session.timeout.ms=%d", session.Milliseconds()),
	}})
	c := &benchCluster{name: sysVerbatim, bs: v.Bootstrap()}
	for _, n := range v.Nodes {
		c.ids = append(c.ids, n.ID)
	}
	c.pids = func() []int {
		var ps []int
		for _, n := range v.Nodes {
			ps = append(ps, v.PID(t, n.ID))
		}
		return ps
	}
	// The signal is sent from here, not through `cluster.sh kill` (a shell's
	// start-up would count as failover time); restart is cluster.sh's.
	c.kill = func(id int32) time.Time {
		pid := v.PID(t, id)
		if pid <= 0 {
			t.Fatalf("verbatim: node %d has no pid", id)
		}
		at := time.Now()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("verbatim: SIGKILL node %d: %v", id, err)
		}
		waitGone(pid)
		return at
	}
	c.restart = func(id int32) { v.Restart(t, id) }
	c.control = func(ctx context.Context) map[int32]string {
		roles := map[int32]string{}
		if md, err := metadata(ctx, c.bs, ""); err == nil && md.Controller >= 0 {
			roles[md.Controller] = "controller"
		}
		if id, err := etcdLeader(ctx, v); err == nil {
			if roles[id] != "" {
				roles[id] += " and etcd leader"
			} else {
				roles[id] = "etcd leader"
			}
		} else {
			t.Logf("verbatim: etcd leader: %v", err)
		}
		return roles
	}
	return c
}

// waitAllIdle waits until every broker of every cluster is idle (each at
// most 30 s), so one run's background work does not land in the next.
func waitAllIdle(cs []*benchCluster) {
	for _, c := range cs {
		for _, pid := range c.pids() {
			if pid > 0 {
				WaitIdle(pid, 30*time.Second)
			}
		}
	}
}

// clusterCPU runs f and returns the CPU seconds the cluster's brokers used
// during it.
func clusterCPU(t *testing.T, c *benchCluster, f func()) float64 {
	pids := c.pids()
	before := make([]float64, len(pids))
	for i, pid := range pids {
		st, err := ReadProcStats(pid)
		if err != nil {
			t.Fatalf("%s broker %d stats: %v", c.name, pid, err)
		}
		before[i] = st.CPUSecs
	}
	f()
	var cpu float64
	for i, pid := range pids {
		st, err := ReadProcStats(pid)
		if err != nil {
			t.Fatalf("%s broker %d stats: %v", c.name, pid, err)
		}
		cpu += st.CPUSecs - before[i]
	}
	return cpu
}

func metadata(ctx context.Context, bs, topic string) (kadm.Metadata, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bs, ",")...))
	if err != nil {
		return kadm.Metadata{}, err
	}
	defer cl.Close()
	if topic == "" {
		return kadm.NewClient(cl).BrokerMetadata(ctx)
	}
	return kadm.NewClient(cl).Metadata(ctx, topic)
}

// createReplicated creates topic with parts partitions, replication
// factor 3 and min.insync.replicas=2 on c, waits until every broker
// agrees on every partition's leader with three replicas in sync, and
// returns the leaders' addresses by partition and that view.
func createReplicated(t *testing.T, c *benchCluster, topic string, parts int32, cfg map[string]string) ([]string, []interop.PartitionView) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.bs, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	configs := map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}
	for k, v := range cfg {
		configs[k] = kadm.StringPtr(v)
	}
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, parts, 3, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("%s: create %s: %v", c.name, topic, err)
	}
	view := waitReplicated(t, c, cl, topic, int(parts))
	md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	addrs := make([]string, parts)
	for p, pv := range view {
		for _, b := range md.Brokers {
			if b.NodeID == pv.Leader {
				addrs[p] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
			}
		}
		if addrs[p] == "" {
			t.Fatalf("%s: %s/%d led by unknown broker %d", c.name, topic, p, pv.Leader)
		}
	}
	return addrs, view
}

// waitReplicated waits (bounded) until every broker of c agrees on every
// partition of topic with a leader and all 3 replicas in sync, and
// returns that view.
func waitReplicated(t *testing.T, c *benchCluster, cl *kgo.Client, topic string, parts int) []interop.PartitionView {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	v, err := interop.WaitInSync(ctx, cl, c.ids, topic, parts, 3)
	if err != nil {
		t.Fatalf("%s: %s: %v", c.name, topic, err)
	}
	return v
}
