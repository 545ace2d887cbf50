package mirror

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/client"
)

// epochDest is a DestConn that records the log-start forwards it gets
// and answers start-epoch forwards with err.
type epochDest struct {
	DestConn // nil: the copy's forward calls only the two methods below
	err      error
	epochs   []startAt // start-epoch forwards received
	starts   []int64   // plain log-start forwards received
}

func (d *epochDest) Leader(context.Context) (DestConn, int32, error) { return d, 0, nil }

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
