package broker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestPartitionMetadataFormat(t *testing.T) {
	id := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	data := encodePartitionMetadata(id)
	if string(data) != "version: 0\ntopic_id: AQIDBAUGBwgJCgsMDQ4PEA\n" {
		t.Fatalf("encoded %q", data)
	}
	got, err := parsePartitionMetadata(data)
	if err != nil || got != id {
		t.Fatalf("parsed %v %v", got, err)
	}
	for _, bad := range []string{"", "version: 1\ntopic_id: AQIDBAUGBwgJCgsMDQ4PEA\n", "version: 0\n", "topic_id: AQIDBAUGBwgJCgsMDQ4PEA\nversion: 0\n", "version: 0\ntopic_id: short\n"} {
		if _, err := parsePartitionMetadata([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// A partition directory whose partition.metadata names another topic id
// (the topic was deleted and created again while this broker was down)
// is removed when its log opens: the new topic starts empty. One with
// the right id is kept.
func TestPartitionMetadataStaleDirRemoved(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir, nil)
	createTopic(t, b, "pm", 2, nil)
	for p := int32(0); p < 2; p++ {
		if pr := produceOne(t, b, 9, "pm", p, encodeBatch(t, 0, -1, -1, []byte("old"))); pr.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(pr.ErrorCode))
		}
	}
	meta := filepath.Join(dir, "pm-0", partitionMetadataFile)
	data, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := parsePartitionMetadata(data); err != nil || id != b.srv.cluster.topic("pm").ID {
		t.Fatalf("partition.metadata %q: %v", data, err)
	}
	b.stop()
	// Partition 0's directory now claims another topic id.
	if err := os.WriteFile(meta, encodePartitionMetadata([16]byte{9, 9, 9}), 0o644); err != nil {
		t.Fatal(err)
	}
	b = startBroker(t, dir, nil)
	if got := listOffsetT(t, b, "pm", 0, -1); got != 0 {
		t.Fatalf("partition 0 (stale dir) log end %d, want an empty log", got)
	}
	if got := listOffsetT(t, b, "pm", 1, -1); got != 1 {
		t.Fatalf("partition 1 log end %d, want its record kept", got)
	}
	data, err = os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := parsePartitionMetadata(data); err != nil || id != b.srv.cluster.topic("pm").ID {
		t.Fatalf("rewritten partition.metadata %q: %v", data, err)
	}
}
