// Package kbatchtest holds the record-batch helper the tests of many
// packages share: encoding a kbatch.Batch and failing the test when it
// does not encode.
//
// It is imported by tests only. It must not import anything of
// Verbatim's but kbatch.
package kbatchtest
