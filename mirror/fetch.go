package mirror

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/kbatch"
)

// chunk is a run of whole source batches fetched together.
type chunk struct {
	set      []byte // contiguous batches
	first    int64  // base offset of the first batch
	end      int64  // last offset of the last batch + 1
	batches  int
	epoch    int32 // leader epoch of the last batch
	logStart int64 // the source's log start when fetched
	hw       int64 // the source's high watermark when fetched
	// firstEpoch is the leader epoch of the first batch; startEpoch the
	// one the source answers at logStart (-1: not known).
	firstEpoch, startEpoch int32
}

// fetcher is the fetch side of a partition copy: it reads the source from
// next on, whole batches only, sending LastFetchedEpoch so the source
// reports a divergence itself.
type fetcher struct {
	c         *PartitionCopy
	next      int64
	destEnd   int64 // where the destination's log will end once the chunks handed out are written
	lastEpoch int32
	maxBytes  int32
	wait      int32

	// cn is this partition's own connection to the source leader: Kafka
	// serves one request per connection at a time, so long polls of idle
	// partitions would otherwise delay busy ones.
	cn    SourceConn
	epoch int32

	backoff *client.Backoff // restarted by every useful answer

	// start is the source's log start last asked for with its epoch
	// (ListOffsets EARLIEST), asked again when a fetch answer reports
	// another log start.
	start client.OffsetAnswer
}

func (c *PartitionCopy) newFetcher(rp resumePoint) *fetcher {
	f := &fetcher{c: c, next: rp.leo, destEnd: rp.leo, lastEpoch: rp.lastEpoch, maxBytes: c.cfg.FetchBytes, wait: 100, cn: rp.src, epoch: rp.srcEpoch, start: rp.start}
	if c.cfg.Follow {
		f.wait = 500
	}
	f.backoff = client.NewBackoff(c.cfg.Clock, c.cfg.RetryFor)
	return f
}

func (f *fetcher) close() {
	if f.cn != nil {
		f.cn.Close()
		f.cn = nil
	}
}

// sleep backs off before the next attempt, or gives up once the source
// has not answered usefully for RetryFor.
func (f *fetcher) sleep(ctx context.Context) error {
	if f.backoff.Expired() {
		return Usage("%s: the source has not answered usefully for %v", f.c.name(), f.c.cfg.RetryFor)
	}
	return f.backoff.Wait(ctx)
}

// refresh reconnects to the current source leader.
func (f *fetcher) refresh(ctx context.Context) error {
	f.close()
	cn, e, err := f.c.cfg.Source.Leader(ctx)
	if err != nil {
		return err
	}
	f.cn, f.epoch = cn, e
	return nil
}

