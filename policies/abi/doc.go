// Package abi is the byte-level contract between the policy host
// (wasmpolicy) and policy guests, version 1. It is documented for authors
// of any language in docs/policies.md; this package holds the layout
// constants, the guest-side decoder of a judge call's input and the
// encoder and decoder of verdict lists.
//
// It imports nothing but a few standard library packages, so a Go guest
// that links it stays small, and the host and guests share exactly one
// definition of the layout. It must not hold host or guest logic.
package abi
