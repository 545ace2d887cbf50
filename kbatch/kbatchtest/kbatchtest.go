package kbatchtest

import (
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// Encode is kbatch.Encode(b); an error fails tb.
func Encode(tb testing.TB, b kbatch.Batch) []byte {
	tb.Helper()
	out, err := kbatch.Encode(b)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}
