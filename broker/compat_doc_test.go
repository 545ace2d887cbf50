package broker

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var updateCompat = flag.Bool("update-compat", false, "rewrite the version columns of docs/compat.md's API matrix from the registry")

const compatDoc = "../docs/compat.md"

var compatRow = regexp.MustCompile(`^\| (\d+) \| ([A-Za-z]+) \| (\d+)(?:-(\d+))? \| (\d+)(?:-(\d+))? \| (.*) \|$`)

type compatRange struct{ advMin, advMax, srvMin, srvMax int }

func (r compatRange) cols() (string, string) {
	f := func(a, b int) string {
		if a == b {
			return strconv.Itoa(a)
		}
		return fmt.Sprintf("%d-%d", a, b)
	}
	return f(r.advMin, r.advMax), f(r.srvMin, r.srvMax)
}

func registryRanges() map[int]compatRange {
	out := map[int]compatRange{}
	for _, e := range registry {
		if e == nil {
			continue
		}
		out[int(e.key)] = compatRange{int(e.minVersion), int(e.maxVersion), int(e.servedFrom), int(e.maxVersion)}
	}
	return out
}

// TestCompatDocMatchesRegistry keeps docs/compat.md's API matrix equal to
// the registry: every registered key is documented with its advertised and
// served ranges, and the table lists nothing that is not registered. After
// registering or changing an API, run
//
//	go test ./broker -run CompatDoc -update-compat
//
// which rewrites the rows (keeping their notes; new rows point to the
// handler file), then review the notes.
func TestCompatDocMatchesRegistry(t *testing.T) {
	doc, err := os.ReadFile(compatDoc)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(doc), "\n")
	documented := map[int]compatRange{}
	notes := map[int]string{}
	first, last := -1, -1
	for i, l := range lines {
		m := compatRow.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if first < 0 {
			first = i
		}
		last = i
		n := func(s, fallback string) int {
			if s == "" {
				s = fallback
			}
			v, _ := strconv.Atoi(s)
			return v
		}
		key := n(m[1], "")
		documented[key] = compatRange{n(m[3], ""), n(m[4], m[3]), n(m[5], ""), n(m[6], m[5])}
		notes[key] = m[7]
	}
	if first < 0 {
		t.Fatal("no API rows found in docs/compat.md")
	}
	reg := registryRanges()
	if *updateCompat {
		keys := make([]int, 0, len(reg))
		for k := range reg {
			keys = append(keys, k)
		}
		sort.Ints(keys)
		var rows []string
		for _, k := range keys {
			adv, srv := reg[k].cols()
			note, ok := notes[k]
			if !ok {
				note = "See the header comment of its handler file in broker/."
			}
			rows = append(rows, fmt.Sprintf("| %d | %s | %s | %s | %s |", k, kmsg.NameForKey(int16(k)), adv, srv, note))
		}
		out := append(append(append([]string{}, lines[:first]...), rows...), lines[last+1:]...)
		if err := os.WriteFile(compatDoc, []byte(strings.Join(out, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for k, want := range reg {
		got, ok := documented[k]
		if !ok {
			t.Errorf("key %d (%s) is registered but not in docs/compat.md (run: go test ./broker -run CompatDoc -update-compat)", k, kmsg.NameForKey(int16(k)))
			continue
		}
		if got != want {
			t.Errorf("key %d: docs/compat.md says %+v, registry %+v (run: go test ./broker -run CompatDoc -update-compat)", k, got, want)
		}
	}
	for k := range documented {
		if _, ok := reg[k]; !ok {
			t.Errorf("docs/compat.md lists key %d, which is not registered", k)
		}
	}
}
