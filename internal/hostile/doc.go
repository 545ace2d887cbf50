// Package hostile is a test helper: it builds the compressed batches an
// attacker or a broken producer sends (payloads that start like a codec's
// stream and are not valid for it, decompression bombs), with valid batch
// headers and CRCs so that they reach the checks behind the CRC. Unit tests
// (hotpath, kbatch callers) and the real-peer tests (interop) share it.
//
// Only tests import it; it must not be imported by product packages.
package hostile
