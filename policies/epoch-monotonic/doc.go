// Command epoch-monotonic is the Go reference implementation of the
// built-in policy that refuses leader-epoch rewinds (invariant I3): a batch
// whose partition leader epoch is lower than the last stored batch's, or
// than an earlier batch's in the same request, is rejected with
// POLICY_VIOLATION. The built-in itself is policy.wat (WebAssembly text, no
// runtime); the tests require both to give the same verdicts and reasons.
//
// Like every built-in guest it imports only the SDK (and the standard
// library); it must not import the host (wasmpolicy) or the broker.
package main
