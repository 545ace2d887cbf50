package mirror

// The per-partition copy: a state machine that resumes from the
// destination's log end, fetches whole batches from the source and writes
// them to the destination at their offsets. It takes all its I/O (Source,
// Dest) and its time (Clock) as inputs, so the same code runs against real
// clusters (endpoints.go) and against the seeded simulation of its tests.
// It knows nothing of flags, topics lists or output: the pusher (push.go)
// and any other driver build one PartitionCopy per partition.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// Clock is the time source of a partition copy: every deadline and every
// wait goes through it.
type Clock = client.Clock

// SystemClock is the wall clock.
type SystemClock = client.SystemClock

// Source finds the source partition's leader.
type Source interface {
	// Leader connects to the partition's current leader (from fresh
	// metadata) and returns the connection, which the caller closes, and
	// the leader epoch metadata reports.
	Leader(ctx context.Context) (SourceConn, int32, error)
}

// SourceConn is a connection to the source partition's leader.
type SourceConn interface {
	Fetch(ctx context.Context, a client.FetchArgs) (client.FetchResult, error)
	ListOffset(ctx context.Context, ts int64) (client.OffsetAnswer, error)
	OffsetForLeaderEpoch(ctx context.Context, epoch int32) (client.EpochEnd, error)
	Broken() bool
	Close()
}

// Dest finds the destination partition's leader.
type Dest interface {
	// Leader returns a connection to the partition's leader (the caller
	// does not close it) and the leader epoch metadata reports.
	Leader(ctx context.Context) (DestConn, int32, error)
}

// DestConn is a connection to the destination partition's leader.
type DestConn interface {
	ListOffset(ctx context.Context, ts int64) (client.OffsetAnswer, error)
	Fetch(ctx context.Context, a client.FetchArgs) (client.FetchResult, error)
	// SendProduce writes a mirror produce of set as writer w stating the
	// log end it expects and the leader epoch, and the source's high
	// watermark when set was fetched (for the destination's lag; 0
	// unknown), without waiting: the
	// answers of produces sent on one connection come in the order sent.
	// A partition error of the answer is a *ProduceError.
	SendProduce(ctx context.Context, w Writer, set []byte, expect int64, epoch int32, sourceHW int64) (ProduceWait, error)
	// DeleteRecords sends a mirror DeleteRecords to offset as writer w
	// (offset 0 deletes nothing). With w.Epoch RegisterEpoch it is a
	// registration and returns the writer epoch the destination
	// assigned.
	DeleteRecords(ctx context.Context, w Writer, offset int64) (int32, error)
	// ForwardStartEpoch is DeleteRecords to offset (a log-start forward,
	// never a registration) that also carries the source's leader epoch
	// at offset, epoch >= 0 (wireext.MirrorStartEpoch). A destination
	// that cannot take it is ErrStartEpochUnsupported, with nothing sent.
	ForwardStartEpoch(ctx context.Context, w Writer, offset int64, epoch int32) error
	Broken() bool
}

// ProduceWait is a sent mirror produce.
type ProduceWait interface {
	Wait(ctx context.Context) error
}

// ProduceError is the partition error of a mirror produce answer.
type ProduceError struct {
	Err     error
	Message string
}

func (e *ProduceError) Error() string { return e.Err.Error() + ": " + e.Message }
func (e *ProduceError) Unwrap() error { return e.Err }

// Writer identifies a pusher to the destination (docs/protocol.md "Writer
// epoch"): the writer epoch the destination assigned it (RegisterEpoch
// until it registered) and its own id, which the destination binds the
// epoch to.
type Writer struct {
	Epoch int32
	ID    [16]byte
}

// RegisterEpoch is the epoch of a writer that has not registered yet: a
// mirror DeleteRecords with it is a registration.
const RegisterEpoch = wireext.RegisterWriterEpoch

// CopyConfig configures one partition's copy.
type CopyConfig struct {
	Topic     string
	Partition int32
	Source    Source
	Dest      Dest
	Clock     Clock
	Log       *slog.Logger
	// FetchBytes is the fetch size; RetryFor bounds retries of transient
	// failures; Follow keeps copying after reaching the source's high
	// watermark read at the start.
	FetchBytes int32
	RetryFor   time.Duration
	Follow     bool
	// Writer is the pusher's identity; its Epoch is the one the
	// destination assigned it on this partition (a pusher registers all
	// its partitions at once), or RegisterEpoch: the copy then registers
	// first thing. Either way the copy's claim checks it is still the
	// partition's writer before reading anything.
	Writer Writer
	// ChunkDone, when set, is called after each chunk is acknowledged
	// (before anything more is sent); Claimed once the writer
	// registration was answered.
	ChunkDone func(PartitionStats)
	Claimed   func(err error)
	// NoStartEpoch leaves the source's leader epoch at its log start out
	// of the log-start forwards (what a pusher before feature version 3
	// sent): for tests that need such a destination.
	NoStartEpoch bool
}

