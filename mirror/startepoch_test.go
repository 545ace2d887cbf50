package mirror

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/client"
)

// epochDest is a DestConn that records the log-start forwards it gets
// and answers start-epoch forwards with err.
type epochDest struct {
	DestConn // nil: the copy's forward calls only the methods below
	err      error
	epochs   []startAt // start-epoch forwards received
	starts   []int64   // plain log-start forwards received
}

func (d *epochDest) Leader(context.Context) (DestConn, int32, error) { return d, 0, nil }

// ListOffset answers EARLIEST (read again after a failed forward) at 0
// with no epoch, as a destination that took none.
func (d *epochDest) ListOffset(context.Context, int64) (client.OffsetAnswer, error) {
	return client.OffsetAnswer{Offset: 0, LeaderEpoch: -1}, nil
}

func (d *epochDest) ForwardStartEpoch(_ context.Context, _ Writer, offset int64, epoch int32) error {
	d.epochs = append(d.epochs, startAt{offset, epoch})
	return d.err
}

func (d *epochDest) DeleteRecords(_ context.Context, _ Writer, offset int64) (int32, error) {
	d.starts = append(d.starts, offset)
	return -1, nil
}

// TestForwardStartEpoch: the copy forwards the source's epoch at its log
// start once per (offset, epoch) the destination accepts or refuses, not
// when the first copied batch carries it already, falls back to the plain
// log-start forward when the destination cannot take it (and stops
// trying), retries after a transient failure, and stops on a fenced
// writer.
func TestForwardStartEpoch(t *testing.T) {
	ctx := context.Background()
	newCopy := func(d *epochDest, noStartEpoch bool) *producer {
		c := NewPartitionCopy(CopyConfig{Topic: "t", Dest: d, NoStartEpoch: noStartEpoch})
		return c.newProducer(100, 0)
	}
	t.Run("accepted once", func(t *testing.T) {
		d := &epochDest{}
		p := newCopy(d, false)
		for range 2 {
			if err := p.done(ctx, chunk{first: 5, end: 100, logStart: 0, firstEpoch: 1, startEpoch: 0}); err != nil {
				t.Fatal(err)
			}
		}
		if len(d.epochs) != 1 || d.epochs[0] != (startAt{0, 0}) || len(d.starts) != 0 {
			t.Fatalf("epochs %v starts %v", d.epochs, d.starts)
		}
		// The log start moves with a new epoch: one forward does both.
		if err := p.done(ctx, chunk{first: 100, end: 110, logStart: 20, firstEpoch: 1, startEpoch: 1}); err != nil || p.dstart != 20 {
			t.Fatalf("err %v dstart %d", err, p.dstart)
		}
		if len(d.epochs) != 2 || len(d.starts) != 0 {
			t.Fatalf("epochs %v starts %v", d.epochs, d.starts)
		}
	})
	t.Run("carried by the first batch", func(t *testing.T) {
		d := &epochDest{}
		p := newCopy(d, false)
		if err := p.done(ctx, chunk{first: 0, end: 100, logStart: 0, firstEpoch: 3, startEpoch: 3}); err != nil || len(d.epochs) != 0 {
			t.Fatalf("err %v epochs %v", err, d.epochs)
		}
	})
	t.Run("unsupported", func(t *testing.T) {
		d := &epochDest{err: ErrStartEpochUnsupported}
		p := newCopy(d, false)
		if err := p.done(ctx, chunk{first: 50, end: 100, logStart: 10, firstEpoch: 1, startEpoch: 0}); err != nil {
			t.Fatal(err)
		}
		if err := p.done(ctx, chunk{first: 100, end: 110, logStart: 20, firstEpoch: 1, startEpoch: 1}); err != nil {
			t.Fatal(err)
		}
		if len(d.epochs) != 1 || len(d.starts) != 2 || p.dstart != 20 {
			t.Fatalf("epochs %v starts %v dstart %d", d.epochs, d.starts, p.dstart)
		}
	})
	// A refused epoch is not sent again; one that failed transiently is.
	for _, tc := range []struct {
		err   error
		sends int
	}{{kerr.PolicyViolation, 1}, {kerr.NotLeaderForPartition, 2}} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			d := &epochDest{err: tc.err}
			p := newCopy(d, false)
			for range 2 {
				if err := p.done(ctx, chunk{first: 5, end: 100, logStart: 0, firstEpoch: 1, startEpoch: 0}); err != nil {
					t.Fatal(err)
				}
			}
			if len(d.epochs) != tc.sends || len(d.starts) != 0 || client.Transient(tc.err) != (tc.sends == 2) {
				t.Fatalf("epochs %v starts %v", d.epochs, d.starts)
			}
		})
	}
	t.Run("fenced", func(t *testing.T) {
		d := &epochDest{err: kerr.ProducerFenced}
		err := newCopy(d, false).done(ctx, chunk{first: 5, end: 100, logStart: 0, firstEpoch: 1, startEpoch: 0})
		if !errors.Is(err, kerr.ProducerFenced) || ExitCode(err) != ExitRefused {
			t.Fatalf("fenced: %v", err)
		}
	})
	t.Run("test hook", func(t *testing.T) {
		d := &epochDest{}
		if err := newCopy(d, true).done(ctx, chunk{first: 5, end: 100, logStart: 0, firstEpoch: 1, startEpoch: 0}); err != nil || len(d.epochs) != 0 {
			t.Fatalf("err %v epochs %v", err, d.epochs)
		}
	})
}

