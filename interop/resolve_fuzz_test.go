package interop

import (
	"strings"
	"testing"
)

// FuzzResolveToolName feeds arbitrary tool names to the class resolver: it
// must never panic, and whatever it returns must be a class of the index
// whose simple name matches what was asked for (after alias expansion).
func FuzzResolveToolName(f *testing.F) {
	idx := &classIndex{lib: "lib", classes: map[string][]string{
		"TopicCommand":    {"a.TopicCommand", "org.apache.kafka.tools.TopicCommand"},
		"DumpLogSegments": {"kafka.tools.DumpLogSegments", "org.apache.kafka.tools.DumpLogSegments"},
		"Kafka":           {"kafka.Kafka"},
		"StorageTool":     {"kafka.tools.StorageTool"},
	}}
	for _, s := range []string{"kafka-topics", "kafka-topics.sh", "TopicCommand", "kafka.Kafka", ".", "..", "a.", ".Kafka", "kafka-dump-log", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		got, err := idx.resolve(name)
		if err != nil {
			return
		}
		want := name
		if alias, ok := toolAliases[strings.TrimSuffix(name, ".sh")]; ok {
			want = alias
		}
		if i := strings.LastIndexByte(want, '.'); i >= 0 {
			if got != want {
				t.Fatalf("resolve(%q) = %q, want the exact class", name, got)
			}
			want = want[i+1:]
		}
		found := false
		for _, c := range idx.classes[want] {
			found = found || c == got
		}
		if !found {
			t.Fatalf("resolve(%q) = %q, not a class named %q in the index", name, got, want)
		}
	})
}
