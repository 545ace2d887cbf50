package hotpath

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Error is a rejection of a record set. Code is the Kafka error code the
// client must see for the partition; errors.Is(err, kerr.CorruptMessage) and
// friends work through Unwrap.
//
// Batch is the index of the offending batch in the record set (-1 when the
// rejection concerns the set as a whole). Records carries Kafka's per-record
// errors (ProduceResponse RecordErrors, "batch_index" on the wire, which is
// the index of the record inside the batch) when Kafka reports them.
type Error struct {
	Code    int16
	Batch   int
	Records []RecordError
	Msg     string
}

// RecordError is one entry of a Produce response's per-record errors.
type RecordError struct {
	Index   int32 // index of the record within its batch
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: batch %d: %s", kerr.ErrorForCode(e.Code).(*kerr.Error).Message, e.Batch, e.Msg)
}

// Unwrap returns the kerr error for Code.
func (e *Error) Unwrap() error { return kerr.ErrorForCode(e.Code) }

// Kafka error codes used by the hot path (values from the Kafka protocol;
// kerr holds the same numbers).
const (
	codeCorruptMessage              = int16(2)  // kerr.CorruptMessage
	codeRequestTimedOut             = int16(7)  // kerr.RequestTimedOut
	codeMessageTooLarge             = int16(10) // kerr.MessageTooLarge
	codeInvalidTimestamp            = int16(32) // kerr.InvalidTimestamp
	codeUnsupportedForMessageFormat = int16(43) // kerr.UnsupportedForMessageFormat
	codeUnsupportedCompressionType  = int16(76) // kerr.UnsupportedCompressionType
	codeInvalidRecord               = int16(87) // kerr.InvalidRecord
)

func rejectf(code int16, batch int, format string, args ...any) *Error {
	return &Error{Code: code, Batch: batch, Msg: fmt.Sprintf(format, args...)}
}
