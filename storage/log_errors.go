package storage

import (
	"errors"
	"syscall"
)

// Errors returned by Log. Each maps to one Kafka error code in the broker;
// the mapping is given in each comment. Errors are wrapped with detail, so
// test them with errors.Is.
var (
	// ErrOffline: an fsync (or another write that cannot be undone) failed;
	// the partition refuses every operation until it is reopened, which
	// re-verifies the files from disk. Kafka: KAFKA_STORAGE_ERROR.
	ErrOffline = errors.New("storage: partition offline after an I/O error")

	// ErrClosed: the Log was closed. Kafka: NOT_LEADER_OR_FOLLOWER.
	ErrClosed = errors.New("storage: log closed")

	// ErrNoSpace: a write failed with ENOSPC. Nothing of the append is in
	// the log; a later append works once space is back. Kafka:
	// KAFKA_STORAGE_ERROR.
	ErrNoSpace = errors.New("storage: no space left on device")

	// ErrWrite: a write failed for another reason (EIO, short write) and
	// was undone; nothing of the append is in the log. Kafka:
	// KAFKA_STORAGE_ERROR.
	ErrWrite = errors.New("storage: write failed")

	// ErrCorruptBatch: the record set is not a sequence of whole v2 batches
	// (bad length, header too short, offsets not increasing inside the
	// set). Kafka: CORRUPT_MESSAGE.
	ErrCorruptBatch = errors.New("storage: malformed record set")

	// ErrUnsupportedMagic: a batch has magic 0 or 1 (or unknown). Verbatim
	// stores only v2 batches. Kafka: UNSUPPORTED_FOR_MESSAGE_FORMAT.
	ErrUnsupportedMagic = errors.New("storage: only magic 2 record batches are supported")

	// ErrOffsetBelowLogEnd: a verbatim append starts below the log end and
	// is not an identical retry of stored batches. Kafka (Verbatim's mirror
	// produce): INVALID_PRODUCE_OFFSET style refusal; the broker maps it.
	ErrOffsetBelowLogEnd = errors.New("storage: batch offset below the log end and not identical to the stored batch")

	// ErrOffsetOutOfRange: a read or truncation outside [LogStartOffset,
	// LogEndOffset]. Kafka: OFFSET_OUT_OF_RANGE.
	ErrOffsetOutOfRange = errors.New("storage: offset out of range")

	// ErrCorruptLog: the stored log is inconsistent (found while reading).
	// Kafka: KAFKA_STORAGE_ERROR / CORRUPT_MESSAGE.
	ErrCorruptLog = errors.New("storage: corrupt log segment")

	// ErrRecordSetTooLarge: one batch is larger than a segment can hold.
	// Kafka: RECORD_LIST_TOO_LARGE.
	ErrRecordSetTooLarge = errors.New("storage: batch larger than the segment size")
)

func isNoSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }
