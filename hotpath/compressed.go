package hotpath

import (
	"context"
	"errors"
	"io"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// walkCompressed decompresses a normal-mode compressed batch and walks
// every record, as Kafka's LogValidator does for a compressed batch
// (validateMessagesAndAssignOffsetsCompressed): record count, lengths
// (max.decompressed.message.bytes), in-place offsets, keys on compacted
// topics, timestamps (the reader checks the declared count). It streams through kbatch's RecordReader, with the
// decoder's working memory charged to o.Decode for the duration.
func walkCompressed(batch []byte, o *Options, codec kbatch.Codec, rs *recordStats) *Error {
	lim := kbatch.Limits{MaxRecordBytes: int64(o.Topic.MaxDecompressedRecordBytes), MaxBatchBytes: o.Topic.MaxDecompressedBatchBytes}
	rr, err := kbatch.NewRecordReader(batch, lim)
	if err != nil {
		return decodeError(err, codec)
	}
	defer rr.Close()
	if b := o.Decode; b != nil {
		ws := rr.WorkingSet()
		if ws > b.Limit() {
			return rejectf(codeMessageTooLarge, 0, "decompressing the %s records needs %d bytes of working memory, more than the broker's decode budget of %d bytes", codec, ws, b.Limit())
		}
		ctx := o.Ctx
		if ctx == nil {
			ctx = context.Background()
		}
		if err := b.Acquire(ctx, ws); err != nil {
			return rejectf(codeRequestTimedOut, 0, "waiting for decode memory: %v", err)
		}
		defer b.Release(ws)
	}
	chk := newRecordCheck(batch, o, true)
	for i := int32(0); ; i++ {
		info, err := rr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return decodeError(err, codec)
		}
		if e := chk.record(i, info.OffsetDelta, info.TimestampDelta, info.KeyLen < 0); e != nil {
			return e
		}
	}
	return chk.done(rs)
}

// decodeError maps a RecordReader error: the per-batch cap is
// MESSAGE_TOO_LARGE; everything else, an undecodable payload included, is
// INVALID_RECORD (Kafka 4.4 answers UNKNOWN_SERVER_ERROR for an undecodable
// stream; docs/compat.md says why we do not).
func decodeError(err error, codec kbatch.Codec) *Error {
	var le *kbatch.LimitError
	switch {
	case errors.As(err, &le) && errors.Is(err, kbatch.ErrBatchTooLarge):
		return rejectf(codeMessageTooLarge, 0, "the %s records decompress to more than %d bytes, the topic's max.decompressed.batch.bytes", codec, le.Limit)
	case errors.As(err, &le):
		// Kafka's DefaultRecord.readFrom message, word for word.
		return rejectf(codeInvalidRecord, 0, "Invalid record size: %d exceeds the configured maximum record size of %d.", le.Size, le.Limit)
	case errors.Is(err, kbatch.ErrUndecodable):
		return rejectf(codeInvalidRecord, 0, "cannot decompress the %s records: %v", codec, err)
	}
	return rejectf(codeInvalidRecord, 0, "%s records: %v", codec, err)
}
