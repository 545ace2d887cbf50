package mirror

// A simulated source partition (a Kafka leader: epochs, leader epoch
// cache, retention, unclean truncation, DivergingEpoch) and destination
// partition (Verbatim's mirror produce rules: writer fencing, leader epoch
// checks, expected log end, identical retries, epoch bumps), both driven
// by one seeded random source, for the partition copy's simulation test.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/kbatch"
)

type simBatch struct {
	base, last int64
	epoch      int32
	raw        []byte
}

type epochStart struct {
	epoch int32
	start int64
}

// errSimConn is a connection failure (transient, like any I/O error).
var errSimConn = errors.New("simulated connection failure")

// simWorld is the source and the destination partition and what happens
// to them between the copy's calls.
type simWorld struct {
	// hwViolation is the first mirror produce whose reported source
	// high watermark did not cover its batches ("" none).
	hwViolation string
	// mu serialises the calls of a copy that runs its fetch and produce
	// sides concurrently.
	mu    sync.Mutex
	rng   *rand.Rand
	clock *testkit.SleepClock

	// Source: log is what the leader holds (retention removes from its
	// front), lineage every batch ever appended and not truncated away
	// (the reference for the destination), prevLineage the lineage before
	// the unclean truncation.
	log         []simBatch
	lineage     []simBatch
	prevLineage []simBatch
	logStart    int64
	next        int64
	epoch       int32
	cache       []epochStart
	srcGen      int

	// Destination.
	dlog      []simBatch
	dlogStart int64
	dnext     int64
	depoch    int32
	writer    Writer // the registered writer (epoch -1: none yet)
	// dstartEpoch is the source epoch forwarded last with its log start.
	dstartEpoch startAt
	dstGen      int

	// budgets of events still to happen, and what happened.
	appends, leaderChanges, retentions, truncations, rivals int
	faultPct                                                int
	seen                                                    map[string]int

	// calls bounds the simulation: past maxCalls every call fails with
	// the cancelled context, so a copy that loops without end fails the
	// test instead of hanging it.
	calls   int
	cancel  context.CancelFunc
	trace   []string
	tracing bool
	// stopFollow, set for a following copy, ends it (as SIGINT would)
	// once it caught up and nothing more will happen.
	stopFollow context.CancelFunc
}

const maxCalls = 200_000

// caughtUp reports that the destination holds the last batch the source
// holds (with checkPrefix: every one it holds). A source whose retention
// deleted everything not yet copied leaves nothing to copy.
func (w *simWorld) caughtUp() bool { return len(w.log) == 0 || w.dnext > w.log[len(w.log)-1].last }

// quiet reports that no more appends, rivals or truncations will come.
func (w *simWorld) quiet() bool { return w.appends == 0 && w.rivals == 0 && w.truncations == 0 }

func (w *simWorld) chance(pct int) bool { return w.rng.Intn(100) < pct }

// step lets the world move on between two calls of the copy.
func (w *simWorld) step() {
	if w.calls++; w.calls > maxCalls {
		w.cancel()
	}
	if w.stopFollow != nil && w.quiet() && w.caughtUp() {
		w.stopFollow()
	}
	switch {
	case w.appends > 0 && w.chance(25):
		w.appends--
		w.appendBatches(1 + w.rng.Intn(3))
	case w.leaderChanges > 0 && w.chance(3):
		w.leaderChanges--
		w.newLeader()
	case w.retentions > 0 && w.chance(2):
		w.retentions--
		w.retain()
	case w.truncations > 0 && w.chance(2) && w.next > w.logStart+1:
		w.truncations--
		w.truncate()
	case w.rivals > 0 && w.chance(1):
		w.rivals--
		w.writer = Writer{Epoch: w.writer.Epoch + 1, ID: [16]byte{0: 0xff}} // another pusher registers; it never writes
		w.seen["rival"]++
	}
}

