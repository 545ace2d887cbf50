package mirror

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/client"
)

// produceWindow is how many mirror produces of one partition may be in
// flight on the destination connection. Verbatim reads a connection's
// requests in order, so each states the log end the previous one leaves;
// if one fails, the later ones fail too (their expected log end is not
// reached) and are sent again one by one.
const produceWindow = 4

// flight is one sent mirror produce.
type flight struct {
	c       chunk
	expect  int64
	w       ProduceWait
	sendErr error
}

// producer is the produce side of a partition copy: it writes chunks to
// the destination in order, each stating the log end it expects, and
// forwards the source's log start.
type producer struct {
	c *PartitionCopy
	// expect is the destination log end once every acknowledged chunk is
	// written, sendExpect once every sent one is; dstart the destination
	// log start.
	expect, sendExpect, dstart int64
	cn                         DestConn
	epoch                      int32
	warnedLogStart             bool
	q                          []flight
	// epochSent is the source's (log start, epoch) the destination has
	// (forwarded, or already answered); epochOff: the destination cannot
	// take start epochs.
	epochSent             startAt
	epochOff, warnedEpoch bool
	// connected: the producer had a destination connection already;
	// reread: it connected again since (or a forward failed), so the
	// destination's leader may have changed and its log start is read
	// again after the next acknowledged chunk (rereadStart).
	connected, reread bool
}

// startAt is a source's leader epoch at its log start.
type startAt struct {
	offset int64
	epoch  int32
}

func (c *PartitionCopy) newProducer(expect, dstart int64) *producer {
	return &producer{c: c, expect: expect, sendExpect: expect, dstart: dstart, epochSent: startAt{-1, -1}}
}

func (p *producer) full() bool { return len(p.q) >= produceWindow }

// consume writes the chunks of in until it is closed or a write fails.
func (p *producer) consume(ctx context.Context, in <-chan chunk) error {
	closed := false
	for {
		// Once cancelled, send nothing more: a write to a healthy
		// connection does not observe ctx, so chunks already fetched
		// would otherwise still reach the destination.
		if err := ctx.Err(); err != nil {
			return err
		}
		if !closed && !p.full() {
			var c chunk
			var ok, got bool
			if len(p.q) == 0 {
				c, ok = <-in
				got = true
			} else {
				select {
				case c, ok = <-in:
					got = true
				default:
				}
			}
			if got && !ok {
				closed = true
			} else if got {
				p.launch(ctx, c)
				continue
			}
		}
		if len(p.q) == 0 {
			if closed {
				return nil
			}
			continue
		}
		if err := p.completeHead(ctx); err != nil {
			return err
		}
	}
}

// drain completes every produce in flight.
func (p *producer) drain(ctx context.Context) error {
	for len(p.q) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := p.completeHead(ctx); err != nil {
			return err
		}
	}
	return nil
}

// launch sends c without waiting for its answer.
func (p *producer) launch(ctx context.Context, c chunk) {
	f := flight{c: c, expect: p.sendExpect}
	if c.first > p.sendExpect {
		p.c.log().Info("gap in the source", "partition", p.c.name(), "from", p.sendExpect, "to", c.first)
	}
	p.sendExpect = c.end
	if f.sendErr = p.connect(ctx); f.sendErr != nil {
		p.q = append(p.q, f)
		return
	}
	f.w, f.sendErr = p.cn.SendProduce(ctx, p.c.writer, c.set, f.expect, p.epoch, c.hw)
	p.q = append(p.q, f)
}

// connect makes sure the producer has a connection to the destination's
// leader. A connection after the first one may be to a new leader
// (NOT_LEADER_OR_FOLLOWER, a broken connection, a raised epoch dropped
// the old one): its log start is read again (reread).
func (p *producer) connect(ctx context.Context) error {
	if p.cn != nil && !p.cn.Broken() {
		return nil
	}
	if p.connected {
		p.reread = true
	}
	cn, epoch, err := p.c.cfg.Dest.Leader(ctx)
	if err != nil {
		p.cn = nil
		return err
	}
	p.cn, p.epoch, p.connected = cn, epoch, true
	return nil
}

// rereadStart reads the log start of the destination's (new) leader and
// the epoch it answers there, as a copy's resume does (a cluster link's
// copy starts again on the new leader and reads them): a leader that
// never took a forward the old one answered holds an older log start, or
// lacks the source's epoch there, and the forward after the chunk sends
// it again. A failed read is tried again after the next chunk.
func (p *producer) rereadStart(ctx context.Context, c chunk) {
	cn, _, err := p.c.cfg.Dest.Leader(ctx)
	var a client.OffsetAnswer
	if err == nil {
		a, err = cn.ListOffset(ctx, client.Earliest)
	}
	if err != nil {
		p.c.log().Debug("reading the destination log start after a leader change failed", "partition", p.c.name(), "err", err)
		return
	}
	p.reread = false
	p.dstart, p.epochSent = a.Offset, startAt{-1, -1}
	if a.Offset == c.logStart && a.LeaderEpoch == c.startEpoch {
		p.epochSent = startAt{a.Offset, a.LeaderEpoch}
	}
}

