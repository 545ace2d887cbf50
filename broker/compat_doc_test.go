package broker

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestCompatDocMatchesRegistry keeps docs/compat.md's API matrix equal to
// the registry: every registered key is documented with its advertised and
// served ranges, and the table lists nothing that is not registered.
func TestCompatDocMatchesRegistry(t *testing.T) {
	doc, err := os.ReadFile("../docs/compat.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^\| (\d+) \| [A-Za-z]+ \| (\d+)(?:-(\d+))? \| (\d+)(?:-(\d+))? \|`)
	type ranges struct{ advMin, advMax, srvMin, srvMax int }
	documented := map[int]ranges{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		n := func(s, fallback string) int {
			if s == "" {
				s = fallback
			}
			v, _ := strconv.Atoi(s)
			return v
		}
		key := n(m[1], "")
		documented[key] = ranges{n(m[2], ""), n(m[3], m[2]), n(m[4], ""), n(m[5], m[4])}
	}
	if len(documented) == 0 {
		t.Fatal("no API rows found in docs/compat.md")
	}
	for _, e := range registry {
		if e == nil || e.hidden {
			continue
		}
		want := ranges{int(e.minVersion), int(e.maxVersion), int(e.servedFrom), int(e.maxVersion)}
		got, ok := documented[int(e.key)]
		if !ok {
			t.Errorf("key %d is registered but not in docs/compat.md", e.key)
			continue
		}
		if got != want {
			t.Errorf("key %d: docs/compat.md says %+v, registry %+v", e.key, got, want)
		}
		delete(documented, int(e.key))
	}
	for k := range documented {
		t.Errorf("docs/compat.md lists key %d, which is not registered", k)
	}
}
