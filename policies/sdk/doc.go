// Package sdk is the Go guest SDK for Verbatim mirror policies. A policy is
// a main package that registers one Policy from init and is built as a
// WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o my.wasm ./my-policy
//
// The SDK provides the module's exports (docs/policies.md, ABI version 1):
// it decodes the host's input, calls the policy's Judge and encodes the
// verdicts. Judge sees the batches of one partition in one produce request
// plus the partition's context, and rejects batches by index.
//
// The exports are compiled only for GOOS=wasip1; on other platforms the
// package still builds so that policies can be unit-tested natively with
// Run.
//
// It owns the guest side of the ABI (exports, input decoding, verdict
// encoding); it imports only policies/abi and the standard library and
// must not import the host (wasmpolicy) or the broker.
package sdk