// leaderDest is one destination leader of failoverDest: it acknowledges
// produces until deposed (then NOT_LEADER_OR_FOLLOWER), answers
// EARLIEST with its log start and epoch there, and records the
// forwards it gets.
type leaderDest struct {
	epochDest
	deposed  bool
	earliest client.OffsetAnswer
}

func (d *leaderDest) Broken() bool { return false }

func (d *leaderDest) ListOffset(_ context.Context, ts int64) (client.OffsetAnswer, error) {
	if ts != client.Earliest {
		return client.OffsetAnswer{}, errors.New("only EARLIEST")
	}
	return d.earliest, nil
}

func (d *leaderDest) SendProduce(context.Context, Writer, []byte, int64, int32, int64) (ProduceWait, error) {
	if d.deposed {
		return waitErr{&ProduceError{Err: kerr.NotLeaderForPartition, Message: "moved"}}, nil
	}
	return waitErr{}, nil
}

type waitErr struct{ err error }

func (w waitErr) Wait(context.Context) error { return w.err }

// failoverDest is a destination whose leader is leaders[cur].
type failoverDest struct {
	leaders []*leaderDest
	cur     int
}

func (d *failoverDest) Leader(context.Context) (DestConn, int32, error) {
	return d.leaders[d.cur], int32(d.cur), nil
}

// TestForwardStartEpochAfterLeaderChange: after a mirror produce meets
// NOT_LEADER_OR_FOLLOWER the copy reads the new leader's log start and
// epoch (as a cluster link's copy does when it starts on the new leader)
// and forwards the source's log start with its epoch again when the new
// leader lacks it (it failed over before taking the old leader's
// forward), but not when it has it.
func TestForwardStartEpochAfterLeaderChange(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		earliest client.OffsetAnswer // the new leader's
		want     []startAt
		dstart   int64
	}{
		{"new leader lacks it", client.OffsetAnswer{Offset: 0, LeaderEpoch: -1}, []startAt{{3, 1}}, 3},
		{"new leader has it", client.OffsetAnswer{Offset: 3, LeaderEpoch: 1}, nil, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, next := &leaderDest{}, &leaderDest{earliest: tc.earliest}
			d := &failoverDest{leaders: []*leaderDest{old, next}}
			p := NewPartitionCopy(CopyConfig{Topic: "t", Dest: d}).newProducer(5, 0)
			send := func(first, end int64) {
				t.Helper()
				p.launch(ctx, chunk{first: first, end: end, logStart: 3, firstEpoch: 2, startEpoch: 1})
				if err := p.completeHead(ctx); err != nil {
					t.Fatal(err)
				}
			}
			send(5, 10)
			if !slices.Equal(old.epochs, []startAt{{3, 1}}) || p.dstart != 3 {
				t.Fatalf("first leader's forwards %v, dstart %d", old.epochs, p.dstart)
			}
			old.deposed, d.cur = true, 1
			send(10, 12)
			if !slices.Equal(next.epochs, tc.want) || len(next.starts) != 0 || p.dstart != tc.dstart {
				t.Fatalf("new leader's forwards %v (plain %v), dstart %d; want %v", next.epochs, next.starts, p.dstart, tc.want)
			}
			// Nothing more once the new leader has it.
			send(12, 14)
			if !slices.Equal(next.epochs, tc.want) || len(old.epochs) != 1 {
				t.Fatalf("forwards after the next chunk: new leader %v, old %v", next.epochs, old.epochs)
			}
		})
	}
}
