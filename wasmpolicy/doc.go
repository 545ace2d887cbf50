// Package wasmpolicy hosts per-topic mirror policy modules in a wazero
// sandbox (docs/policies.md). A Host compiles each module once (with an
// on-disk compilation cache), checks it against the policy ABI
// (policies/abi), and binds modules to topics; a Binding judges one
// partition's batches per call, with instances pooled per (module, topic)
// so that no topic's data reaches another topic's instance. Calls have a
// deadline and instances a memory cap; a guest that traps, exits, overruns
// or answers garbage rejects the call's batches and is replaced.
//
// It must not touch storage or connections; it judges, it does not write.
package wasmpolicy
