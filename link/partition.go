package link

// One mirrored partition of a link: its copy (mirror.PartitionCopy over
// the source and the in-process dest) and its state.
//
//	PREPARING  the copy registered, resumed and is catching up to the
//	           source high watermark it read when it started;
//	MIRRORING  caught up once, following the source;
//	PAUSED     the topic is paused (persisted): no copy runs;
//	STOPPING   the broker's mirror stop is under way;
//	STOPPED    the topic was stopped (failed over): it is writable and no
//	           copy runs; the copy's refusal is then not a failure;
//	FAILED     the copy ended with a refusal (persisted with its reason).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/mirror"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// rateStale is how long an append rate is shown without a new append.
const rateStale = 5 * time.Second

type partRun struct {
	r         *runner
	topic     string
	partition int32
	// led: this broker led the partition when the manager last looked
	// (cluster.go followCluster; under r.mu).
	led bool

	mu     sync.Mutex
	copy   *mirror.PartitionCopy
	cancel context.CancelFunc
	done   chan struct{}
	// firstHW is the source high watermark read when the copy started
	// (-1 unknown); caught is set once the destination reached it.
	firstHW int64
	caught  bool
	// idleHW is the source high watermark the sync round reads while no
	// copy runs (paused, failed), for the lag (-1 unknown).
	idleHW int64
	// fetchedHW is the high watermark of the copy's last fetch answer
	// (-1: none yet), fetchErr the failure of its last fetch or leader
	// lookup (nil after a success): while the source does not answer,
	// its high watermark is unknown, never the stale one.
	fetchedHW int64
	fetchErr  error
	// caughtUpAt is when the destination last was caught up (lag 0).
	caughtUpAt time.Time
	// rate: bytes appended per second over the last window.
	rateAt    time.Time
	rateBytes int64
	rate      int64
}

func newPartRun(r *runner, topic string, partition int32) *partRun {
	return &partRun{r: r, topic: topic, partition: partition, firstHW: -1, idleHW: -1, fetchedHW: -1, caughtUpAt: r.m.clock.Now()}
}

func (pr *partRun) running() bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.done != nil
}

// begin starts the copy as writer w (registered already).
func (pr *partRun) begin(w mirror.Writer) {
	r := pr.r
	ctx, cancel := context.WithCancel(r.ctx)
	// What the copy is delivered counts against the link's fetch buffer
	// until the destination's log end passes it (budget.go).
	led := r.fetch.newLedger()
	c := mirror.NewPartitionCopy(mirror.CopyConfig{Topic: pr.topic, Partition: pr.partition,
		Source: trackedSource{r.sourceFor(pr.topic, pr.partition, led), pr},
		Dest:   &dest{h: r.m.host, link: r.name, topic: pr.topic, partition: pr.partition},
		Clock:  r.m.clock, Log: r.log, FetchBytes: r.m.fetchBytes, RetryFor: r.m.retryFor, Follow: true, Writer: w,
		ChunkDone: func(st mirror.PartitionStats) { led.appended(st.End); pr.progress(st) }})
	done := make(chan struct{})
	pr.mu.Lock()
	pr.copy, pr.cancel, pr.done, pr.caught, pr.firstHW, pr.fetchedHW, pr.fetchErr = c, cancel, done, false, -1, -1, nil
	pr.rateAt, pr.rateBytes, pr.rate = r.m.clock.Now(), 0, 0
	pr.mu.Unlock()
	if err := r.clearFailure(pr.topic, pr.partition); err != nil {
		r.log.Warn("persisting a partition's restart", "topic", pr.topic, "partition", pr.partition, "err", err)
	}
	go func() {
		defer close(done)
		pr.readFirstHW(ctx)
		err := c.Run(ctx)
		led.close()
		if ctx.Err() == nil { // else halted (paused, stopped, failed by sync) or closing: not a failure
			pr.ended(err)
		}
		cancel()
		// Not running only once its end is accounted for, so the next
		// sync round cannot start a copy the failure would then
		// overwrite.
		pr.mu.Lock()
		pr.done, pr.cancel = nil, nil
		pr.mu.Unlock()
	}()
}

// readFirstHW reads the source high watermark the copy catches up to
// (PREPARING until the destination reaches it).
func (pr *partRun) readFirstHW(ctx context.Context) {
	if hw, err := pr.sourceHW(ctx); err == nil {
		pr.mu.Lock()
		pr.firstHW = hw
		pr.mu.Unlock()
	}
}