// completeHead waits for the oldest produce in flight. After a transient
// failure it sends that chunk and every later one again, one at a time.
func (p *producer) completeHead(ctx context.Context) error {
	f := p.q[0]
	// Cleared, not only sliced off: the queue's array would otherwise keep
	// the chunk's records (and so the whole fetch response they alias,
	// shared by many partitions in a link's session) reachable until the
	// queue grows past it, which a caught-up copy never does.
	p.q[0] = flight{}
	p.q = p.q[1:]
	err := f.sendErr
	if err == nil {
		err = p.c.produceErr(f.w.Wait(ctx), f.expect)
	}
	if err == nil {
		return p.done(ctx, f.c)
	}
	if !transient(err) && !isEpochErr(err) {
		return err
	}
	p.cn = nil
	rest := append([]flight{f}, p.q...)
	p.q = nil
	for _, g := range rest {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := p.produceSync(ctx, g.c, g.expect); err != nil {
			return err
		}
		if err := p.done(ctx, g.c); err != nil {
			return err
		}
	}
	return nil
}

// done accounts for an acknowledged chunk and forwards the source's log
// start when it moved into what the destination now holds.
func (p *producer) done(ctx context.Context, c chunk) error {
	p.expect = c.end
	p.c.end.Store(c.end)
	p.c.batches.Add(int64(c.batches))
	p.c.nbytes.Add(int64(len(c.set)))
	if p.reread {
		p.rereadStart(ctx, c)
	}
	if c.first == c.logStart && c.firstEpoch == c.startEpoch {
		// The batch at the source's log start carries the epoch: the
		// destination's cache starts there by itself.
		p.epochSent = startAt{c.logStart, c.startEpoch}
	}
	if err := p.forwardLogStart(ctx, c.logStart, c.startEpoch); err != nil {
		return err
	}
	if p.c.cfg.ChunkDone != nil {
		p.c.cfg.ChunkDone(p.c.Snapshot())
	}
	return nil
}

// forwardLogStart forwards the source's log start to the destination when
// it moved into what the destination holds, with the source's leader
// epoch there (epoch >= 0) unless the destination has it already: where
// the source's first batches are gone (compacted, deleted) the
// destination's epoch cache learns the epoch no stored batch carries, so
// ListOffsets EARLIEST answers as the source's. A refused forward is
// logged once and copying goes on (verify reports what differs); only a
// fenced writer ends the copy.
func (p *producer) forwardLogStart(ctx context.Context, start int64, epoch int32) error {
	move := start > p.dstart && start <= p.expect
	withEpoch := epoch >= 0 && !p.epochOff && !p.c.cfg.NoStartEpoch && start >= p.dstart && start < p.expect &&
		p.epochSent != (startAt{start, epoch})
	if withEpoch {
		err := p.forwardStartEpoch(ctx, start, epoch)
		switch {
		case err == nil:
			p.epochSent = startAt{start, epoch}
			if move {
				p.dstart = start
			}
			return nil
		case errors.Is(err, kerr.ProducerFenced):
			return p.c.fenced("")
		case errors.Is(err, ErrStartEpochUnsupported):
			p.epochOff = true
		case !transient(err):
			p.epochSent = startAt{start, epoch} // refused: not again
		default:
			p.reread = true // NOT_LEADER_OR_FOLLOWER: ask the next leader
		}
		if !p.warnedEpoch {
			p.c.log().Warn("could not forward the source's leader epoch at its log start to the destination", "partition", p.c.name(), "log_start", start, "epoch", epoch, "err", err)
			p.warnedEpoch = true
		}
	}
	if !move {
		return nil
	}
	if _, err := p.c.deleteRecords(ctx, p.c.writer, start); errors.Is(err, kerr.ProducerFenced) {
		return p.c.fenced("")
	} else if err != nil {
		if transient(err) {
			p.reread = true
		}
		if !p.warnedLogStart {
			p.c.log().Warn("could not forward the source log start to the destination", "partition", p.c.name(), "log_start", start, "err", err)
			p.warnedLogStart = true
		}
	} else {
		p.dstart = start
	}
	return nil
}

func (p *producer) forwardStartEpoch(ctx context.Context, start int64, epoch int32) error {
	cn, _, err := p.c.cfg.Dest.Leader(ctx)
	if err != nil {
		return err
	}
	return cn.ForwardStartEpoch(ctx, p.c.writer, start, epoch)
}

// produceSync sends one chunk and waits, retrying transient failures
// (an identical retry is acknowledged at its original offsets).
func (p *producer) produceSync(ctx context.Context, c chunk, expect int64) error {
	return p.c.retry(ctx, "mirror produce", func() error {
		if err := p.connect(ctx); err != nil {
			return err
		}
		w, err := p.cn.SendProduce(ctx, p.c.writer, c.set, expect, p.epoch, c.hw)
		if err == nil {
			err = p.c.produceErr(w.Wait(ctx), expect)
		}
		if isEpochErr(err) {
			p.cn = nil // the destination epoch moved (mirror epoch bump): refresh
			return fmt.Errorf("%w (refreshing destination metadata)", kerr.NotLeaderForPartition)
		}
		if err != nil && transient(err) {
			p.cn = nil
		}
		return err
	})
}

// produceErr maps a mirror produce's outcome to nil, a transient error, a
// stale-epoch error or a refusal.
func (c *PartitionCopy) produceErr(err error, expect int64) error {
	var pe *ProduceError
	if !errors.As(err, &pe) {
		return err
	}
	perr, msg := pe.Err, pe.Message
	switch {
	case perr == kerr.ProducerFenced:
		return c.fenced(msg)
	case perr == kerr.OffsetOutOfRange:
		return Refusal("%s: the destination refused the batches at %d: %s (another pusher is writing this partition, or the destination lost acknowledged data); restart the push to resume from the destination's log end", c.name(), expect, msg)
	case isEpochErr(perr):
		return perr
	case client.Retriable(perr):
		return fmt.Errorf("%w: %s", perr, msg)
	}
	return Refusal("%s: the destination refused the mirror produce at %d: %v: %s", c.name(), expect, perr, msg)
}
