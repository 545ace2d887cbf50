package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/internal/testkit"
)

// TestPartitionCopySimulation drives the partition copy, on simulated time
// and one goroutine, against a simulated source and destination whose
// faults and events come from a seed: leader changes (stale epochs,
// broken connections), connection failures and lost produce answers,
// retention moving the source's log start past the copy position,
// another pusher registering (PRODUCER_FENCED), an unclean truncation of
// the source, destination epoch bumps, source appends while copying. A
// copy that stops is restarted, as an operator would (a restarted pusher registers
// again and is the newest). After every run the destination must be an exact
// prefix of the source: the same batches, bytes and offsets, no duplicate
// and no gap except what the source itself deleted. A run that completes
// must never leave the destination holding data the source does not; a
// truncation under the copy must end in a divergence refusal (exit 1)
// whenever the destination holds data beyond it.
func TestPartitionCopySimulation(t *testing.T) {
	total := map[string]int{}
	for seed := int64(1); seed <= 100; seed++ {
		seen := simulate(t, seed, false)
		for k, v := range seen {
			total[k] += v
		}
	}
	// The seeds must have exercised every path the test claims to cover.
	for _, k := range []string{"leader_change", "retention", "fetch_below_log_start", "log_start_forwarded", "rival", "fenced",
		"truncation", "divergence", "lost_answer", "identical_retry", "restart", "complete", "follow_stopped", "fetch_epoch_unknown", "dest_epoch_stale", "start_epoch_forwarded"} {
		if total[k] == 0 {
			t.Errorf("no seed exercised %s (seen %v)", k, total)
		}
	}
	t.Logf("events over all seeds: %v", total)
}

// TestPartitionCopySimulationConcurrent runs the same worlds with the
// copy's real schedule: fetching and producing in their own goroutines.
// The order of calls, and so what happens, depends on the scheduler; the
// invariants checked after every run hold for any order.
func TestPartitionCopySimulationConcurrent(t *testing.T) {
	for seed := int64(1); seed <= 30; seed++ {
		simulate(t, seed, true)
	}
}

