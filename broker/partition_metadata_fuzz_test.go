package broker

import "testing"

// FuzzPartitionMetadata: the partition.metadata parser never panics, and
// what it accepts encodes to a file it reads as the same topic id.
func FuzzPartitionMetadata(f *testing.F) {
	f.Add([]byte("version: 0\ntopic_id: AQIDBAUGBwgJCgsMDQ4PEA\n"))
	f.Add([]byte("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA"))
	f.Add([]byte("version: 1\ntopic_id: x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		id, err := parsePartitionMetadata(data)
		if err != nil {
			return
		}
		again, err := parsePartitionMetadata(encodePartitionMetadata(id))
		if err != nil || again != id {
			t.Fatalf("round trip of %v: %v %v", id, again, err)
		}
	})
}
