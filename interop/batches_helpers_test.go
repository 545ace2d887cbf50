package interop

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// cutBatches cuts a record set into whole batches. A trailing partial
// batch (a fetch cut by max bytes: fewer bytes than its length field
// announces, or fewer than the length field itself) is returned as tail; a
// negative or too-small length field is an error naming its position.
func cutBatches(set []byte) (batches [][]byte, tail []byte, err error) {
	pos := 0
	for len(set) > 0 {
		if len(set) < kbatch.LogOverhead {
			return batches, set, nil
		}
		n := int64(kbatch.Length(set))
		if n < kbatch.HeaderSize-kbatch.LogOverhead {
			return batches, set, fmt.Errorf("batch at byte %d: length field %d", pos, n)
		}
		if int64(kbatch.LogOverhead)+n > int64(len(set)) {
			return batches, set, nil
		}
		b, rest, err := kbatch.Next(set)
		if err != nil {
			return batches, set, fmt.Errorf("batch at byte %d: %w", pos, err)
		}
		batches = append(batches, b)
		pos += len(b)
		set = rest
	}
	return batches, nil, nil
}

// splitBatches cuts a record set (a whole .log file, a Fetch partition's
// records) into batches; a partial trailing batch is dropped, anything else
// malformed fails the test.
func splitBatches(t testing.TB, who string, set []byte) [][]byte {
	t.Helper()
	out, _, err := cutBatches(set)
	if err != nil {
		t.Fatalf("%s: %v", who, err)
	}
	return out
}

// segmentFiles lists the files of dir with the given suffix, sorted by name
// (that is, by base offset: names are 20-digit offsets).
func segmentFiles(t testing.TB, dir, suffix string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+suffix))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(m)
	return m
}

// readLogBatches returns every batch of every .log segment in dir, in
// offset order, as stored on disk.
func readLogBatches(t testing.TB, dir string) [][]byte {
	t.Helper()
	var out [][]byte
	for _, f := range segmentFiles(t, dir, ".log") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, splitBatches(t, f, b)...)
	}
	return out
}

// dumpFields parses one DumpLogSegments line of "name: value" pairs
// ("baseOffset: 0 lastOffset: 4 count: 5 ..."). Values are single tokens
// except for bracketed lists (headerKeys: [a,b]) and the payload.
var dumpFieldRE = regexp.MustCompile(`(\w+): (\[[^\]]*\]|\S+)`)

func dumpFields(line string) map[string]string {
	m := map[string]string{}
	// A record's payload is printed last and may hold spaces: it is the
	// rest of the line.
	rest := ""
	if i := strings.Index(line, " payload: "); i >= 0 {
		line, rest = line[:i], line[i+len(" payload: "):]
		m["payload"] = rest
	}
	for _, sm := range dumpFieldRE.FindAllStringSubmatch(line, -1) {
		if _, dup := m[sm[1]]; !dup {
			m[sm[1]] = sm[2]
		}
	}
	return m
}

// codecName is the name Kafka's CompressionType prints.
func codecName(c kbatch.Codec) string {
	return [...]string{"none", "gzip", "snappy", "lz4", "zstd"}[c]
}

// describeBatch is a short identification of a batch for failure messages.
func describeBatch(b []byte) string {
	h, err := kbatch.ParseHeader(b)
	if err != nil {
		return fmt.Sprintf("<%d bytes: %v>", len(b), err)
	}
	return fmt.Sprintf("base %d last %d count %d epoch %d pid %d attrs %#x size %d",
		h.BaseOffset, h.LastOffset(), h.RecordCount, h.LeaderEpoch, h.ProducerID, h.Attributes, h.Size())
}

// firstDiff names the first differing byte of two batches.
func firstDiff(a, b []byte) string {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return fmt.Sprintf("byte %d: %#x vs %#x (sizes %d, %d)", i, a[i], b[i], len(a), len(b))
		}
	}
	if len(a) != len(b) {
		return fmt.Sprintf("sizes %d vs %d", len(a), len(b))
	}
	return "identical"
}

// sameBatches fails unless got and want hold the same batches byte for byte.
func sameBatches(t testing.TB, who string, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d batches, want %d", who, len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s: batch %d (%s) differs from (%s): %s", who, i, describeBatch(got[i]), describeBatch(want[i]), firstDiff(got[i], want[i]))
		}
	}
}

// linesWithPrefix returns the lines of s that start with prefix (after
// leading spaces).
func linesWithPrefix(s, prefix string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimLeft(l, " "), prefix) {
			out = append(out, strings.TrimLeft(l, " "))
		}
	}
	return out
}
