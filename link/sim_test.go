package link

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/internal/testwasm"
	"github.com/verbatim-kafka/verbatim/storage"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// TestLinkSimulation is the link's deterministic simulation: the link's
// runner (discovery, writer registration, the partition copies, their
// states, the shared fetch sessions) over a fake source cluster of three
// brokers (simsource_test.go) whose partitions change leaders, truncate
// uncleanly, lose answers, and whose brokers die and slow down; the
// destination, a broker on an in-memory file system, crashes and is
// reopened on what survives at every step (kill -9, or a power cut that
// drops or tears what was not synced), often in the middle of a copy (the
// source answers a bounded number of times per step); pauses, resumes and
// a mirror stop interleaved. After every step, and after every change the
// step makes while the link runs, the test waits until each partition has
// done what the world lets it (caught up, cut off by its answers' budget,
// refused) and checks: the destination partition is a whole-batch prefix
// of its source (the same bytes, offsets and epochs; I1, I2, I7), its
// epoch cache and leader epoch follow its batches (I3), its log end and
// state are what the world implies and its state moved only as
// docs/mirroring.md says, a divergence is FAILED with where the logs part
// and never rewritten, a stopped partition stays STOPPED and writable.
//
// The world changes only between the link's steps, and what the copies
// are answered depends on the world and their requests alone; the test
// observes only settled states, so a seed fixes the run (the time the
// link sees stands still within a step; TestLinkSimulationDeterministic
// compares two runs of one seed). VERBATIM_LINK_SIM_SEEDS and
// VERBATIM_LINK_SIM_STEPS run more (make sim-link).
func TestLinkSimulation(t *testing.T) {
	seeds, steps := envInt("VERBATIM_LINK_SIM_SEEDS", 8), envInt("VERBATIM_LINK_SIM_STEPS", 12)
	total := map[string]int{}
	var mu sync.Mutex
	for seed := int64(1); seed <= int64(seeds); seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			s := runSim(t, seed, steps)
			mu.Lock()
			for k, v := range s.src.seen {
				total[k] += v
			}
			mu.Unlock()
		})
	}
	if t.Failed() {
		return
	}
	// The seeds must have exercised what the test claims to cover.
	for _, k := range []string{"leader_move", "truncation", "divergence", "dead_broker", "slow_answer", "lost_answer",
		"pause", "resume", "stop", "repair", "retry_bound", "unreachable", "crash_process", "crash_power", "budget_cut", "caught_up", "moved_while_running"} {
		if total[k] == 0 {
			t.Errorf("no seed exercised %s (seen %v)", k, total)
		}
	}
	t.Logf("events over all seeds: %v", total)
}