// sourceHW asks the source leader for the partition's high watermark.
func (pr *partRun) sourceHW(ctx context.Context) (int64, error) {
	tp := client.TopicPartition{Topic: pr.topic, Partition: pr.partition}
	addr, _, err := leaderAddr(ctx, pr.r.src, tp)
	if err != nil {
		return -1, err
	}
	a, err := pr.r.src.ListOffset(ctx, addr, tp, client.Latest)
	if err != nil {
		return -1, err
	}
	return a.Offset, nil
}

// refreshIdle reads the source high watermark of a partition no copy
// runs for (paused or failed), so its lag keeps growing.
func (pr *partRun) refreshIdle(ctx context.Context) {
	if pr.running() {
		return
	}
	if hw, err := pr.sourceHW(ctx); err == nil {
		pr.mu.Lock()
		pr.idleHW = hw
		pr.mu.Unlock()
	}
}

// halt ends the copy, if one runs, and waits for it.
func (pr *partRun) halt() {
	pr.mu.Lock()
	cancel, done := pr.cancel, pr.done
	pr.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

func (pr *partRun) progress(st mirror.PartitionStats) {
	now := pr.r.m.clock.Now()
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.firstHW >= 0 && st.End >= pr.firstHW {
		pr.caught = true
	}
	if pr.fetchErr == nil && pr.fetchedHW >= 0 && pr.fetchedHW <= st.End {
		pr.caughtUpAt = now
	}
	if d := now.Sub(pr.rateAt); d >= time.Second {
		pr.rate = int64(float64(st.Bytes-pr.rateBytes) / d.Seconds())
		pr.rateAt, pr.rateBytes = now, st.Bytes
	}
}

// ended handles the end of a copy by err (nil: it ended without one,
// which a following copy does only when told to).
func (pr *partRun) ended(err error) {
	r := pr.r
	if r.m.cluster != nil && (!r.m.leads(pr.topic, pr.partition) || errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.FencedLeaderEpoch)) {
		// The leadership moved: the new leader's copy continues from its
		// log end (cluster.go); not a failure.
		if err != nil {
			r.log.Info("mirror partition's copy ended here: this broker no longer leads it", "topic", pr.topic, "partition", pr.partition, "err", err)
		}
		return
	}
	if info, ok := r.m.host.LinkTopic(pr.topic); ok && (info.MirrorMode != "pull" || info.MirrorState != broker.MirrorStateMirroring) {
		if info.MirrorMode == "" {
			r.markStoppedAsync(pr.topic)
		}
		return // the topic was stopped: the copy's refusal is the stop's
	}
	if err == nil {
		return
	}
	r.fail(pr.topic, pr.partition, pr.classify(err))
}

// classify turns a copy's error into its FAILED reason.
func (pr *partRun) classify(err error) failure {
	f := failure{Reason: err.Error(), Divergence: -1}
	var ae *client.AuthError
	switch {
	case errors.Is(err, mirror.ErrDivergence):
		f.Reason = "divergence: " + err.Error()
		f.Divergence = pr.divergencePoint()
		pr.r.m.host.NoteMirrorDivergence(pr.topic)
	case errors.As(err, &ae) || errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) ||
		errors.Is(err, kerr.SaslAuthenticationFailed):
		f.Reason = "authorization: " + err.Error()
	case errors.Is(err, kerr.PolicyViolation):
		f.Reason = "policy refusal: " + err.Error()
	case errors.Is(err, kerr.ProducerFenced):
		f.Reason = "fenced: " + err.Error()
	case strings.Contains(err.Error(), "giving up after") || strings.Contains(err.Error(), "has not answered usefully"):
		f.Reason, f.Retry = "source unreachable: "+err.Error(), true
	default:
		f.Retry = true
	}
	return f
}

// divergencePoint is where the destination and the source part: their
// common point (Kafka's follower rule, every round of it: repair.go), the
// offset `mirror truncate --to-divergence` cuts at; -1 when the source
// cannot be asked.
func (pr *partRun) divergencePoint() int64 {
	ctx, cancel := context.WithTimeout(pr.r.ctx, 10*time.Second)
	defer cancel()
	cp, err := CommonPointOf(pr.r.m.host, pr.topic, pr.partition, sourceEpochs(ctx, pr.r.src, pr.topic, pr.partition))
	if err != nil {
		return -1
	}
	return cp.Offset
}

