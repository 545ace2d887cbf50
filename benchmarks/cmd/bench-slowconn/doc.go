// Command bench-slowconn measures a broker under the slow-connection attack
// of docs/DESIGN.md ("Memory model"): it starts `verbatim serve`, measures
// its RSS and the round-trip latency of franz-go and kcat clients while
// idle, then opens connections from another loopback address that each
// announce a large Produce frame and trickle a few bytes at a time
// (re-opened when the broker closes them), and measures the same again.
// It prints one line of text per phase; numbers are for the record, no
// pass/fail.
package main
