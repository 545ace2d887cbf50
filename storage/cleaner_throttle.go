package storage

import "time"

// Throttler bounds the cleaner's I/O to a rate in bytes per second, as
// Kafka's Throttler does for log.cleaner.io.max.bytes.per.second: the
// bytes read and written are counted, and every period (300 ms) the
// cleaner sleeps for as long as it ran ahead of the rate. The clock and
// the sleep are inputs, so tests run it on a fake clock.
type Throttler struct {
	rate   float64 // bytes per second; <= 0: unlimited
	now    func() time.Time
	sleep  func(time.Duration)
	start  time.Time
	bytes  int64
	period time.Duration
	slept  time.Duration
}

const throttlePeriod = 300 * time.Millisecond

// NewThrottler returns a throttler at bytesPerSecond (<= 0: unlimited).
// now and sleep default to the real clock.
func NewThrottler(bytesPerSecond float64, now func() time.Time, sleep func(time.Duration)) *Throttler {
	if now == nil {
		now = time.Now
	}
	if sleep == nil {
		sleep = time.Sleep
	}
	return &Throttler{rate: bytesPerSecond, now: now, sleep: sleep, start: now(), period: throttlePeriod}
}

// Done counts n bytes of I/O and sleeps when the period is over and the
// observed rate is above the limit.
func (t *Throttler) Done(n int64) {
	if t == nil || t.rate <= 0 {
		return
	}
	t.bytes += n
	elapsed := t.now().Sub(t.start)
	if elapsed < t.period {
		return
	}
	want := time.Duration(float64(t.bytes) / t.rate * float64(time.Second))
	if want > elapsed {
		d := want - elapsed
		t.sleep(d)
		t.slept += d
	}
	t.start, t.bytes = t.now(), 0
}

// Slept is the total time the throttler slept.
func (t *Throttler) Slept() time.Duration {
	if t == nil {
		return 0
	}
	return t.slept
}
