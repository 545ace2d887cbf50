package lograte

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// MaxKeys bounds the keys a Limiter tracks; once it is reached, lines
// with new keys share the overflow bucket until old keys expire.
const MaxKeys = 4096

const overflowKey = "\x00overflow"

// Limiter lets through at most Burst lines per key in every Interval.
// The zero value is not usable; call New.
type Limiter struct {
	mu       sync.Mutex
	now      func() time.Time
	interval time.Duration
	burst    int
	keys     map[string]*window
}

type window struct {
	start      time.Time
	used       int // lines let through in this window
	suppressed int // lines held back since the last one let through
}

// New returns a limiter letting burst lines per key through in every
// interval. now is the clock (nil: time.Now), an input so tests can drive
// it.
func New(interval time.Duration, burst int, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	if burst < 1 {
		burst = 1
	}
	return &Limiter{now: now, interval: interval, burst: burst, keys: make(map[string]*window)}
}

// Allow reports whether a line for key may be written now and, when it
// may, how many lines for key were held back before it.
func (l *Limiter) Allow(key string) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	w := l.keys[key]
	if w == nil {
		if len(l.keys) >= MaxKeys {
			l.expireLocked(now)
		}
		if len(l.keys) >= MaxKeys {
			key = overflowKey
			w = l.keys[key]
		}
		if w == nil {
			w = &window{start: now}
			l.keys[key] = w
		}
	}
	if now.Sub(w.start) >= l.interval {
		w.start, w.used = now, 0
	}
	if w.used >= l.burst {
		w.suppressed++
		return false, 0
	}
	w.used++
	suppressed, w.suppressed = w.suppressed, 0
	return true, suppressed
}

// expireLocked drops keys whose window ended with nothing held back.
func (l *Limiter) expireLocked(now time.Time) {
	for k, w := range l.keys {
		if now.Sub(w.start) >= l.interval && w.suppressed == 0 {
			delete(l.keys, k)
		}
	}
}

// Log writes msg at level through lg unless key is over its rate; a line
// following held-back ones carries "suppressed", their number.
func (l *Limiter) Log(lg *slog.Logger, level slog.Level, key, msg string, args ...any) {
	if !lg.Enabled(context.Background(), level) {
		return
	}
	ok, n := l.Allow(key)
	if !ok {
		return
	}
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	lg.Log(context.Background(), level, msg, args...)
}
