package link

// The link simulation's checks: when a partition has settled (done what
// the world lets it), and the invariants every observation checks.

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"strings"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/mirror"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// destLog reads the destination partition from its log start to its log
// end as the raw bytes of its whole batches; it fails the test on bytes
// that are not whole batches.
func (s *simRun) destLog(tp client.TopicPartition) ([]byte, int64) {
	start, end, err := s.srv.MirrorLogRange(tp.Topic, tp.Partition)
	if err != nil {
		s.t.Fatalf("seed %d step %d: %s: log range: %v", s.seed, s.step, tp, err)
	}
	var out []byte
	for off := start; off < end; {
		b, err := s.srv.ReadMirrorLog(tp.Topic, tp.Partition, off, 1<<20)
		if err != nil {
			s.t.Fatalf("seed %d step %d: %s: reading at %d: %v", s.seed, s.step, tp, off, err)
		}
		bs, _, partial, err := mirror.Split(b, off)
		if err != nil || partial || len(bs) == 0 {
			s.t.Fatalf("seed %d step %d: %s: the destination holds no whole batch at %d below its log end %d (%d bytes, partial %v): %v", s.seed, s.step, tp, off, end, len(b), partial, err)
		}
		for _, x := range bs {
			out = append(out, x...)
		}
		off = mirror.LastOffset(bs[len(bs)-1]) + 1
	}
	return out, end
}

func splitBatches(b []byte) []simBatch {
	var out []simBatch
	for rest := b; len(rest) > 0; {
		x, r, err := kbatch.Next(rest)
		if err != nil {
			panic(err) // destLog read whole batches
		}
		out = append(out, simBatch{base: kbatch.BaseOffset(x), last: mirror.LastOffset(x), epoch: kbatch.LeaderEpoch(x), raw: x})
		rest = r
	}
	return out
}

// prefixOf reports whether the destination's batches are the lineage's
// first ones, byte for byte; when not, part is where they part (the base
// of the first destination batch that is not the lineage's).
func prefixOf(dest []simBatch, lineage []simBatch) (ok bool, part int64) {
	for i, d := range dest {
		if i >= len(lineage) || !bytes.Equal(d.raw, lineage[i].raw) {
			return false, d.base
		}
	}
	return true, -1
}

// settled returns "" once pm has done what the world lets it, else what
// it waits for.
func (s *simRun) settled(pm *simPartModel, st wireext.MirrorPartitionStatus) string {
	if _, ok := s.srv.LinkTopic(pm.tp.Topic); !ok || st.State == "" {
		return "not mirrored yet"
	}
	v := s.src.view(pm.tp)
	log, hw := v.log, v.hw
	dl, leo := s.destLog(pm.tp)
	want := func(state string) string {
		if st.State != state {
			return fmt.Sprintf("state %s (%s), want %s", st.State, st.Reason, state)
		}
		return ""
	}
	switch {
	case s.stopped[pm.tp.Topic]:
		return want(wireext.StateStopped)
	case pm.failed:
		return want(wireext.StateFailed)
	case pm.unreachable:
		if !strings.HasPrefix(st.Reason, "source unreachable") {
			return fmt.Sprintf("state %s (%s), want FAILED, source unreachable", st.State, st.Reason)
		}
		return want(wireext.StateFailed)
	case s.paused[pm.tp.Topic]:
		return want(wireext.StatePaused)
	case st.LogEndOffset != leo:
		return fmt.Sprintf("status log end %d, the log's %d", st.LogEndOffset, leo) // read before an append
	case st.State == wireext.StateFailed && !strings.HasPrefix(st.Reason, "divergence"):
		return "" // a failure the world did not cause: check reports it
	case !v.alive:
		return "" // no copy can get anything (its leader died at a settled point, or before the restart)
	}
	if ok, part := prefixOf(splitBatches(dl), log); !ok {
		if w := want(wireext.StateFailed); w != "" {
			return w + fmt.Sprintf(" (the destination parts from the source at %d)", part)
		}
		return ""
	}
	if v.budget == 0 && leo == v.delivered && leo < hw {
		s.src.count("budget_cut")
		return "" // the source answered all it would in this step
	}
	if w := want(wireext.StateMirroring); w != "" {
		return fmt.Sprintf("%s, log end %d of %d", w, leo, hw)
	}
	if leo != hw || st.LogEndOffset != hw || st.SourceHighWatermark != hw || st.Lag != 0 {
		return fmt.Sprintf("MIRRORING at log end %d (status: %d, source high watermark %d, lag %d), want %d", leo, st.LogEndOffset, st.SourceHighWatermark, st.Lag, hw)
	}
	return ""
}

