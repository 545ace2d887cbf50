package broker

import "testing"

// FuzzPartitionDirTopic: a name the data dir scan takes for a partition
// directory is exactly the directory partitionDir names for it, so the
// scan never removes a directory the broker did not write.
func FuzzPartitionDirTopic(f *testing.F) {
	for _, s := range []string{"orders-0", "a-b-12", "t-007", "-1", "t-", "verbatim-meta", "x.y_z-2147483647", "t-+1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		topic, n, ok := partitionDirTopic(name)
		if !ok {
			return
		}
		if n < 0 || validateTopicName(topic) != nil || partitionDir(topic, n) != name {
			t.Fatalf("%q parsed as topic %q partition %d", name, topic, n)
		}
	})
}
