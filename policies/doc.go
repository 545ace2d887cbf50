// Package policies holds the built-in mirror policy modules (compiled WASM,
// embedded with go:embed) and the Go guest SDK that policy authors use.
//
// It must not import the host (wasmpolicy) nor anything of the broker: guest
// code runs inside the sandbox.
package policies
