package broker

import "time"

// coordClock is the time source of the group and transaction coordinators.
// Their state machines read time only through it, and their timers
// (session, rebalance and transaction timeouts) are evaluated by tick(now)
// calls, so tests drive them with a manual clock instead of sleeping.
type coordClock interface {
	Now() time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// coordTickInterval is how often the coordinators' timers are evaluated
// against the clock in a running broker.
const coordTickInterval = 100 * time.Millisecond