// simMoves are the state moves docs/mirroring.md allows (a pause and a
// stop apply in PREPARING as in MIRRORING); a copy restarted with the
// destination is PREPARING again until caught up.
var simMoves = map[string][]string{
	wireext.StatePreparing: {wireext.StateMirroring, wireext.StateFailed, wireext.StatePaused, wireext.StateStopping, wireext.StateStopped},
	wireext.StateMirroring: {wireext.StatePaused, wireext.StateStopping, wireext.StateStopped, wireext.StateFailed},
	wireext.StatePaused:    {wireext.StatePreparing, wireext.StateStopping, wireext.StateStopped},
	wireext.StateFailed:    {wireext.StatePreparing, wireext.StateStopping, wireext.StateStopped},
	wireext.StateStopping:  {wireext.StateStopped},
}

// reachable reports whether state to can follow from through simMoves
// (restarted: the copy may also have begun again, in PREPARING).
func moveAllowed(from, to string, restarted, diverged bool) bool {
	if from == "" || from == to {
		return true
	}
	if diverged && from == wireext.StateFailed {
		return to == wireext.StateStopping || to == wireext.StateStopped // only a truncation or a stop clears it
	}
	seen := map[string]bool{from: true}
	next := []string{from}
	if restarted && from != wireext.StateStopped && from != wireext.StateStopping {
		next = append(next, wireext.StatePreparing)
		seen[wireext.StatePreparing] = true
	}
	for len(next) > 0 {
		x := next[0]
		next = next[1:]
		if x == to {
			return true
		}
		for _, y := range simMoves[x] {
			if !seen[y] {
				seen[y] = true
				next = append(next, y)
			}
		}
	}
	return false
}

// check verifies the invariants of every partition at a settled point
// and records the observation.
func (s *simRun) check(when string, sts map[client.TopicPartition]wireext.MirrorPartitionStatus) {
	t := s.t
	views := s.destViews()
	var line []string
	for _, pm := range s.parts {
		st := sts[pm.tp]
		dl, leo := s.destLog(pm.tp)
		ds := splitBatches(dl)
		log := s.src.view(pm.tp).log
		where := fmt.Sprintf("%s: %s", when, pm.tp)
		// I2, I3: offsets increase, batch epochs never decrease, the
		// partition's leader epoch covers them, the epoch cache holds
		// each batch epoch from its first batch.
		maxEpoch := int32(-1)
		for i, d := range ds {
			if i > 0 && (d.base <= ds[i-1].last || d.epoch < ds[i-1].epoch) {
				t.Fatalf("%s: batch %d-%d (epoch %d) after %d-%d (epoch %d)", where, d.base, d.last, d.epoch, ds[i-1].base, ds[i-1].last, ds[i-1].epoch)
			}
			maxEpoch = max(maxEpoch, d.epoch)
		}
		view, ok := views[pm.tp]
		if !ok || view.epoch < maxEpoch {
			t.Fatalf("%s: leader epoch %d (known %v) below the stored batch epoch %d", where, view.epoch, ok, maxEpoch)
		}
		// I4, I5: the mirrored producers' transactions drive the last
		// stable offset as on the source; I6: none is open after a stop.
		if want := lastStable(ds, leo); view.lso != want {
			t.Fatalf("%s: last stable offset %d, its batches make it %d (log end %d)", where, view.lso, want, leo)
		}
		if s.stopped[pm.tp.Topic] && view.lso != leo {
			var bb []string
			for _, b := range ds {
				h, _ := kbatch.ParseHeader(b.raw)
				typ, _ := kbatch.ControlType(b.raw)
				bb = append(bb, fmt.Sprintf("%d-%d/e%d pid %d txn %v ctl %v/%d", b.base, b.last, b.epoch, h.ProducerID, h.IsTransactional(), h.IsControl(), typ))
			}
			t.Fatalf("%s: STOPPED with a transaction open at %d (log end %d; last crash %s)\n%s", where, view.lso, leo, s.lastCrash, strings.Join(bb, "\n"))
		}
		s.checkEpochCache(where, pm.tp, ds)
		if s.stopped[pm.tp.Topic] {
			s.checkStopped(where, pm, st, dl)
		} else {
			// I1, I2, I7: a whole-batch prefix of the source as it is,
			// or as it was before a truncation the copy then refuses.
			prefix, part := prefixOf(ds, log)
			if !prefix {
				was := false
				for _, old := range pm.past {
					if ok, _ := prefixOf(ds, old); ok {
						was = true
					}
				}
				if !was {
					t.Fatalf("%s: the destination's batches are no prefix of any lineage of the source (they part at %d)", where, part)
				}
				if st.State == wireext.StateMirroring && s.src.view(pm.tp).alive { // (a dead leader tells nothing)
					t.Fatalf("%s: MIRRORING over data the source truncated away (from %d)", where, part)
				}
			}
			s.checkFailed(where, pm, st, dl, prefix, part)
		}
		if st.State != wireext.StateStopped && st.State != wireext.StatePaused && !pm.failed && st.LogEndOffset != leo {
			t.Fatalf("%s: status log end %d, the log ends at %d", where, st.LogEndOffset, leo)
		}
		if s.paused[pm.tp.Topic] && !s.stopped[pm.tp.Topic] && !s.restarted && pm.state == wireext.StatePaused && leo != pm.leo {
			t.Fatalf("%s: PAUSED, yet its log end moved from %d to %d", where, pm.leo, leo)
		}
		if !moveAllowed(pm.state, st.State, s.restarted, pm.failed) {
			t.Fatalf("%s: state %s after %s (restarted %v): not a move docs/mirroring.md allows", where, st.State, pm.state, s.restarted)
		}
		if st.State == wireext.StateFailed && !pm.failed && !pm.unreachable {
			t.Fatalf("%s: FAILED for no reason the world gave: %s", where, st.Reason)
		}
		pm.state, pm.leo = st.State, leo
		mirrored := dl // a stop's own batches and local writes carry the wall clock's timestamps
		if s.stopped[pm.tp.Topic] {
			mirrored = pm.stopLog
		}
		line = append(line, fmt.Sprintf("%s %s %d %08x", pm.tp, st.State, leo, crc32.ChecksumIEEE(mirrored)))
	}
	s.restarted = false
	s.trace = append(s.trace, when+": "+strings.Join(line, ", "))
}

