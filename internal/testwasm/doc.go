// Package testwasm is a test helper: it gives in-process test brokers a
// shared, pre-filled policy compilation cache, so that a test's first mirror
// produce does not wait for the default mirror policies to compile (cold,
// under -race on a loaded machine, that took 20 s or more).
//
// Only tests import it; it must not be imported by product packages.
package testwasm
