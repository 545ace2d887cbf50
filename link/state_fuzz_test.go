package link

import (
	"encoding/json"
	"testing"
)

// FuzzDecodeMeta: a link meta record (a file on a single node, an etcd
// record on a cluster, written by any broker of any version) either
// decodes to a link of the name it is stored under, which encodes and
// decodes again to the same definition, or is refused with an error;
// never a panic.
func FuzzDecodeMeta(f *testing.F) {
	f.Add("l", []byte(`{"version":1,"config":{"Name":"l","SourceBootstrap":"h:9092"},"id":"00112233445566778899aabbccddeeff","topics":{"t":{"mirrored":true,"failed":{"0":{"reason":"x","divergence_offset":-1}}}}}`))
	f.Add("l", []byte(`{"version":2,"config":{"Name":"l"}}`))
	f.Add("x", []byte(`{"version":1,"config":{"Name":"l"}}`))
	f.Add("l", []byte(`{"topics":{"t":null}}`))
	f.Add("l", []byte(`[`))
	f.Fuzz(func(t *testing.T, name string, b []byte) {
		lm, err := decodeMeta(name, b, 7)
		if err != nil {
			return
		}
		if lm.Config.Name != name || lm.version != 7 {
			t.Fatalf("decoded %q at version %d from a record named %q", lm.Config.Name, lm.version, name)
		}
		c := lm.clone() // must not panic on nil topics
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeMeta(name, out, 7)
		if err != nil || again.Config.Name != lm.Config.Name || again.ID != lm.ID || len(again.Topics) != len(lm.Topics) {
			t.Fatalf("re-encoded record does not decode alike: %v", err)
		}
	})
}
