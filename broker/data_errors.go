package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/hotpath"
	"github.com/verbatim-kafka/verbatim/storage"
)

// dataErrorToKafka is errorToKafka for the data plane: it maps the errors
// of storage and the hot path to Kafka codes (one place for all of them)
// and leaves everything else to errorToKafka. The message is the error
// text, which names the offsets, sequences or limits involved.
func dataErrorToKafka(err error) (int16, string) {
	if err == nil {
		return 0, ""
	}
	var ke *kafkaError
	if errors.As(err, &ke) {
		return ke.err.Code, ke.msg
	}
	var he *hotpath.Error
	if errors.As(err, &he) {
		return he.Code, he.Msg
	}
	var code *kerr.Error
	switch {
	case errors.Is(err, storage.ErrClosed):
		// The log was closed under the request (topic deleted or broker
		// stopping): the client refreshes metadata and retries.
		code = kerr.NotLeaderForPartition
	case errors.Is(err, storage.ErrOffline), errors.Is(err, storage.ErrNoSpace),
		errors.Is(err, storage.ErrWrite), errors.Is(err, storage.ErrCorruptLog):
		code = kerr.KafkaStorageError
	case errors.Is(err, storage.ErrCorruptBatch):
		code = kerr.CorruptMessage
	case errors.Is(err, storage.ErrUnsupportedMagic):
		code = kerr.UnsupportedForMessageFormat
	case errors.Is(err, storage.ErrOffsetBelowLogEnd):
		code = kerr.InvalidRecord
	case errors.Is(err, storage.ErrOffsetOutOfRange):
		code = kerr.OffsetOutOfRange
	case errors.Is(err, storage.ErrRecordSetTooLarge):
		code = kerr.RecordListTooLarge
	case errors.Is(err, storage.ErrOutOfOrderSequence):
		code = kerr.OutOfOrderSequenceNumber
	case errors.Is(err, storage.ErrInvalidProducerEpoch):
		code = kerr.InvalidProducerEpoch
	case errors.Is(err, storage.ErrInvalidTxnState):
		code = kerr.InvalidTxnState
	case errors.Is(err, storage.ErrTransactionCoordinatorFenced):
		code = kerr.TransactionCoordinatorFenced
	case errors.Is(err, storage.ErrUnsupportedControlType), errors.Is(err, storage.ErrMalformedControl):
		code = kerr.InvalidRecord
	default:
		c, m := errorToKafka(err)
		if m == nil {
			return c, ""
		}
		return c, *m
	}
	return code.Code, err.Error()
}
