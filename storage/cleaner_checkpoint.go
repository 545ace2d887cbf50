package storage

import (
	"fmt"
	"strconv"
)

// CleanerOffsetCheckpointFile records the cleaner's first dirty offset:
// everything below it has been cleaned at least once. It is Kafka's
// cleaner-offset-checkpoint format (version 0, "<topic> <partition>
// <offset>" entries); like the log-start-offset checkpoint, Verbatim keeps
// one per partition directory holding that partition's entry.
const CleanerOffsetCheckpointFile = "cleaner-offset-checkpoint"

// cleanerSwapFile is Verbatim's own record of the swap in progress, written
// before the swap's commit point: "0\n1\n<base> <end>\n", the base offset
// of the cleaned segment and the end (the next offset after the last of
// the segments it replaces). Recovery needs the end because the cleaned
// segment may end lower than the segments it replaces when their last
// records were dropped (Kafka then derives the end from the cleaned
// segment alone and would keep the old segments past it).
const cleanerSwapFile = "cleaner-swap-checkpoint"

func readCleanerCheckpoint(fs FS, dir, topic string, partition int32) (int64, error) {
	return readPartitionCheckpoint(fs, dir, CleanerOffsetCheckpointFile, topic, partition)
}

func writeCleanerCheckpoint(fs FS, dir, topic string, partition int32, offset int64) error {
	return writePartitionCheckpoint(fs, dir, CleanerOffsetCheckpointFile, topic, partition, offset)
}

func encodeSwapRecord(base, end int64) []byte {
	b := []byte("0\n1\n")
	b = strconv.AppendInt(b, base, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, end, 10)
	return append(b, '\n')
}

// decodeSwapRecord returns the base and end of the recorded swap.
func decodeSwapRecord(b []byte) (base, end int64, err error) {
	entries, err := parseCheckpoint(b, 0, 2)
	if err != nil {
		return 0, 0, err
	}
	if len(entries) != 1 {
		return 0, 0, fmt.Errorf("%w: %d swap entries, want 1", ErrCorruptCheckpoint, len(entries))
	}
	base, err1 := strconv.ParseInt(string(entries[0][0]), 10, 64)
	end, err2 := strconv.ParseInt(string(entries[0][1]), 10, 64)
	if err1 != nil || err2 != nil || base < 0 || end < base {
		return 0, 0, fmt.Errorf("%w: swap entry %q %q is not \"base end\"", ErrCorruptCheckpoint, entries[0][0], entries[0][1])
	}
	return base, end, nil
}
