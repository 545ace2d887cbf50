package testkit

import (
	"context"
	"time"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/coordlog/coordlogtest"
)

// SleepClock is a client.Clock (and mirror.Clock) for tests that
// advances only when slept on: its time is the start plus the sum of the
// sleeps, so retry bounds, back-offs and throttles run without waiting.
// It is the coordinators' manual clock with a Sleep that advances it.
type SleepClock struct{ *coordlogtest.Clock }

// NewSleepClock starts a SleepClock at start.
func NewSleepClock(start time.Time) *SleepClock {
	return &SleepClock{coordlogtest.NewClock(start)}
}

// Sleep advances the clock by d at once (ctx done: its error, no advance).
func (c *SleepClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.Advance(d)
	return nil
}

// EpochStart is one entry of a Kafka leader's epoch cache: the epoch and
// the offset it starts at.
type EpochStart struct {
	Epoch int32
	Start int64
}

// EndForEpoch is a Kafka leader's OffsetForLeaderEpoch answer for epoch e
// from its epoch cache (ascending) and log end: the largest epoch at or
// below e and where it ends (the next epoch's start, or the log end);
// epoch and offset -1 when it has none.
func EndForEpoch(cache []EpochStart, logEnd int64, e int32) client.EpochEnd {
	for i := len(cache) - 1; i >= 0; i-- {
		if cache[i].Epoch <= e {
			if i+1 < len(cache) {
				return client.EpochEnd{LeaderEpoch: cache[i].Epoch, EndOffset: cache[i+1].Start}
			}
			return client.EpochEnd{LeaderEpoch: cache[i].Epoch, EndOffset: logEnd}
		}
	}
	return client.EpochEnd{LeaderEpoch: -1, EndOffset: -1}
}