func (w *simWorld) appendBatches(n int) {
	for i := 0; i < n; i++ {
		if w.chance(10) {
			w.next += int64(1 + w.rng.Intn(3)) // a gap (compaction-like)
		}
		var recs []kbatch.Record
		for j := 0; j < 1+w.rng.Intn(4); j++ {
			v := make([]byte, 10+w.rng.Intn(80))
			w.rng.Read(v)
			recs = append(recs, kbatch.Record{OffsetDelta: int32(j), Value: v})
		}
		b := kbatch.NewBatch(1_700_000_000_000+w.next, recs...)
		b.BaseOffset, b.LeaderEpoch = w.next, w.epoch
		raw, err := kbatch.Encode(b)
		if err != nil {
			panic(err)
		}
		sb := simBatch{base: w.next, last: w.next + int64(len(recs)-1), epoch: w.epoch, raw: raw}
		w.log = append(w.log, sb)
		w.lineage = append(w.lineage, sb)
		w.next = sb.last + 1
	}
}

func (w *simWorld) newLeader() {
	w.epoch++
	w.cache = append(w.cache, epochStart{w.epoch, w.next})
	w.srcGen++
	w.seen["leader_change"]++
}

// retain moves the source's log start to a batch boundary.
func (w *simWorld) retain() {
	if len(w.log) == 0 {
		return
	}
	k := 1 + w.rng.Intn(len(w.log))
	if k == len(w.log) {
		w.logStart = w.next
	} else {
		w.logStart = w.log[k].base
	}
	w.log = w.log[k:]
	for len(w.cache) > 1 && w.cache[1].start <= w.logStart {
		w.cache = w.cache[1:]
	}
	if len(w.cache) > 0 && w.cache[0].start < w.logStart {
		w.cache[0].start = w.logStart
	}
	w.seen["retention"]++
}

// truncate is an unclean leader election: the new leader lacks the tail
// of the log, and a new epoch starts where it ends.
func (w *simWorld) truncate() {
	k := w.rng.Intn(len(w.log))
	cut := w.log[k].base
	if cut <= w.logStart {
		return
	}
	w.prevLineage = append([]simBatch(nil), w.lineage...)
	// From here the copy's divergence check rests on the source's leader
	// epoch cache; a source whose retention has since dropped the epoch
	// cannot be checked (docs/mirroring.md), so no retention follows.
	w.retentions = 0
	w.log = w.log[:k]
	for len(w.lineage) > 0 && w.lineage[len(w.lineage)-1].base >= cut {
		w.lineage = w.lineage[:len(w.lineage)-1]
	}
	for len(w.cache) > 0 && w.cache[len(w.cache)-1].start >= cut {
		w.cache = w.cache[:len(w.cache)-1]
	}
	w.next = cut
	w.newLeader()
	w.appendBatches(1 + w.rng.Intn(3))
	w.seen["truncation"]++
}

// endForEpoch answers OffsetForLeaderEpoch from the leader epoch cache.
func (w *simWorld) endForEpoch(e int32) client.EpochEnd {
	cache := make([]testkit.EpochStart, len(w.cache))
	for i, c := range w.cache {
		cache[i] = testkit.EpochStart{Epoch: c.epoch, Start: c.start}
	}
	return testkit.EndForEpoch(cache, w.next, e)
}

// records serves batches ending at or after offset within maxBytes; a
// first batch that does not fit is cut (or, like Kafka, sent whole), and
// the bytes left may end with a cut batch.
func (w *simWorld) records(log []simBatch, offset int64, maxBytes int32) []byte {
	var out []byte
	for _, b := range log {
		if b.last < offset {
			continue
		}
		if len(out)+len(b.raw) > int(maxBytes) {
			room := int(maxBytes) - len(out)
			if len(out) == 0 && w.chance(50) {
				return append(out, b.raw...)
			}
			if room > 0 && (len(out) == 0 || w.chance(50)) {
				out = append(out, b.raw[:min(room, len(b.raw)-1)]...)
			}
			return out
		}
		out = append(out, b.raw...)
	}
	return out
}

// The source's Source and SourceConn.
type simSource struct{ w *simWorld }

type simSrcConn struct {
	w      *simWorld
	gen    int
	closed bool
}

