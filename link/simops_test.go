package link

// The link simulation's operations: what changes between its steps and
// while it runs (the world's events, the operator's pause, resume, stop
// and repair, the retry bound passing, a sync round).

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// whileDown changes the source while the destination is down: appends,
// leader moves, an unclean truncation; the brokers' health, the answers'
// budgets and the faults of the next step.
func (s *simRun) whileDown() {
	for _, pm := range s.parts {
		if s.rng.Intn(2) == 0 {
			s.src.appendBatches(pm.tp, 1+s.rng.Intn(5))
		}
		if s.rng.Intn(6) == 0 {
			s.src.moveLeader(pm.tp)
		}
	}
	if s.rng.Intn(4) == 0 {
		s.truncate(s.parts[s.rng.Intn(len(s.parts))])
	}
	for b := int32(0); b < 3; b++ {
		dead := s.rng.Intn(7) == 0
		s.src.setBroker(b, dead, !dead && s.rng.Intn(4) == 0)
		if dead {
			s.src.count("dead_broker")
		}
	}
	budgets := map[client.TopicPartition]int{}
	for _, pm := range s.parts {
		if s.rng.Intn(2) == 0 {
			budgets[pm.tp] = 1 + s.rng.Intn(3)
		}
	}
	s.src.newStep(budgets, s.rng.Intn(12))
}

// whileRunning changes the world while the link runs, at a settled
// point: the repair of a divergence (`mirror truncate --to-divergence`),
// or one of a leader moving, a broker dying or coming back, a truncation,
// a pause, a resume, the stop of topic b or the retry bound passing; then
// source appends.
func (s *simRun) whileRunning() {
	if topic := s.repairable(); topic != "" && s.rng.Intn(2) == 0 {
		s.repair(topic)
	} else {
		s.runningOp()
	}
	if r := s.m.link(simLinkName); r.rounds.Load() == 0 && !s.src.allDead() {
		// No round could read the source's metadata since the restart;
		// now one can (the sync interval would pass).
		s.syncRound()
	}
	for _, pm := range s.parts {
		if s.rng.Intn(3) == 0 {
			s.src.appendBatches(pm.tp, 1+s.rng.Intn(4))
		}
	}
}

func (s *simRun) runningOp() {
	ctx, t := context.Background(), s.t
	switch op := s.rng.Intn(9); op {
	case 0, 1:
		pm := s.parts[s.rng.Intn(len(s.parts))]
		s.src.moveLeader(pm.tp)
		s.src.appendBatches(pm.tp, 1+s.rng.Intn(3))
		s.src.count("moved_while_running")
	case 2:
		b := int32(s.rng.Intn(3))
		dead := !s.src.dead(b)
		s.src.setBroker(b, dead, false)
		if dead {
			s.src.count("dead_broker")
		}
	case 3:
		s.truncate(s.parts[s.rng.Intn(len(s.parts))])
	case 4, 5:
		topic := []string{"a", "b"}[s.rng.Intn(2)]
		if s.stopped[topic] {
			return
		}
		pause := !s.paused[topic]
		if _, err := s.m.PauseMirrorTopics(ctx, "User:admin", wireext.PauseMirrorTopicsRequest{Link: simLinkName, Topics: []string{topic}, Pause: pause}); err != nil {
			s.t.Fatalf("seed %d step %d: pause %v of %s: %v", s.seed, s.step, pause, topic, err)
		}
		t.Logf("seed %d step %d: pause %v of %s", s.seed, s.step, pause, topic)
		s.paused[topic] = pause
		for _, pm := range s.parts {
			if pm.tp.Topic == topic && !pause {
				pm.unreachable = false // a resume clears the failure
			}
		}
		if pause {
			s.src.count("pause")
		} else {
			s.src.count("resume")
		}
	case 6:
		if !s.stopped["b"] {
			s.stop("b")
		}
	case 7:
		s.expireRetries()
	default:
		s.syncRound()
	}
}

// repairable is a topic with partitions FAILED by divergence that a
// truncation can repair now (running, the leaders of all its diverged
// partitions alive), "" when none.
func (s *simRun) repairable() string {
	ok := map[string]bool{}
	for _, pm := range s.parts {
		t := pm.tp.Topic
		if pm.failed && !s.stopped[t] && !s.paused[t] {
			if _, seen := ok[t]; !seen {
				ok[t] = true
			}
			ok[t] = ok[t] && s.src.view(pm.tp).alive
		}
	}
	for _, t := range sortedKeys(ok) {
		if ok[t] {
			return t
		}
	}
	return ""
}