// simulate runs one seeded world until its copy completes or refuses for
// good; concurrent selects the copy's goroutine schedule.
func simulate(t *testing.T, seed int64, concurrent bool) map[string]int {
	rng := rand.New(rand.NewSource(seed))
	w := &simWorld{writer: Writer{Epoch: -1}, rng: rng, clock: testkit.NewSleepClock(time.Unix(1_700_000_000, 0)), seen: map[string]int{},
		appends: 30 + rng.Intn(30), leaderChanges: 1 + rng.Intn(4), retentions: rng.Intn(3), rivals: int(seed % 3 / 2),
		truncations: int(seed%4) / 3, faultPct: 2 + rng.Intn(6)}
	w.cache = []epochStart{{0, 0}}
	w.appendBatches(5 + rng.Intn(20))
	fetchBytes := int32(150 + rng.Intn(1500))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.cancel = cancel
	// stale: the destination holds data the source truncated away since
	// it was copied. Every later run must then refuse, writing nothing.
	stale := false
	// Some seeds follow the source (until stopped once caught up), the
	// others copy up to the high watermark read at the start.
	follow := seed%5 == 0
	for run := 0; run < 40; run++ {
		writer := Writer{Epoch: RegisterEpoch}
		writer.ID[0] = byte(run)
		c := NewPartitionCopy(CopyConfig{Topic: "t", Partition: 0, Source: simSource{w}, Dest: simDest{w},
			Clock: w.clock, FetchBytes: fetchBytes, Writer: writer, Follow: follow})
		before := len(w.dlog)
		rctx, rcancel := context.WithCancel(ctx)
		if follow && !stale {
			// (A copy over truncated data must refuse by itself.)
			w.stopFollow = rcancel
		}
		err := c.run(rctx, concurrent)
		rcancel()
		w.stopFollow = nil
		if follow && errors.Is(err, context.Canceled) && ctx.Err() == nil {
			w.seen["follow_stopped"]++
			err = nil // stopped by its operator: a clean end
		}
		if run > 0 {
			w.seen["restart"]++
		}
		if stale {
			if !errors.Is(err, ErrDivergence) || ExitCode(err) != ExitRefused || len(w.dlog) != before {
				t.Fatalf("seed %d run %d: the destination holds truncated data, but the copy returned %v (exit %d) and wrote %d batches", seed, run, err, ExitCode(err), len(w.dlog)-before)
			}
			w.seen["divergence"]++
			return w.seen
		}
		// The destination is a prefix of what the source holds now, or
		// of what it held before an unclean truncation (data copied just
		// before it).
		msg := w.checkPrefix(w.lineage)
		if msg != "" && w.prevLineage != nil && w.checkPrefix(w.prevLineage) == "" {
			msg, stale = "", true
		}
		if msg != "" {
			t.Fatalf("seed %d run %d (err %v): %s\n%s", seed, run, err, msg, w.describe())
		}
		if w.hwViolation != "" {
			t.Fatalf("seed %d run %d: %s", seed, run, w.hwViolation)
		}
		switch {
		case err == nil:
			if !stale && w.caughtUp() && w.quiet() {
				w.seen["complete"]++
				return w.seen
			}
		case errors.Is(err, ErrDivergence):
			if ExitCode(err) != ExitRefused {
				t.Fatalf("seed %d: divergence with exit %d: %v", seed, ExitCode(err), err)
			}
			w.seen["divergence"]++
		case errors.Is(err, kerr.ProducerFenced):
			if ExitCode(err) != ExitRefused {
				t.Fatalf("seed %d: fenced with exit %d: %v", seed, ExitCode(err), err)
			}
			w.seen["fenced"]++
		case ExitCode(err) == ExitUsage:
			w.seen["gave_up"]++ // retries exhausted: restarted like any other stop
		case errors.Is(err, context.Canceled):
			t.Fatalf("seed %d run %d: the copy made more than %d calls without finishing", seed, run, maxCalls)
		default:
			t.Fatalf("seed %d run %d: unexpected error (exit %d): %v", seed, run, ExitCode(err), err)
		}
		// Let the world go on before the restart.
		for i := 0; i < 5; i++ {
			w.step()
		}
	}
	// Bounded: stop the events and run to the end once more.
	w.appends, w.leaderChanges, w.retentions, w.truncations, w.rivals, w.faultPct = 0, 0, 0, 0, 0, 0
	writer := Writer{Epoch: RegisterEpoch, ID: [16]byte{0: 0xfe}}
	final := NewPartitionCopy(CopyConfig{Topic: "t", Partition: 0, Source: simSource{w}, Dest: simDest{w}, Clock: w.clock, FetchBytes: fetchBytes, Writer: writer})
	w.tracing = true
	err := final.run(ctx, concurrent)
	if ctx.Err() != nil {
		t.Fatalf("seed %d: the copies made more than %d calls; the last ones:\n%s", seed, maxCalls, strings.Join(w.trace, "\n"))
	}
	if err != nil && !errors.Is(err, ErrDivergence) {
		t.Fatalf("seed %d: final run: %v\n%s", seed, err, strings.Join(w.trace, "\n"))
	}
	if msg := w.checkPrefix(w.lineage); err == nil && (msg != "" || !w.caughtUp()) {
		t.Fatalf("seed %d: final run ended at %d of %d: %s (copy %+v)\n%s\n%s", seed, w.dnext, w.next, msg, final.Snapshot(), w.describe(), strings.Join(w.trace, "\n"))
	}
	w.seen["complete"]++
	return w.seen
}

// checkPrefix compares the destination with a source lineage: every batch
// from the destination's log start on is the lineage's batch at that
// offset, byte for byte, in order; and every lineage batch in that range
// that the source still holds is on the destination. It returns "" or
// what differs.
func (w *simWorld) checkPrefix(lineage []simBatch) string {
	at := map[int64]simBatch{}
	for _, b := range lineage {
		at[b.base] = b
	}
	prev := int64(-1)
	held := map[int64]bool{}
	for _, d := range w.dlog {
		if d.base <= prev {
			return fmt.Sprintf("destination batch at %d after one ending at %d: duplicate or reordered", d.base, prev)
		}
		prev = d.last
		s, ok := at[d.base]
		if !ok || !bytes.Equal(s.raw, d.raw) {
			return fmt.Sprintf("destination batch %d-%d (epoch %d) is not the source's (present %v)", d.base, d.last, d.epoch, ok)
		}
		held[d.base] = true
	}
	for _, s := range lineage {
		if s.base >= w.dlogStart && s.last < w.dnext && s.last >= w.logStart && !held[s.base] {
			return fmt.Sprintf("gap: source batch %d-%d is missing on the destination (log %d-%d)", s.base, s.last, w.dlogStart, w.dnext)
		}
	}
	return ""
}

// describe lists the destination and both source lineages, for a failure.
func (w *simWorld) describe() string {
	list := func(bs []simBatch) string {
		out := ""
		for _, b := range bs {
			out += fmt.Sprintf(" %d-%d/e%d", b.base, b.last, b.epoch)
		}
		return out
	}
	return fmt.Sprintf("destination (log start %d):%s\nsource lineage:%s\nbefore the truncation:%s", w.dlogStart, list(w.dlog), list(w.lineage), list(w.prevLineage))
}
