// Package wasmpolicy hosts per-topic mirror policy modules in a wazero
// sandbox: it compiles modules once, instantiates them per partition, passes
// batch headers and partition context through the versioned ABI documented
// in docs/policies.md, and turns a module's verdict into Kafka error codes.
//
// It must not touch storage or connections; it judges, it does not write.
package wasmpolicy