// enter lets the world move on before a call, then fails the call when
// the context ended or a fault is drawn.
func (w *simWorld) enter(ctx context.Context) error {
	w.step()
	if w.tracing || w.calls > maxCalls-20 {
		w.trace = append(w.trace, fmt.Sprintf("call %d src next %d log start %d epoch %d dst next %d start %d epoch %d", w.calls, w.next, w.logStart, w.epoch, w.dnext, w.dlogStart, w.depoch))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if w.chance(w.faultPct) {
		return errSimConn
	}
	return nil
}

func (s simSource) Leader(ctx context.Context) (SourceConn, int32, error) {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	if err := s.w.enter(ctx); err != nil {
		return nil, -1, err
	}
	return &simSrcConn{w: s.w, gen: s.w.srcGen}, s.w.epoch, nil
}

func (c *simSrcConn) broken() bool { return c.closed || c.gen != c.w.srcGen }

func (c *simSrcConn) Broken() bool {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	return c.broken()
}

func (c *simSrcConn) Close() {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	c.closed = true
}

func (c *simSrcConn) call(ctx context.Context) error {
	err := c.w.enter(ctx)
	if err == nil && c.broken() {
		err = errSimConn
	}
	if err != nil {
		c.closed = true
	}
	return err
}

func (c *simSrcConn) Fetch(ctx context.Context, a client.FetchArgs) (client.FetchResult, error) {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	if err := c.call(ctx); err != nil {
		return client.FetchResult{}, err
	}
	w := c.w
	res := client.FetchResult{HighWatermark: w.next, LastStable: w.next, LogStart: w.logStart, DivergingEpoch: client.EpochEnd{LeaderEpoch: -1, EndOffset: -1}}
	switch {
	case a.CurrentEpoch >= 0 && a.CurrentEpoch < w.epoch:
		res.Err = kerr.FencedLeaderEpoch
	case a.CurrentEpoch > w.epoch:
		res.Err = kerr.UnknownLeaderEpoch
	case a.Offset < w.logStart || a.Offset > w.next:
		res.Err = kerr.OffsetOutOfRange
		if a.Offset < w.logStart {
			w.seen["fetch_below_log_start"]++
		}
	}
	if res.Err != nil {
		return res, nil
	}
	if a.LastFetchedEpoch >= 0 {
		// Kafka's leader: an epoch it no longer knows is
		// OFFSET_OUT_OF_RANGE; one that ended earlier, a diverging epoch.
		ee := w.endForEpoch(a.LastFetchedEpoch)
		if ee.LeaderEpoch < 0 {
			res.Err = kerr.OffsetOutOfRange
			w.seen["fetch_epoch_unknown"]++
			return res, nil
		}
		if ee.LeaderEpoch < a.LastFetchedEpoch || ee.EndOffset < a.Offset {
			res.DivergingEpoch = ee
			w.seen["diverging_epoch"]++
			return res, nil
		}
	}
	res.Records = w.records(w.log, a.Offset, a.MaxBytes)
	if w.tracing || w.calls > maxCalls-20 {
		w.trace = append(w.trace, fmt.Sprintf("fetch at %d max %d last epoch %d cur %d: %d bytes", a.Offset, a.MaxBytes, a.LastFetchedEpoch, a.CurrentEpoch, len(res.Records)))
	}
	return res, nil
}

func (c *simSrcConn) ListOffset(ctx context.Context, ts int64) (client.OffsetAnswer, error) {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	a, err := listOffset(c.call(ctx), ts, c.w.logStart, c.w.next, c.w.epoch)
	if err == nil && ts == client.Earliest {
		// Kafka answers the epoch of the cache entry covering the log
		// start.
		for _, e := range c.w.cache {
			if e.start <= c.w.logStart {
				a.LeaderEpoch = e.epoch
			}
		}
	}
	return a, err
}

// listOffset answers ListOffsets for the earliest or latest offset of a
// log, unless the call failed.
func listOffset(err error, ts, logStart, logEnd int64, epoch int32) (client.OffsetAnswer, error) {
	switch {
	case err != nil:
		return client.OffsetAnswer{}, err
	case ts == client.Earliest:
		return client.OffsetAnswer{Offset: logStart, LeaderEpoch: -1}, nil
	}
	return client.OffsetAnswer{Offset: logEnd, LeaderEpoch: epoch}, nil
}

func (c *simSrcConn) OffsetForLeaderEpoch(ctx context.Context, e int32) (client.EpochEnd, error) {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	if err := c.call(ctx); err != nil {
		return client.EpochEnd{}, err
	}
	return c.w.endForEpoch(e), nil
}

// The destination's Dest and DestConn.
type simDest struct {
	w *simWorld
}

type simDstConn struct {
	w    *simWorld
	gen  int
	lost bool
}

func (d simDest) Leader(ctx context.Context) (DestConn, int32, error) {
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	if err := d.w.enter(ctx); err != nil {
		return nil, -1, err
	}
	return &simDstConn{w: d.w, gen: d.w.dstGen}, d.w.depoch, nil
}

func (c *simDstConn) broken() bool { return c.lost || c.gen != c.w.dstGen }

func (c *simDstConn) Broken() bool {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	return c.broken()
}

func (c *simDstConn) call(ctx context.Context) error {
	err := c.w.enter(ctx)
	if err == nil && c.broken() {
		err = errSimConn
	}
	if err != nil {
		c.lost = true
	}
	return err
}

// admitWriter applies Verbatim's writer rule: only the registered writer
// writes; an older epoch, or its epoch with another id, is fenced, an
// epoch never assigned refused.
func (w *simWorld) admitWriter(wr Writer) error {
	switch {
	case wr == w.writer && wr.Epoch >= 0:
		return nil
	case wr.Epoch < 0 || wr.Epoch > w.writer.Epoch:
		return kerr.InvalidProducerEpoch
	}
	return kerr.ProducerFenced
}

func (c *simDstConn) ListOffset(ctx context.Context, ts int64) (client.OffsetAnswer, error) {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	a, err := listOffset(c.call(ctx), ts, c.w.dlogStart, c.w.dnext, c.w.depoch)
	if err == nil && ts == client.Earliest && c.w.dstartEpoch.offset == c.w.dlogStart {
		a.LeaderEpoch = c.w.dstartEpoch.epoch
	}
	return a, err
}

// ForwardStartEpoch is a log-start forward that also records the
// source's epoch at the log start (the destination's EARLIEST answers it
// from then on).
func (c *simDstConn) ForwardStartEpoch(ctx context.Context, wr Writer, offset int64, epoch int32) error {
	c.w.mu.Lock()
	if err := c.call(ctx); err != nil {
		c.w.mu.Unlock()
		return err
	}
	if err := c.w.admitWriter(wr); err != nil {
		c.w.mu.Unlock()
		return err
	}
	if offset < c.w.dlogStart || offset >= c.w.dnext {
		c.w.mu.Unlock()
		return kerr.PolicyViolation
	}
	c.w.dstartEpoch = startAt{offset, epoch}
	c.w.seen["start_epoch_forwarded"]++
	c.w.mu.Unlock()
	_, err := c.DeleteRecords(ctx, wr, offset)
	return err
}

func (c *simDstConn) Fetch(ctx context.Context, a client.FetchArgs) (client.FetchResult, error) {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	if err := c.call(ctx); err != nil {
		return client.FetchResult{}, err
	}
	var out []byte
	for _, b := range c.w.dlog {
		if b.last >= a.Offset && (len(out) == 0 || len(out)+len(b.raw) <= int(a.MaxBytes)) {
			out = append(out, b.raw...)
		}
	}
	return client.FetchResult{HighWatermark: c.w.dnext, LogStart: c.w.dlogStart, Records: out, DivergingEpoch: client.EpochEnd{LeaderEpoch: -1}}, nil
}

func (c *simDstConn) DeleteRecords(ctx context.Context, wr Writer, offset int64) (int32, error) {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	if err := c.call(ctx); err != nil {
		return -1, err
	}
	w := c.w
	assigned := int32(-1)
	if wr.Epoch == RegisterEpoch {
		w.writer = Writer{Epoch: w.writer.Epoch + 1, ID: wr.ID}
		wr, assigned = w.writer, w.writer.Epoch
	}
	if err := w.admitWriter(wr); err != nil {
		return -1, err
	}
	if offset > w.dlogStart {
		if offset > w.dnext {
			return -1, kerr.OffsetOutOfRange
		}
		w.dlogStart = offset
		for len(w.dlog) > 0 && w.dlog[0].last < offset {
			w.dlog = w.dlog[1:]
		}
		w.seen["log_start_forwarded"]++
	}
	return assigned, nil
}

type simWait struct {
	err  error
	lost bool
}

func (s simWait) Wait(context.Context) error {
	if s.lost {
		return errSimConn
	}
	return s.err
}

func (c *simDstConn) SendProduce(ctx context.Context, wr Writer, set []byte, expect int64, epoch int32, sourceHW int64) (ProduceWait, error) {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	if err := c.call(ctx); err != nil {
		return nil, err
	}
	// The source high watermark a chunk was fetched under covers it.
	if bs, _, _, err := Split(set, 0); err == nil && len(bs) > 0 && c.w.hwViolation == "" {
		if end := LastOffset(bs[len(bs)-1]) + 1; sourceHW < end {
			c.w.hwViolation = fmt.Sprintf("a mirror produce of offsets up to %d reported source high watermark %d", end-1, sourceHW)
		}
	}
	res := simWait{err: c.w.mirrorAppend(wr, set, expect, epoch)}
	if c.w.chance(c.w.faultPct) {
		// Applied, but the answer is lost with the connection.
		c.lost, res.lost = true, true
		c.w.seen["lost_answer"]++
	}
	return res, nil
}

// mirrorAppend applies Verbatim's mirror produce rules.
func (w *simWorld) mirrorAppend(writer Writer, set []byte, expect int64, epoch int32) error {
	if err := w.admitWriter(writer); err != nil {
		return &ProduceError{Err: err, Message: "not the registered writer"}
	}
	switch {
	case epoch >= 0 && epoch < w.depoch:
		w.seen["dest_epoch_stale"]++
		return &ProduceError{Err: kerr.FencedLeaderEpoch, Message: "stale epoch"}
	case epoch > w.depoch:
		return &ProduceError{Err: kerr.UnknownLeaderEpoch, Message: "future epoch"}
	}
	var bs []simBatch
	for rest := set; len(rest) > 0; {
		b, r, err := kbatch.Next(rest)
		if err != nil {
			return &ProduceError{Err: kerr.CorruptMessage, Message: "cut batch"}
		}
		bs = append(bs, simBatch{base: kbatch.BaseOffset(b), last: kbatch.BaseOffset(b) + int64(kbatch.LastOffsetDelta(b)), epoch: kbatch.LeaderEpoch(b), raw: b})
		rest = r
	}
	if expect != w.dnext {
		if w.identicalRetry(bs) {
			w.seen["identical_retry"]++
			return nil
		}
		return &ProduceError{Err: kerr.OffsetOutOfRange, Message: "mirror: expected log end differs"}
	}
	maxEpoch := int32(-1)
	for _, b := range bs {
		if b.base < w.dnext {
			return &ProduceError{Err: kerr.InvalidRecord, Message: "below the log end"}
		}
		w.dlog = append(w.dlog, simBatch{base: b.base, last: b.last, epoch: b.epoch, raw: append([]byte(nil), b.raw...)})
		w.dnext = b.last + 1
		maxEpoch = max(maxEpoch, b.epoch)
	}
	if maxEpoch > w.depoch-3 {
		w.depoch = max(w.depoch, maxEpoch) + 10
	}
	return nil
}

func (w *simWorld) identicalRetry(bs []simBatch) bool {
	for _, b := range bs {
		if b.last >= w.dnext {
			return false
		}
		found := false
		for _, d := range w.dlog {
			if d.base == b.base {
				found = bytes.Equal(d.raw, b.raw)
				break
			}
		}
		if !found {
			return false
		}
	}
	return len(bs) > 0
}