// TestLinkSimulationDeterministic runs one seed twice: the same states,
// log ends and logs at every observation.
func TestLinkSimulationDeterministic(t *testing.T) {
	a := runSim(t, 3, 6).trace
	b := runSim(t, 3, 6).trace
	if len(a) != len(b) {
		t.Fatalf("%d observations, then %d", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("observation %d differs:\n%s\n%s", i, a[i], b[i])
		}
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

const simLinkName = "sim"

// simPatience bounds the wait for what must happen (a settled link, a
// sync round): a hang fails the test, it does not stall it.
const simPatience = time.Minute

// simRetryFor is the copies' retry bound.
const simRetryFor = time.Minute

// simTopics are the mirrored topics: a keeps mirroring, b is stopped
// (failed over) during the run.
var simTopics = map[string]int{"a": 3, "b": 2}

// simClock is the time the link sees: it stands still within a step (no
// retry bound or back-off deadline passes, so no outcome depends on how
// fast the goroutines run); a sleep of an hour or more (the sync
// interval) lasts until its context ends, a shorter one only yields.
type simClock struct {
	// now is the time; it moves only when the test sleeps on it
	// (advance).
	now *testkit.SleepClock
}

func (c simClock) Now() time.Time { return c.now.Now() }

func (c simClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d >= time.Hour {
		<-ctx.Done()
		return ctx.Err()
	}
	tm := time.NewTimer(time.Millisecond)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c simClock) advance(d time.Duration) { _ = c.now.Sleep(context.Background(), d) }

// simPartModel is what the test knows of one mirrored partition.
type simPartModel struct {
	tp client.TopicPartition
	// state and leo are the last observation's.
	state string
	leo   int64
	// past are the source's lineages before its unclean truncations.
	past [][]simBatch
	// failed: observed FAILED by divergence, with failedLog its log then.
	failed    bool
	failedLog []byte
	// stopLog is the mirrored log at the mirror stop (stopped topics).
	stopLog []byte
	// unreachable: its copy gave up on its dead leader (the retry bound
	// passed); FAILED "source unreachable" until a sync round, a resume
	// or a restart begins it again.
	unreachable bool
}

// simRun is one seeded run.
type simRun struct {
	t     *testing.T
	seed  int64
	rng   *rand.Rand // the test's choices
	crng  *rand.Rand // the crashes' torn lengths
	src   *simCluster
	clock simClock
	dir   string
	fs    *storage.MemFS
	srv   *broker.Server
	addr  string
	done  chan error
	m     *Manager
	parts []*simPartModel
	// paused and stopped are the topics paused and stopped.
	paused, stopped map[string]bool
	// restarted: the destination was reopened since the last
	// observation.
	restarted bool
	step      int
	trace     []string
	lastCrash storage.CrashMode
}

var simQuiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func runSim(t *testing.T, seed int64, steps int) *simRun {
	s := &simRun{t: t, seed: seed, rng: rand.New(rand.NewSource(seed * 7919)), crng: rand.New(rand.NewSource(seed * 104729)),
		src: newSimCluster(seed, 3, simTopics), clock: simClock{testkit.NewSleepClock(time.Unix(1_700_000_000, 0))},
		dir: filepath.Join(t.TempDir(), "data"), fs: storage.NewMemFS(), paused: map[string]bool{}, stopped: map[string]bool{}}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	testwasm.LinkCache(t, s.dir)
	if err := s.fs.MkdirAll(s.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range sortedKeys(simTopics) {
		for p := 0; p < simTopics[name]; p++ {
			tp := client.TopicPartition{Topic: name, Partition: int32(p)}
			s.parts = append(s.parts, &simPartModel{tp: tp, state: "", leo: 0})
			s.src.appendBatches(tp, 1+s.rng.Intn(6))
		}
	}
	s.src.logf = t.Logf
	t.Cleanup(s.close)
	s.open()
	if err := s.m.CreateLink(context.Background(), "User:admin", wireext.LinkConfig{Name: simLinkName, SourceBootstrap: simAddr(0), Topics: "a|b"}, false); err != nil {
		t.Fatal(err)
	}
	for s.step = 0; s.step < steps; s.step++ {
		s.observe("start")
		if s.rng.Intn(3) > 0 {
			s.whileRunning()
			s.observe("running")
		}
		s.crash()
		s.whileDown()
		s.open()
	}
	s.finish()
	return s
}

// open starts the destination broker on the file system and the link
// manager over it.
func (s *simRun) open() {
	t := s.t
	srv, err := broker.Open(broker.Config{DataDir: s.dir, FS: s.fs, NodeID: 1, Logger: simQuiet})
	if err != nil {
		t.Fatalf("seed %d step %d: reopening the destination: %v", s.seed, s.step, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.srv, s.addr, s.done = srv, ln.Addr().String(), make(chan error, 1)
	go func() { s.done <- srv.Serve(ln) }()
	s.m, err = Open(Config{Host: srv, Log: simQuiet, Clock: s.clock, SyncInterval: 1000 * time.Hour, RetryFor: simRetryFor, FetchBytes: 1500,
		newSource: func(string, client.Options) (sourceCluster, error) { return simSource{s.src}, nil }})
	if err != nil {
		t.Fatalf("seed %d step %d: opening the link manager: %v", s.seed, s.step, err)
	}
	s.restarted = true
	for _, pm := range s.parts {
		// The first sync round begins the copy again, unless it cannot
		// read the source's metadata.
		pm.unreachable = pm.unreachable && s.src.allDead()
	}
}

// crash takes what survives a crash of the destination's machine (the
// process, or a power cut that loses or tears what was not synced), then
// lets the old process end (its later writes reach nothing).
func (s *simRun) crash() {
	mode := storage.CrashProcess
	if s.rng.Intn(3) == 0 {
		mode = storage.CrashModes[s.rng.Intn(len(storage.CrashModes))]
		s.src.count("crash_power")
	} else {
		s.src.count("crash_process")
	}
	s.lastCrash = mode
	s.t.Logf("seed %d step %d: crash (%s)", s.seed, s.step, mode)
	next := s.fs.Crash(mode, s.crng)
	s.close()
	s.fs = next
	s.clock.advance(time.Minute)
}

func (s *simRun) close() {
	if s.m != nil {
		_ = s.m.Close()
		s.m = nil
	}
	if s.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.srv.Shutdown(ctx)
		cancel()
		<-s.done
		s.srv = nil
	}
}

// finish heals the world (every broker alive and quick, no budget, no
// fault, every topic resumed), lets the link catch up (every partition
// not FAILED then holds exactly its source's log), stops every topic and
// checks the failover survives one more crash.
func (s *simRun) finish() {
	for b := int32(0); b < 3; b++ {
		s.src.setBroker(b, false, false)
	}
	s.src.newStep(nil, 0)
	for _, topic := range sortedKeys(simTopics) {
		if s.paused[topic] && !s.stopped[topic] {
			if _, err := s.m.PauseMirrorTopics(context.Background(), "User:admin", wireext.PauseMirrorTopicsRequest{Link: simLinkName, Topics: []string{topic}}); err != nil {
				s.t.Fatal(err)
			}
			s.paused[topic] = false
			s.src.count("resume")
		}
	}
	s.observe("healed")
	for _, pm := range s.parts {
		if pm.failed || s.stopped[pm.tp.Topic] {
			continue
		}
		log := s.src.view(pm.tp).log
		dl, _ := s.destLog(pm.tp)
		if string(dl) != string(joinRaw(log)) {
			s.t.Fatalf("seed %d: %s healed and MIRRORING, but the destination's %d bytes are not the source's %d", s.seed, pm.tp, len(dl), len(joinRaw(log)))
		}
		s.src.count("caught_up")
	}
	for _, topic := range sortedKeys(simTopics) {
		if !s.stopped[topic] {
			s.stop(topic)
		}
	}
	s.observe("stopped")
	s.crash()
	s.open()
	s.observe("stopped, reopened")
}

// joinRaw is the bytes of batches.
func joinRaw(bs []simBatch) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b.raw...)
	}
	return out
}

// statusOf is the link's status of every partition, by partition.
func (s *simRun) statusOf() map[client.TopicPartition]wireext.MirrorPartitionStatus {
	sts, err := s.m.DescribeMirrors(context.Background(), wireext.DescribeMirrorsRequest{Link: simLinkName})
	if err != nil {
		s.t.Fatalf("seed %d step %d: describing the mirrors: %v", s.seed, s.step, err)
	}
	out := map[client.TopicPartition]wireext.MirrorPartitionStatus{}
	for _, st := range sts {
		out[client.TopicPartition{Topic: st.Topic, Partition: st.Partition}] = st
	}
	return out
}

// observe waits until every partition settled (settled, simcheck_test.go),
// then checks the invariants and records the observation.
func (s *simRun) observe(phase string) {
	when := fmt.Sprintf("seed %d step %d (%s)", s.seed, s.step, phase)
	deadline := time.Now().Add(simPatience)
	if r := s.m.link(simLinkName); r != nil && s.restarted && !s.src.allDead() {
		// The first sync round begins the copies (and those that had
		// given up); until it ends, the persisted states show.
		for r.rounds.Load() == 0 {
			if time.Now().After(deadline) {
				s.t.Fatalf("%s: no sync round within %v", when, simPatience)
			}
			time.Sleep(time.Millisecond)
		}
	}
	for {
		sts := s.statusOf()
		var why []string
		for _, pm := range s.parts {
			if w := s.settled(pm, sts[pm.tp]); w != "" {
				why = append(why, fmt.Sprintf("%s: %s", pm.tp, w))
			}
		}
		if len(why) == 0 {
			s.check(when, sts)
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: not settled within %v:\n%s", when, simPatience, strings.Join(why, "\n"))
		}
		time.Sleep(2 * time.Millisecond)
	}
}