// PartitionCopy copies one partition. Its counters may be read (Snapshot)
// while it runs.
type PartitionCopy struct {
	cfg CopyConfig
	// writer is cfg.Writer with the epoch its claim settled (written by
	// the claim, before anything that reads it starts).
	writer Writer

	start, target   atomic.Int64
	end             atomic.Int64
	batches, nbytes atomic.Int64
}

// NewPartitionCopy prepares a copy; it does no I/O.
func NewPartitionCopy(cfg CopyConfig) *PartitionCopy {
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.FetchBytes <= 0 {
		cfg.FetchBytes = 4 << 20
	}
	if cfg.RetryFor <= 0 {
		cfg.RetryFor = 2 * time.Minute
	}
	return &PartitionCopy{cfg: cfg, writer: cfg.Writer}
}

// Snapshot returns the copy's progress.
func (c *PartitionCopy) Snapshot() PartitionStats {
	return PartitionStats{Topic: c.cfg.Topic, Partition: c.cfg.Partition, Start: c.start.Load(), End: c.end.Load(),
		Batches: c.batches.Load(), Bytes: c.nbytes.Load(), Target: c.target.Load()}
}

func (c *PartitionCopy) name() string { return fmt.Sprintf("%s/%d", c.cfg.Topic, c.cfg.Partition) }

// discardLogger is the logger of a copy configured without one.
var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

func (c *PartitionCopy) log() *slog.Logger {
	if c.cfg.Log == nil {
		return discardLogger
	}
	return c.cfg.Log
}

// retry runs fn until it succeeds, fails with a non-transient error, or
// transient failures have lasted RetryFor.
func (c *PartitionCopy) retry(ctx context.Context, what string, fn func() error) error {
	err := client.Retry(ctx, c.cfg.Clock, c.cfg.RetryFor, fn, func(err error) {
		c.log().Debug("retrying", "partition", c.name(), "what", what, "err", err)
	})
	var gu *client.GiveUpError
	if errors.As(err, &gu) {
		return Usage("%s %s: giving up after %v: %v", c.name(), what, gu.Budget, gu.Err)
	}
	return err
}

// resumePoint is where a copy starts: the destination's log end and log
// start, the epoch of its last batch (-1: empty) and a connection to the
// source leader.
type resumePoint struct {
	leo, logStart int64
	lastEpoch     int32
	src           SourceConn
	srcEpoch      int32 // the source leader epoch metadata reported for src
	// start is the source's log start and the epoch its ListOffsets
	// EARLIEST answers there; startEpoch the epoch the destination
	// answers at its log start.
	start      client.OffsetAnswer
	startEpoch int32
}

// Run copies the partition: until the source's high watermark read at the
// start, or with Follow until ctx ends. Fetching runs ahead of producing.
func (c *PartitionCopy) Run(ctx context.Context) error { return c.run(ctx, true) }

// run is Run; concurrent false drives the fetch and produce sides from
// one goroutine, one chunk at a time (the simulation's deterministic
// schedule).
func (c *PartitionCopy) run(ctx context.Context, concurrent bool) error {
	rp, err := c.resume(ctx)
	if rp.src != nil && err != nil {
		rp.src.Close()
	}
	if err != nil {
		return err
	}
	c.log().Info("partition start", "partition", c.name(), "dest_log_end", rp.leo, "dest_log_start", rp.logStart, "last_epoch", rp.lastEpoch, "target", c.target.Load(), "follow", c.cfg.Follow)
	f := c.newFetcher(rp)
	defer f.close()
	pr := c.newProducer(rp.leo, rp.logStart)
	if rp.start.Offset == rp.logStart && rp.start.LeaderEpoch == rp.startEpoch {
		pr.epochSent = startAt{rp.start.Offset, rp.start.LeaderEpoch}
	}
	if err := pr.forwardLogStart(ctx, rp.start.Offset, rp.start.LeaderEpoch); err != nil {
		return err
	}
	if !c.cfg.Follow && rp.leo >= c.target.Load() {
		return nil
	}
	if concurrent {
		err = c.pipeline(ctx, f, pr)
	} else {
		err = c.lockstep(ctx, f, pr)
	}
	if err != nil {
		return err
	}
	c.log().Info("partition done", "partition", c.name(), "log_end", c.end.Load(), "batches", c.batches.Load(), "bytes", c.nbytes.Load())
	return nil
}

