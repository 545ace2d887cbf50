// Package lograte keeps hostile or failing input from flooding the log:
// a Limiter lets a few lines per key through in each interval and counts
// the rest, and the next line let through says how many were held back.
//
// It owns only the counting; callers choose the keys (a refusal's kind
// and topic, say, never a value the peer picks freely without bound: the
// number of keys is capped, and keys beyond the cap share one bucket).
// It must not import anything of the broker's.
package lograte
