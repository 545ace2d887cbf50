package secret

import (
	"errors"
	"testing"
)

// FuzzDecode feeds arbitrary stored values to the parser and the decoder:
// neither may panic, a parsed value formats back to one that parses to
// the same fields, and a decode either succeeds or fails with ErrFormat or
// ErrWrongSecret.
func FuzzDecode(f *testing.F) {
	e, err := New(Config{Secret: "fuzz", OldSecret: "old", Iterations: MinIterations})
	if err != nil {
		f.Fatal(err)
	}
	for _, v := range []string{"", "pw", "a longer password than one block"} {
		enc, err := e.Encode(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(enc)
	}
	f.Add("cipherAlgorithm:AES/GCM/NoPadding,keyLength:128,salt:AA==,iterations:1,encryptedPassword:AAAA,passwordLength:0,initializationVector:AAAAAAAAAAAAAAAA,authenticationTagLength:96")
	f.Add("a:b:c, d:e ,")
	f.Fuzz(func(t *testing.T, s string) {
		fl, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("Parse error not ErrFormat: %v", err)
			}
			return
		}
		again, err := Parse(fl.String())
		if err != nil || again.String() != fl.String() {
			t.Fatalf("format round trip: %v\n%s\n%s", err, fl.String(), again.String())
		}
		if fl.Iterations > 2*MinIterations {
			return // correct but slow; the fuzzer's time is better spent elsewhere
		}
		if _, err := e.Decode(s); err != nil && !errors.Is(err, ErrFormat) && !errors.Is(err, ErrWrongSecret) {
			t.Fatalf("Decode error: %v", err)
		}
	})
}
