package storage

import (
	"fmt"
	"strconv"
)

// The log-start-offset checkpoint uses Kafka's text checkpoint format
// (version line, entry count line, entries; parsed by parseCheckpoint and
// written by AtomicWriteFile, see epochcache_checkpoint.go), version 0, with
// entries "<topic> <partition> <offset>". Kafka keeps one such file per log
// directory; Verbatim keeps one per partition directory, holding that
// partition's single entry, under Kafka's file name.
const (
	LogStartOffsetCheckpointFile = "log-start-offset-checkpoint"
	logStartCheckpointVersion    = 0
)

// encodePartitionCheckpoint returns the bytes of a one-entry "topic
// partition offset" checkpoint (log start, recovery point, cleaner offset).
func encodePartitionCheckpoint(topic string, partition int32, offset int64) []byte {
	b := make([]byte, 0, 32+len(topic))
	b = strconv.AppendInt(b, logStartCheckpointVersion, 10)
	b = append(b, "\n1\n"...)
	b = append(b, topic...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(partition), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, offset, 10)
	return append(b, '\n')
}

// decodePartitionCheckpoint returns the offset recorded for topic/partition,
// or -1 when the checkpoint has no entry for it.
func decodePartitionCheckpoint(b []byte, topic string, partition int32) (int64, error) {
	entries, err := parseCheckpoint(b, logStartCheckpointVersion, 3)
	if err != nil {
		return -1, err
	}
	for i, e := range entries {
		p, err1 := strconv.ParseInt(string(e[1]), 10, 32)
		off, err2 := strconv.ParseInt(string(e[2]), 10, 64)
		if err1 != nil || err2 != nil || off < 0 {
			return -1, fmt.Errorf("%w: entry %d %q %q %q is not \"topic partition offset\"", ErrCorruptCheckpoint, i, e[0], e[1], e[2])
		}
		if string(e[0]) == topic && int32(p) == partition {
			return off, nil
		}
	}
	return -1, nil
}

// readPartitionCheckpoint returns the offset recorded for topic/partition
// in file, a checkpoint of the log-start-offset format in dir (the
// cleaner-offset and recovery-point checkpoints are too), or -1 when
// there is none: no file, or no entry for the partition.
func readPartitionCheckpoint(fs FS, dir, file, topic string, partition int32) (int64, error) {
	b, ok, err := readWholeFile(fs, dir+"/"+file)
	if err != nil || !ok {
		return -1, err
	}
	return decodePartitionCheckpoint(b, topic, partition)
}

// writePartitionCheckpoint replaces file in dir with a checkpoint of the
// log-start-offset format holding topic/partition's one entry.
func writePartitionCheckpoint(fs FS, dir, file, topic string, partition int32, offset int64) error {
	return AtomicWriteFile(fs, dir+"/"+file, encodePartitionCheckpoint(topic, partition, offset))
}

// readLogStartOffset returns the checkpointed log start offset in dir, or
// -1 when there is none.
func readLogStartOffset(fs FS, dir, topic string, partition int32) (int64, error) {
	return readPartitionCheckpoint(fs, dir, LogStartOffsetCheckpointFile, topic, partition)
}

func writeLogStartOffset(fs FS, dir, topic string, partition int32, offset int64) error {
	return writePartitionCheckpoint(fs, dir, LogStartOffsetCheckpointFile, topic, partition, offset)
}
