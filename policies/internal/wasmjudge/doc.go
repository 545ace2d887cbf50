// Package wasmjudge is a test helper for the built-in policies: it judges
// record sets with a built-in's committed WebAssembly module in the real
// host (wasmpolicy), so that a built-in's tests can run the same vectors
// through its Go reference implementation and its module and require the
// same verdicts.
//
// Only tests import it; it is not guest code and must not be imported by
// product packages.
package wasmjudge