// pipeline runs the fetch side in its own goroutine feeding the produce
// side, so a partition's next fetch overlaps its current produce.
func (c *PartitionCopy) pipeline(ctx context.Context, f *fetcher, pr *producer) error {
	chunks := make(chan chunk, 4)
	fctx, fcancel := context.WithCancel(ctx)
	defer fcancel()
	ferr := make(chan error, 1)
	go func() {
		defer close(chunks)
		ferr <- f.feed(fctx, chunks)
	}()
	perr := pr.consume(ctx, chunks)
	fcancel()
	for range chunks {
	}
	fe := <-ferr
	if perr != nil {
		return perr
	}
	if fe != nil && !errors.Is(fe, context.Canceled) {
		return fe
	}
	return nil
}

// lockstep alternates the two sides in one goroutine: fetch a chunk, send
// it, complete the oldest produce when the window is full. A following
// copy that has fetched up to the source's high watermark completes its
// produces before it polls again, as the concurrent produce side would
// meanwhile.
func (c *PartitionCopy) lockstep(ctx context.Context, f *fetcher, pr *producer) error {
	for {
		if c.cfg.Follow && f.next >= c.target.Load() {
			if err := pr.drain(ctx); err != nil {
				return err
			}
		}
		ch, ok, err := f.nextChunk(ctx)
		if err != nil {
			if ferr := pr.drain(ctx); ferr != nil {
				return ferr
			}
			return err
		}
		if !ok {
			return pr.drain(ctx)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		pr.launch(ctx, ch)
		if pr.full() {
			if err := pr.completeHead(ctx); err != nil {
				return err
			}
		}
	}
}

// resume registers the writer, reads where the destination ends and checks
// that the source still extends it.
func (c *PartitionCopy) resume(ctx context.Context) (resumePoint, error) {
	rp := resumePoint{lastEpoch: -1}
	if err := c.claim(ctx); err != nil {
		return rp, err
	}
	err := c.retry(ctx, "reading the destination log end", func() error {
		var err error
		rp.leo, rp.logStart, rp.lastEpoch, rp.startEpoch, err = c.destEnd(ctx)
		return err
	})
	if err != nil {
		return rp, err
	}
	c.start.Store(rp.leo)
	c.end.Store(rp.leo)
	err = c.retry(ctx, "checking the source", func() error {
		if rp.src != nil {
			rp.src.Close()
		}
		var err error
		if rp.src, rp.srcEpoch, err = c.cfg.Source.Leader(ctx); err != nil {
			rp.src = nil
			return err
		}
		if err := c.checkSource(ctx, rp); err != nil {
			return err
		}
		rp.start, err = rp.src.ListOffset(ctx, client.Earliest)
		return err
	})
	return rp, err
}

// destEnd reads the destination's log end, log start and the leader epoch
// of its last batch (-1 when empty) and the one it answers at its log
// start.
func (c *PartitionCopy) destEnd(ctx context.Context) (leo, logStart int64, lastEpoch, startEpoch int32, err error) {
	leo, logStart, lastEpoch, startEpoch, err = 0, 0, -1, -1, nil
	cn, _, err := c.cfg.Dest.Leader(ctx)
	if err != nil {
		return
	}
	a, err := cn.ListOffset(ctx, client.Latest)
	if err != nil {
		return
	}
	b, err := cn.ListOffset(ctx, client.Earliest)
	if err != nil {
		return
	}
	leo, logStart, startEpoch = a.Offset, b.Offset, b.LeaderEpoch
	lastEpoch, err = c.lastDestEpoch(ctx, cn, leo, logStart)
	return
}

// lastDestEpoch reads the leader epoch of the destination's last batch
// (-1 when empty).
func (c *PartitionCopy) lastDestEpoch(ctx context.Context, cn DestConn, leo, logStart int64) (lastEpoch int32, err error) {
	lastEpoch = -1
	if leo > logStart {
		res, err := cn.Fetch(ctx, client.FetchArgs{Topic: c.cfg.Topic, Partition: c.cfg.Partition, Offset: leo - 1,
			MaxBytes: c.cfg.FetchBytes, CurrentEpoch: -1, LastFetchedEpoch: -1})
		if err != nil {
			return -1, err
		}
		if res.Err != nil {
			return -1, res.Err
		}
		bs, _, _, err := Split(res.Records, leo-1)
		if err != nil {
			return -1, Refusal("%s: the destination holds unreadable data: %v", c.name(), err)
		}
		if len(bs) == 0 {
			return -1, Refusal("%s: the destination's last batch (below log end %d) could not be read", c.name(), leo)
		}
		lastEpoch = kbatch.LeaderEpoch(bs[0])
	}
	return lastEpoch, nil
}

// checkSource reads the target (the source high watermark, unless
// following) and refuses a source that no longer ends the destination's
// last epoch at or after the destination's log end.
func (c *PartitionCopy) checkSource(ctx context.Context, rp resumePoint) error {
	if !c.cfg.Follow {
		hw, err := rp.src.ListOffset(ctx, client.Latest)
		if err != nil {
			return err
		}
		c.target.Store(hw.Offset)
	}
	if rp.lastEpoch < 0 {
		return nil
	}
	ee, err := rp.src.OffsetForLeaderEpoch(ctx, rp.lastEpoch)
	if err != nil {
		return err
	}
	if ee.LeaderEpoch < 0 || ee.EndOffset < 0 {
		// The source no longer knows the epoch (its log start moved past
		// it); the fetch meets OFFSET_OUT_OF_RANGE or continues from the
		// log start.
		return nil
	}
	if ee.LeaderEpoch != rp.lastEpoch || ee.EndOffset < rp.leo {
		return c.divergence(rp.lastEpoch, rp.leo, ee)
	}
	return nil
}

func (c *PartitionCopy) divergence(epoch int32, leo int64, ee client.EpochEnd) error {
	return &Error{Code: ExitRefused, Err: fmt.Errorf("%w: %s: the destination holds offsets up to %d with last leader epoch %d, but the source's log ends that epoch at offset %d (source answered epoch %d): the source truncated its log (unclean leader election?); the copied data beyond %d is no longer on the source — refusing to continue",
		ErrDivergence, c.name(), leo, epoch, ee.EndOffset, ee.LeaderEpoch, ee.EndOffset)}
}

// claim registers this pusher as the partition's writer before it writes
// anything, or, when its epoch was assigned already, checks that it still
// is: a mirror DeleteRecords to offset 0 (the log start never moves back,
// so nothing is deleted). A registration retried after a lost answer is
// assigned a newer epoch, which fences only the lost one.
func (c *PartitionCopy) claim(ctx context.Context) error {
	register := c.writer.Epoch == RegisterEpoch
	err := c.retry(ctx, "registering as the partition's writer", func() error {
		w := c.cfg.Writer
		if register {
			w.Epoch = RegisterEpoch
		}
		e, err := c.deleteRecords(ctx, w, 0)
		var ke *kerr.Error
		switch {
		case errors.Is(err, kerr.ProducerFenced):
			return c.fenced("")
		case errors.As(err, &ke) && !transient(err):
			return writerRefusal(c.cfg.Topic, c.cfg.Partition, err)
		case err == nil && register && e < 0:
			return Usage("%s: the destination assigned no writer epoch to the registration (it lacks %s version %d)", c.name(), mirrorFeature, assignedFeatureVers)
		case err == nil && register:
			c.writer.Epoch = e
		}
		return err
	})
	if c.cfg.Claimed != nil {
		c.cfg.Claimed(err)
	}
	return err
}

// deleteRecords sends a mirror DeleteRecords as w to the destination
// leader.
func (c *PartitionCopy) deleteRecords(ctx context.Context, w Writer, offset int64) (int32, error) {
	cn, _, err := c.cfg.Dest.Leader(ctx)
	if err != nil {
		return -1, err
	}
	return cn.DeleteRecords(ctx, w, offset)
}

// fenced is the error that stops a pusher another one took over from.
func (c *PartitionCopy) fenced(msg string) error {
	if msg != "" {
		msg = " (" + msg + ")"
	}
	return &Error{Code: ExitRefused, Err: fencedError(fmt.Sprintf("%s: PRODUCER_FENCED: another `verbatim mirror push` took over this partition on the destination%s; this pusher (writer epoch %d, writer id %x) stops",
		c.name(), msg, c.writer.Epoch, c.writer.ID[:]))}
}

// fencedError reads as its own message and is kerr.ProducerFenced for
// errors.Is (kerr's text speaks of transactional ids).
type fencedError string

func (e fencedError) Error() string { return string(e) }
func (e fencedError) Unwrap() error { return kerr.ProducerFenced }