// checkFailed checks a divergence: FAILED with where the logs part when
// first seen, and its log never rewritten afterwards (a power cut may
// still take an unsynced tail).
func (s *simRun) checkFailed(where string, pm *simPartModel, st wireext.MirrorPartitionStatus, dl []byte, prefix bool, part int64) {
	t := s.t
	if pm.failed {
		if st.State != wireext.StateFailed || !strings.HasPrefix(st.Reason, "divergence") {
			t.Fatalf("%s: diverged, now %s (%s)", where, st.State, st.Reason)
		}
		if !bytes.HasPrefix(pm.failedLog, dl) {
			t.Fatalf("%s: FAILED by divergence, yet its log was rewritten (%d bytes, %d when it failed)", where, len(dl), len(pm.failedLog))
		}
		return
	}
	if st.State != wireext.StateFailed {
		return
	}
	if pm.unreachable {
		s.src.count("unreachable")
		return
	}
	if prefix || !strings.HasPrefix(st.Reason, "divergence") || st.DivergenceOffset != part {
		t.Fatalf("%s: FAILED (%s) at divergence offset %d; the destination parts from the source at %d (prefix %v)", where, st.Reason, st.DivergenceOffset, part, prefix)
	}
	pm.failed, pm.failedLog = true, dl
	s.src.count("divergence")
}