// feed hands chunks to out until the copy is complete or fails.
func (f *fetcher) feed(ctx context.Context, out chan<- chunk) error {
	for {
		c, ok, err := f.nextChunk(ctx)
		if err != nil || !ok {
			return err
		}
		select {
		case out <- c:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// nextChunk returns the next run of batches; ok is false once the target
// is reached (never while following).
func (f *fetcher) nextChunk(ctx context.Context) (c chunk, ok bool, err error) {
	for {
		if !f.c.cfg.Follow && f.next >= f.c.target.Load() {
			return chunk{}, false, nil
		}
		res, again, err := f.fetch(ctx)
		if err != nil {
			return chunk{}, false, err
		}
		if again {
			continue
		}
		f.backoff.Reset()
		if f.c.cfg.Follow {
			f.c.target.Store(res.HighWatermark) // for the lag in progress lines
		}
		c, st, err := f.cut(res)
		switch {
		case err != nil:
			return chunk{}, false, err
		case st == cutDone:
			return chunk{}, false, nil
		case st == cutChunk:
			c.startEpoch = f.startEpoch(ctx, c.logStart)
			return c, true, nil
		}
	}
}

// fetch sends one fetch at next. again reports an answer to discard (a
// failure that was backed off from, or a jump to the source's log start).
func (f *fetcher) fetch(ctx context.Context) (res client.FetchResult, again bool, err error) {
	if f.cn == nil || f.cn.Broken() {
		if err := f.refresh(ctx); err != nil {
			if !transient(err) {
				return res, false, err
			}
			return res, true, f.sleep(ctx)
		}
	}
	res, err = f.cn.Fetch(ctx, client.FetchArgs{Topic: f.c.cfg.Topic, Partition: f.c.cfg.Partition, Offset: f.next,
		MaxBytes: f.maxBytes, Isolation: client.ReadUncommitted, MaxWaitMs: f.wait, CurrentEpoch: f.epoch, LastFetchedEpoch: f.lastEpoch})
	if err == nil {
		err = res.Err
	}
	switch {
	case err == nil:
		return res, false, nil
	case errors.Is(err, kerr.OffsetOutOfRange):
		jump, err := f.outOfRange(ctx)
		if err != nil {
			if transient(err) {
				return res, true, f.sleep(ctx)
			}
			return res, false, err
		}
		if jump == f.next {
			return res, true, f.refusedInRange(ctx)
		}
		f.next = jump
		return res, true, nil
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return res, false, ctx.Err()
	case transient(err):
		f.c.log().Debug("source fetch failed, refreshing the leader", "partition", f.c.name(), "err", err)
		f.close()
		return res, true, f.sleep(ctx)
	}
	return res, false, Usage("%s: fetching from the source at %d: %v", f.c.name(), f.next, err)
}

// refusedInRange handles OFFSET_OUT_OF_RANGE for a position the source's
// ListOffsets says it holds. Either the log end moved between the two
// answers, or the source no longer knows the epoch of the last batch
// copied (Kafka refuses a LastFetchedEpoch it has dropped from its epoch
// cache the same way). Its OffsetForLeaderEpoch answer tells which: an
// epoch it does not know cannot be checked any more and the copy goes on
// without the check, as a resume does; one that ends before the position
// is a divergence; anything else is asked again after a backoff.
func (f *fetcher) refusedInRange(ctx context.Context) error {
	if f.lastEpoch >= 0 {
		ee, err := f.cn.OffsetForLeaderEpoch(ctx, f.lastEpoch)
		switch {
		case err != nil && !transient(err):
			return err
		case err != nil:
		case ee.LeaderEpoch < 0 || ee.EndOffset < 0:
			f.c.log().Info("the source no longer knows the epoch of the last copied batch; continuing without the divergence check", "partition", f.c.name(), "position", f.next, "epoch", f.lastEpoch)
			f.lastEpoch = -1
			return nil
		case ee.LeaderEpoch != f.lastEpoch || ee.EndOffset < f.next:
			return f.c.divergence(f.lastEpoch, f.next, ee)
		}
	}
	return f.sleep(ctx)
}

// Outcomes of cut.
const (
	cutAgain = iota // nothing to hand out yet: fetch again
	cutChunk        // a chunk to write
	cutDone         // the target is reached
)

// cut turns a fetch answer into the next chunk.
func (f *fetcher) cut(res client.FetchResult) (chunk, int, error) {
	name := f.c.name()
	if res.DivergingEpoch.LeaderEpoch >= 0 {
		return chunk{}, 0, f.c.divergence(f.lastEpoch, f.next, res.DivergingEpoch)
	}
	bs, set, partial, err := Split(res.Records, f.next)
	if err != nil {
		return chunk{}, 0, Refusal("%s: %w", name, err)
	}
	if len(bs) == 0 {
		if partial {
			// The first batch is larger than the fetch size and the
			// source cut it: ask for more.
			if f.maxBytes >= 1<<30 {
				return chunk{}, 0, Refusal("%s: the batch at offset %d is larger than 1 GiB", name, f.next)
			}
			f.maxBytes *= 2
			f.c.log().Info("growing fetch size for a large batch", "partition", name, "offset", f.next, "bytes", f.maxBytes)
			return chunk{}, cutAgain, nil
		}
		if !f.c.cfg.Follow && res.HighWatermark <= f.next {
			// The source's high watermark fell below the target read at
			// start (truncation): the divergence check on the next fetch
			// or resume reports it.
			if target := f.c.target.Load(); res.HighWatermark < target {
				return chunk{}, 0, &Error{Code: ExitRefused, Err: fmt.Errorf("%w: %s: the source high watermark went down from %d to %d while copying", ErrDivergence, name, target, res.HighWatermark)}
			}
			return chunk{}, cutDone, nil
		}
		return chunk{}, cutAgain, nil
	}
	// A first batch starting below the fetch position is expected right
	// after the source's log start moved into the middle of it (Kafka
	// serves the whole batch); below what the destination already holds,
	// batch boundaries disagree.
	if b := kbatch.BaseOffset(bs[0]); b < f.destEnd {
		return chunk{}, 0, &Error{Code: ExitRefused, Err: fmt.Errorf("%w: %s: the source batch %d-%d straddles the destination log end %d: source and destination batch boundaries differ, so the source log changed under the copy", ErrDivergence, name, b, LastOffset(bs[0]), f.destEnd)}
	}
	last := bs[len(bs)-1]
	c := chunk{set: set, first: kbatch.BaseOffset(bs[0]), end: LastOffset(last) + 1, batches: len(bs),
		epoch: kbatch.LeaderEpoch(last), logStart: res.LogStart, hw: res.HighWatermark, firstEpoch: kbatch.LeaderEpoch(bs[0]), startEpoch: -1}
	for _, b := range bs {
		e := kbatch.LeaderEpoch(b)
		if e < f.lastEpoch {
			return chunk{}, 0, Refusal("%s: source batch at offset %d has leader epoch %d, below the previous batch's %d", name, kbatch.BaseOffset(b), e, f.lastEpoch)
		}
		f.lastEpoch = e
	}
	f.next, f.destEnd = c.end, c.end
	f.maxBytes = f.c.cfg.FetchBytes
	return c, cutChunk, nil
}

// outOfRange handles OFFSET_OUT_OF_RANGE for a fetch at next: when the
// source's log start moved past next (retention, DeleteRecords), the copy
// continues from the new log start, which the produce side forwards to the
// destination. When next is beyond the source's log end, the source lost
// data the destination holds: divergence.
func (f *fetcher) outOfRange(ctx context.Context) (int64, error) {
	start, err := f.cn.ListOffset(ctx, client.Earliest)
	if err != nil {
		return 0, err
	}
	end, err := f.cn.ListOffset(ctx, client.Latest)
	if err != nil {
		return 0, err
	}
	switch {
	case f.next < start.Offset:
		f.c.log().Info("source log start moved past the copy position; continuing from it", "partition", f.c.name(), "position", f.next, "source_log_start", start.Offset)
		return start.Offset, nil
	case f.next > end.Offset:
		return 0, &Error{Code: ExitRefused, Err: fmt.Errorf("%w: %s: the destination holds offsets up to %d but the source's log ends at %d: the source truncated its log; refusing to continue", ErrDivergence, f.c.name(), f.next, end.Offset)}
	}
	return f.next, nil
}

// startEpoch is the leader epoch the source answers at its log start
// start, asked (ListOffsets EARLIEST) only when start is not the one
// asked last; -1 when the answer is for another log start (it moved in
// between: the next chunk asks again) or failed (the forward then goes
// without the epoch).
func (f *fetcher) startEpoch(ctx context.Context, start int64) int32 {
	if f.c.cfg.NoStartEpoch {
		return -1
	}
	if start != f.start.Offset {
		a, err := f.cn.ListOffset(ctx, client.Earliest)
		if err != nil {
			f.c.log().Debug("reading the source's epoch at its log start failed", "partition", f.c.name(), "err", err)
			return -1
		}
		f.start = a
	}
	if start != f.start.Offset {
		return -1
	}
	return f.start.LeaderEpoch
}
