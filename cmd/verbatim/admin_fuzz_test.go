package main

import (
	"fmt"
	"strings"
	"testing"
)

// FuzzParseTopicSpec: parseTopicSpec never panics; what it accepts names
// a topic without ':' and non-negative partitions, and printing them back
// parses to the same answer.
func FuzzParseTopicSpec(f *testing.F) {
	for _, s := range []string{"t", "t:0", "t:0,1, 2", "t:", ":1", "t:-1", "t:x", "t:1:2", "t:99999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		name, parts, err := parseTopicSpec(spec)
		if err != nil {
			return
		}
		if name == "" || strings.Contains(name, ":") {
			t.Fatalf("%q: topic %q", spec, name)
		}
		again := name
		if parts != nil {
			strs := make([]string, len(parts))
			for i, p := range parts {
				if p < 0 {
					t.Fatalf("%q: partition %d", spec, p)
				}
				strs[i] = fmt.Sprint(p)
			}
			again += ":" + strings.Join(strs, ",")
		}
		n2, p2, err := parseTopicSpec(again)
		if err != nil || n2 != name || fmt.Sprint(p2) != fmt.Sprint(parts) {
			t.Fatalf("%q -> %q: %q %v %v", spec, again, n2, p2, err)
		}
	})
}
