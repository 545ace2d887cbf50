package wireext

import (
	"bytes"
	"reflect"
	"testing"
)

// fuzzLink checks, for any input b decoded as the message m (request or
// response of one link key): ReadFrom never panics; a failed ReadFrom
// leaves the zero value; when b decodes to x, AppendTo(x) decodes to x
// again, re-encodes to itself and is never longer than b.
func fuzzLink(t *testing.T, m LinkMessage, b []byte) {
	if err := m.ReadFrom(b); err != nil {
		if zero := newLike(m); !reflect.DeepEqual(m, zero) {
			t.Fatalf("%x: error %v with value %+v", b, err, m)
		}
		return
	}
	enc := m.AppendTo(nil)
	y := newLike(m)
	if err := y.ReadFrom(enc); err != nil || !reflect.DeepEqual(m, y) {
		t.Fatalf("%x -> %+v -> %x -> %+v (%v)", b, m, enc, y, err)
	}
	if again := y.AppendTo(nil); !bytes.Equal(again, enc) {
		t.Fatalf("%+v encodes as %x and %x", m, enc, again)
	}
	if len(enc) > len(b) {
		t.Fatalf("canonical %x is longer than the input %x", enc, b)
	}
}

// The first byte of a fuzz input picks the key (modulo the seven).
func fuzzKey(b []byte) (int16, []byte) {
	if len(b) == 0 {
		return linkKeys[0], b
	}
	return linkKeys[int(b[0])%len(linkKeys)], b[1:]
}

func addLinkSeeds(f *testing.F, responses bool) {
	for i, key := range linkKeys {
		for j, m := range linkSamples()[key] {
			if (j%2 == 1) == responses {
				f.Add(append([]byte{byte(i)}, m.AppendTo(nil)...))
			}
		}
	}
}

// FuzzLinkRequest: every link request decoder.
func FuzzLinkRequest(f *testing.F) {
	addLinkSeeds(f, false)
	f.Fuzz(func(t *testing.T, b []byte) {
		key, body := fuzzKey(b)
		fuzzLink(t, NewLinkRequest(key), body)
	})
}

// FuzzLinkResponse: every link response decoder.
func FuzzLinkResponse(f *testing.F) {
	addLinkSeeds(f, true)
	f.Fuzz(func(t *testing.T, b []byte) {
		key, body := fuzzKey(b)
		fuzzLink(t, NewLinkResponse(key), body)
	})
}