// repair truncates topic's partitions FAILED by divergence to where they
// part from the source (`mirror truncate --to-divergence`): each is cut
// there, what it cut kept byte for byte at its offsets in the keep topic,
// and copies again.
func (s *simRun) repair(topic string) {
	t := s.t
	cuts := map[int32][]byte{}
	for _, pm := range s.parts {
		if pm.tp.Topic == topic && pm.failed {
			dl, _ := s.destLog(pm.tp)
			cuts[pm.tp.Partition] = nil
			ok, part := prefixOf(splitBatches(dl), s.src.view(pm.tp).log)
			for _, b := range splitBatches(dl) {
				if !ok && b.base >= part { // (a power cut may have taken the divergent tail already)
					cuts[pm.tp.Partition] = append(cuts[pm.tp.Partition], b.raw...)
				}
			}
		}
	}
	// Each repair keeps its cut in a topic of its own (a keep topic that
	// holds other batches at those offsets is refused).
	keep := fmt.Sprintf("%s.truncated.%d", topic, s.step)
	t.Logf("seed %d step %d: mirror truncate --to-divergence of %s, kept in %s", s.seed, s.step, topic, keep)
	res, err := s.m.TruncateMirrorTopics(context.Background(), "User:admin", wireext.TruncateMirrorTopicsRequest{Topics: []string{topic}, KeepTopic: keep})
	if err != nil || len(res) != 1 || res[0].ErrorCode != 0 {
		t.Fatalf("seed %d step %d: mirror truncate of %s: %v %+v", s.seed, s.step, topic, err, res)
	}
	for _, tp := range res[0].Partitions {
		cut, ok := cuts[tp.Partition]
		if !ok {
			t.Fatalf("seed %d step %d: mirror truncate of %s cut partition %d, which had not diverged: %+v", s.seed, s.step, topic, tp.Partition, tp)
		}
		if len(cut) == 0 {
			delete(cuts, tp.Partition)
			continue
		}
		keep, _ := s.destLog(client.TopicPartition{Topic: tp.KeptIn, Partition: tp.Partition})
		if !bytes.Contains(keep, cut) {
			t.Fatalf("seed %d step %d: %s/%d truncated to %d: the %d bytes cut are not in %s (%d bytes)", s.seed, s.step, topic, tp.Partition, tp.TruncatedTo, len(cut), tp.KeptIn, len(keep))
		}
		delete(cuts, tp.Partition)
	}
	for p, cut := range cuts {
		if len(cut) > 0 {
			t.Fatalf("seed %d step %d: mirror truncate of %s did not cut diverged partition %d: %+v", s.seed, s.step, topic, p, res)
		}
	}
	for _, pm := range s.parts {
		if pm.tp.Topic == topic {
			pm.failed, pm.failedLog = false, nil
		}
	}
	s.src.count("repair")
}

// truncate truncates pm's source uncleanly, remembering the lineage it
// replaces.
func (s *simRun) truncate(pm *simPartModel) {
	if old, cut := s.src.truncate(pm.tp); cut >= 0 {
		pm.past = append(pm.past, old)
	}
}

// expireRetries lets the copies' retry bound pass, once every copy that
// can reach its source has been answered without a fault: the copies of
// partitions whose leader is dead give up (FAILED, source unreachable),
// no other.
func (s *simRun) expireRetries() {
	if b := int32(s.rng.Intn(3)); !s.src.dead(b) {
		s.src.setBroker(b, true, false)
		s.src.count("dead_broker")
	}
	s.src.faultsOff()
	var waiting []*simPartModel
	for _, pm := range s.parts {
		if s.stopped[pm.tp.Topic] || s.paused[pm.tp.Topic] || pm.failed || pm.unreachable || s.m.link(simLinkName).rounds.Load() == 0 {
			continue // no copy runs (no sync round read the source since the restart)
		}
		if s.src.view(pm.tp).alive {
			waiting = append(waiting, pm)
		} else {
			pm.unreachable = true
		}
	}
	for deadline := time.Now().Add(simPatience); ; time.Sleep(time.Millisecond) {
		all := true
		for _, pm := range waiting {
			all = all && s.src.view(pm.tp).answered > 0
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("seed %d step %d: the copies that reach their source were not all answered within %v", s.seed, s.step, simPatience)
		}
	}
	s.t.Logf("seed %d step %d: the retry bound passes", s.seed, s.step)
	s.clock.advance(2 * simRetryFor)
	s.src.count("retry_bound")
}

// syncRound runs one of the link's sync rounds (they run only when asked:
// the sync interval never passes); it begins again the copies that gave
// up.
func (s *simRun) syncRound() {
	r := s.m.link(simLinkName)
	if s.src.allDead() {
		r.poke() // a round that ends at the source's metadata: nothing changes
		return
	}
	for _, pm := range s.parts {
		pm.unreachable = false
	}
	want := r.rounds.Load() + 1
	r.poke()
	for deadline := time.Now().Add(simPatience); r.rounds.Load() < want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			s.t.Fatalf("seed %d step %d: no sync round within %v", s.seed, s.step, simPatience)
		}
	}
}

// stop fails topic over (the broker's mirror stop, as `mirror stop`
// sends it), remembering the mirrored logs it stops at.
func (s *simRun) stop(topic string) {
	for _, pm := range s.parts {
		if pm.tp.Topic == topic {
			pm.stopLog, _ = s.destLog(pm.tp)
		}
	}
	s.t.Logf("seed %d step %d: mirror stop of %s", s.seed, s.step, topic)
	stopTopic(s.t, s.addr, topic)
	s.stopped[topic] = true
	s.src.count("stop")
	s.syncRound()
}

// produceLocal writes one record to a stopped partition as a client
// would: it must be taken.
func (s *simRun) produceLocal(tp client.TopicPartition) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(3))
	if err != nil {
		s.t.Fatal(err)
	}
	defer cl.Close()
	r := &kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Value: []byte(fmt.Sprintf("local %d/%d", s.seed, s.step))}
	if err := cl.ProduceSync(testkit.Ctx(s.t), r).FirstErr(); err != nil {
		s.t.Fatalf("seed %d step %d: %s is STOPPED but refuses a client's produce: %v", s.seed, s.step, tp, err)
	}
}