// status is the partition's MirrorPartitionStatus; info is its topic as
// the broker has it, tm its persisted part.
func (pr *partRun) status(info broker.LinkTopicInfo, tm *topicMeta, stopped bool) wireext.MirrorPartitionStatus {
	h := pr.r.m.host
	st := wireext.MirrorPartitionStatus{Topic: pr.topic, Partition: pr.partition, Link: pr.r.name,
		SourceHighWatermark: -1, LogEndOffset: -1, LastMirroredOffset: -1, LastMirroredEpoch: -1, DivergenceOffset: -1}
	if start, leo, err := h.MirrorLogRange(pr.topic, pr.partition); err == nil {
		st.LogEndOffset = leo
		if leo > start {
			st.LastMirroredOffset = leo - 1
			st.LastMirroredEpoch, _ = h.LastBatchEpoch(pr.topic, pr.partition)
		}
	}
	now := pr.r.m.clock.Now()
	pr.mu.Lock()
	running := pr.done != nil
	switch {
	case running && pr.fetchErr != nil:
		st.SourceHighWatermark = -1 // the source does not answer: unknown
	case running && pr.fetchedHW >= 0:
		st.SourceHighWatermark = pr.fetchedHW
	case running:
		st.SourceHighWatermark = pr.firstHW
	case pr.idleHW >= 0:
		st.SourceHighWatermark = pr.idleHW
	default:
		st.SourceHighWatermark = max(pr.fetchedHW, pr.firstHW)
	}
	if pr.copy != nil && running && pr.fetchErr == nil {
		// Caught up once at the high watermark read at the start (or,
		// when it could not be read, the first one fetched).
		end := pr.copy.Snapshot().End
		if hw := pr.firstHW; hw >= 0 && end >= hw || hw < 0 && pr.fetchedHW >= 0 && end >= pr.fetchedHW {
			pr.caught = true
		}
	}
	if st.SourceHighWatermark < 0 {
		st.LagMs = now.Sub(pr.caughtUpAt).Milliseconds()
	} else if st.LogEndOffset >= 0 {
		st.Lag = max(0, st.SourceHighWatermark-st.LogEndOffset)
		if st.Lag == 0 {
			pr.caughtUpAt = now
		} else {
			st.LagMs = now.Sub(pr.caughtUpAt).Milliseconds()
		}
	}
	if running && now.Sub(pr.rateAt) < rateStale {
		st.BytesPerSec = pr.rate
	}
	caught := pr.caught
	pr.mu.Unlock()
	f, failed := tm.Failed[pr.partition]
	switch {
	case info.MirrorState == broker.MirrorStateStopping:
		st.State = wireext.StateStopping
	case stopped || info.MirrorMode == "" || info.MirrorState == broker.MirrorStateStopped:
		st.State = wireext.StateStopped
		// link-repair: a stopped partition's last mirrored point is the
		// one its stop persisted (the failback's cross-check).
		if off, epoch, ok := h.MirrorStopPoint(pr.topic, pr.partition); ok {
			st.LastMirroredOffset, st.LastMirroredEpoch = off, epoch
		}
	case failed:
		st.State, st.Reason, st.DivergenceOffset = wireext.StateFailed, f.Reason, f.Divergence
	case tm.Paused:
		st.State = wireext.StatePaused
	case running && caught:
		st.State = wireext.StateMirroring
	default:
		st.State = wireext.StatePreparing
	}
	return st
}

// markStoppedAsync is markStopped from a copy's own goroutine (which
// markStopped would wait for).
func (r *runner) markStoppedAsync(topic string) {
	r.mu.Lock()
	r.stopped[topic] = true
	r.mu.Unlock()
	go r.markStopped(topic)
}

// kafkaErr is a LinkService error: code, with a message.
func kafkaErr(code *kerr.Error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", code, fmt.Sprintf(format, args...))
}

// trackedSource is a copy's Source that records, for the partition's
// status, the high watermark of each fetch answer and whether the source
// answers at all.
type trackedSource struct {
	mirror.Source
	pr *partRun
}

func (s trackedSource) Leader(ctx context.Context) (mirror.SourceConn, int32, error) {
	cn, epoch, err := s.Source.Leader(ctx)
	if err != nil {
		s.pr.noteFetch(-1, err)
		return nil, epoch, err
	}
	return trackedConn{cn, s.pr}, epoch, nil
}

type trackedConn struct {
	mirror.SourceConn
	pr *partRun
}

func (c trackedConn) Fetch(ctx context.Context, a client.FetchArgs) (client.FetchResult, error) {
	res, err := c.SourceConn.Fetch(ctx, a)
	switch {
	case err != nil:
		c.pr.noteFetch(-1, err)
	case res.Err != nil:
		c.pr.noteFetch(-1, res.Err)
	default:
		c.pr.noteFetch(res.HighWatermark, nil)
	}
	return res, err
}

// noteFetch records a fetch's outcome: its high watermark, or its
// failure.
func (pr *partRun) noteFetch(hw int64, err error) {
	if err != nil && errors.Is(err, context.Canceled) {
		return
	}
	pr.mu.Lock()
	pr.fetchErr = err
	if err == nil {
		pr.fetchedHW = hw
	}
	pr.mu.Unlock()
}