// checkStopped checks a stopped partition: STOPPED across crashes, its
// mirrored log kept with the stop point the stop persisted, writable.
func (s *simRun) checkStopped(where string, pm *simPartModel, st wireext.MirrorPartitionStatus, dl []byte) {
	t := s.t
	if st.State != wireext.StateStopped {
		t.Fatalf("%s: stopped, now %s", where, st.State)
	}
	if !bytes.HasPrefix(dl, pm.stopLog) {
		start, end, _ := s.srv.MirrorLogRange(pm.tp.Topic, pm.tp.Partition)
		var bases []string
		for _, b := range splitBatches(dl) {
			bases = append(bases, fmt.Sprintf("%d-%d/e%d/%d", b.base, b.last, b.epoch, len(b.raw)))
		}
		var sb []string
		for _, b := range splitBatches(pm.stopLog) {
			sb = append(sb, fmt.Sprintf("%d-%d/e%d", b.base, b.last, b.epoch))
		}
		t.Fatalf("%s: STOPPED, but the %d bytes mirrored before the stop are not the start of its %d (range %d-%d: %v; stop log %v)", where, len(pm.stopLog), len(dl), start, end, bases, sb)
	}
	barrier := false
	for _, b := range splitBatches(dl[len(pm.stopLog):]) {
		if typ, ok := kbatch.ControlType(b.raw); ok && typ == 7 {
			barrier = true
		}
	}
	if !barrier {
		t.Fatalf("%s: STOPPED without the stop's barrier (MIRROR_PID_RESET) after its mirrored log", where)
	}
	if bs := splitBatches(pm.stopLog); len(bs) > 0 {
		last := bs[len(bs)-1]
		if off, epoch, ok := s.srv.MirrorStopPoint(pm.tp.Topic, pm.tp.Partition); !ok || off != last.last || epoch != last.epoch {
			t.Fatalf("%s: stop point %d/%d (%v), the last mirrored batch ends at %d with epoch %d", where, off, epoch, ok, last.last, last.epoch)
		}
	}
	if s.restarted || pm.state != wireext.StateStopped {
		s.produceLocal(pm.tp)
	}
}

// checkEpochCache wants an entry per batch epoch that starts at or before
// the epoch's first batch and after the batch before it (I3: the cache
// follows the stored batches; where the source's epoch began in a gap
// before its first batch, it may say so).
func (s *simRun) checkEpochCache(where string, tp client.TopicPartition, ds []simBatch) {
	entries, _, _, err := s.srv.PartitionEpochs(tp.Topic, tp.Partition)
	if err != nil {
		s.t.Fatalf("%s: epoch cache: %v", where, err)
	}
	starts := map[int32]int64{}
	for _, e := range entries {
		starts[e.Epoch] = e.StartOffset
	}
	for i, d := range ds {
		if i > 0 && ds[i-1].epoch == d.epoch {
			continue
		}
		after := int64(-1)
		if i > 0 {
			after = ds[i-1].last
		}
		if at, ok := starts[d.epoch]; !ok || at > d.base || at <= after {
			s.t.Fatalf("%s: epoch %d's first batch is at %d (the one before ends at %d), the epoch cache says it starts at %d (%v; entries %v)", where, d.epoch, d.base, after, at, ok, entries)
		}
	}
}

// destView is what the destination's clients see of a partition: its
// leader epoch (Metadata) and its last stable offset (ListOffsets
// latest, read_committed).
type destView struct {
	epoch int32
	lso   int64
}

// destViews reads every partition's view over the destination's
// listener.
func (s *simRun) destViews() map[client.TopicPartition]destView {
	ctx := context.Background()
	cl, err := client.NewCluster(s.addr, client.Options{ClientID: "sim-check"})
	if err != nil {
		s.t.Fatal(err)
	}
	defer cl.Close()
	md, err := cl.Metadata(ctx, sortedKeys(simTopics))
	if err != nil {
		s.t.Fatalf("seed %d step %d: the destination's metadata: %v", s.seed, s.step, err)
	}
	out := map[client.TopicPartition]destView{}
	for _, n := range sortedKeys(md) {
		for p, pm := range md[n].Partitions {
			cn, err := cl.BrokerConn(ctx, pm.Leader)
			if err != nil {
				s.t.Fatal(err)
			}
			a, err := client.ListOffset(ctx, cn, n, int32(p), client.Latest, client.ReadCommitted)
			if err != nil {
				s.t.Fatalf("seed %d step %d: %s/%d: the destination's last stable offset: %v", s.seed, s.step, n, p, err)
			}
			out[client.TopicPartition{Topic: n, Partition: int32(p)}] = destView{epoch: pm.LeaderEpoch, lso: a.Offset}
		}
	}
	return out
}

// lastStable is the last stable offset of a log ending at leo: the start
// of its earliest transaction still open, else leo.
func lastStable(ds []simBatch, leo int64) int64 {
	open := map[int64]int64{}
	for _, d := range ds {
		h, err := kbatch.ParseHeader(d.raw)
		if err != nil || !h.IsTransactional() {
			continue
		}
		if h.IsControl() {
			delete(open, h.ProducerID)
		} else if _, ok := open[h.ProducerID]; !ok {
			open[h.ProducerID] = d.base
		}
	}
	lso := leo
	for _, at := range open {
		lso = min(lso, at)
	}
	return lso
}
