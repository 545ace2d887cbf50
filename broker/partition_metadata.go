package broker

// partition.metadata (owner: the reassignment work): Kafka's file in each
// partition directory naming the topic id the log belongs to (KIP-516):
//
//	version: 0
//	topic_id: <the topic id in Kafka's Uuid text form>
//
// It is written when the partition's log is created (and into a directory
// an older build made without it) and checked before the log opens: a
// directory whose file names another topic id holds a topic of the same
// name that was deleted (and created again) while this broker did not see
// it, so it is removed and the log starts empty, never serving the old
// records as the new topic's.

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

const partitionMetadataFile = "partition.metadata"

// encodePartitionMetadata is the file's content for a topic id.
func encodePartitionMetadata(id [16]byte) []byte {
	return []byte("version: 0\ntopic_id: " + clustermeta.FormatUUID(id) + "\n")
}

// parsePartitionMetadata reads the file's content: version 0 and the
// topic id (Kafka's PartitionMetadataFile reader).
func parsePartitionMetadata(data []byte) ([16]byte, error) {
	var id [16]byte
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) != 2 {
		return id, fmt.Errorf("%s: %d lines, want 2", partitionMetadataFile, len(lines))
	}
	v, ok := strings.CutPrefix(lines[0], "version: ")
	if !ok {
		return id, fmt.Errorf("%s: no version line", partitionMetadataFile)
	}
	if n, err := strconv.Atoi(v); err != nil || n != 0 {
		return id, fmt.Errorf("%s: unsupported version %q", partitionMetadataFile, v)
	}
	t, ok := strings.CutPrefix(lines[1], "topic_id: ")
	if !ok {
		return id, fmt.Errorf("%s: no topic_id line", partitionMetadataFile)
	}
	return clustermeta.ParseUUID(strings.TrimSpace(t))
}

// checkPartitionMetadata runs before p's log opens: a directory whose
// partition.metadata names another topic id is removed (the log then
// starts empty). A missing or unreadable file keeps the directory (made
// by a build without the file; writePartitionMetadata adds it).
func (s *Server) checkPartitionMetadata(p *Partition) {
	data, err := readFile(s.fs, path.Join(p.Dir(), partitionMetadataFile))
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("partition.metadata not read", "topic", p.Topic.Name, "partition", p.Index, "err", err)
		}
		return
	}
	id, err := parsePartitionMetadata(data)
	if err != nil {
		s.log.Warn("partition.metadata not readable; the log is kept", "topic", p.Topic.Name, "partition", p.Index, "err", err)
		return
	}
	if id == p.Topic.ID {
		return
	}
	s.log.Warn("partition directory of another topic of the same name (deleted while this broker did not see it): removed, the log starts empty",
		"topic", p.Topic.Name, "partition", p.Index, "dir_topic_id", clustermeta.FormatUUID(id), "topic_id", clustermeta.FormatUUID(p.Topic.ID))
	s.cluster.removePartitionDir(p, id)
	if err := s.fs.SyncDir("."); err != nil {
		s.log.Warn("syncing data dir after removing a stale partition dir", "err", err)
	}
}

// writePartitionMetadata writes p's partition.metadata unless it is
// there with p's topic id.
func (s *Server) writePartitionMetadata(p *Partition) error {
	want := encodePartitionMetadata(p.Topic.ID)
	if data, err := readFile(s.fs, path.Join(p.Dir(), partitionMetadataFile)); err == nil {
		if id, err := parsePartitionMetadata(data); err == nil && id == p.Topic.ID {
			return nil
		}
	}
	return writeFileAtomic(s.fs, p.Dir(), partitionMetadataFile, want)
}
