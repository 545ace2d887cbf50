// Package testcerts makes throwaway X.509 certificates for tests: a CA and
// the server and client certificates it signs, as PEM files in a test's
// temporary directory (no private key is ever committed). It is a leaf
// imported only by tests (broker, tlsconf, interop); it must not hold
// product logic.
package testcerts
