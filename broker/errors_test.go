package broker

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/hotpath"
	"github.com/verbatim-kafka/verbatim/storage"
)

// The data-plane mapping: every storage sentinel has its Kafka code and
// keeps the whole error text; hot-path and handler-made errors pass their
// own code and message; the rest falls through to the control-plane
// mapping (sentinel prefix stripped). The control-plane mapping does not
// know storage errors and sends no message with a bare kerr code.
func TestDataErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code *kerr.Error
		msg  string
	}{
		{storage.ErrClosed, kerr.NotLeaderForPartition, storage.ErrClosed.Error()},
		{storage.ErrOffline, kerr.KafkaStorageError, storage.ErrOffline.Error()},
		{storage.ErrNoSpace, kerr.KafkaStorageError, storage.ErrNoSpace.Error()},
		{storage.ErrWrite, kerr.KafkaStorageError, storage.ErrWrite.Error()},
		{storage.ErrCorruptLog, kerr.KafkaStorageError, storage.ErrCorruptLog.Error()},
		{storage.ErrCorruptBatch, kerr.CorruptMessage, storage.ErrCorruptBatch.Error()},
		{storage.ErrUnsupportedMagic, kerr.UnsupportedForMessageFormat, storage.ErrUnsupportedMagic.Error()},
		{storage.ErrOffsetBelowLogEnd, kerr.InvalidRecord, storage.ErrOffsetBelowLogEnd.Error()},
		{storage.ErrOffsetOutOfRange, kerr.OffsetOutOfRange, storage.ErrOffsetOutOfRange.Error()},
		{storage.ErrRecordSetTooLarge, kerr.RecordListTooLarge, storage.ErrRecordSetTooLarge.Error()},
		{storage.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber, storage.ErrOutOfOrderSequence.Error()},
		{storage.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch, storage.ErrInvalidProducerEpoch.Error()},
		{storage.ErrInvalidTxnState, kerr.InvalidTxnState, storage.ErrInvalidTxnState.Error()},
		{storage.ErrTransactionCoordinatorFenced, kerr.TransactionCoordinatorFenced, storage.ErrTransactionCoordinatorFenced.Error()},
		{storage.ErrUnsupportedControlType, kerr.InvalidRecord, storage.ErrUnsupportedControlType.Error()},
		{storage.ErrMalformedControl, kerr.InvalidRecord, storage.ErrMalformedControl.Error()},
		{fmt.Errorf("%w: partition 3", storage.ErrOffline), kerr.KafkaStorageError, storage.ErrOffline.Error() + ": partition 3"},
		// A storage sentinel wins over a control-plane one and keeps its prefix.
		{fmt.Errorf("%w: %w", errStorage, storage.ErrWrite), kerr.KafkaStorageError, errStorage.Error() + ": " + storage.ErrWrite.Error()},
		{&hotpath.Error{Code: kerr.InvalidTimestamp.Code, Msg: "ts"}, kerr.InvalidTimestamp, "ts"},
		{kafkaErr(kerr.OffsetOutOfRange, "expected 5"), kerr.OffsetOutOfRange, "expected 5"},
		{fmt.Errorf("%w: no such topic t", errUnknownTopic), kerr.UnknownTopicOrPartition, "no such topic t"},
		{kerr.NotController, kerr.NotController, ""},
		{errors.New("surprise"), kerr.UnknownServerError, "surprise"},
	} {
		code, msg := dataErrorToKafka(tc.err)
		if code != tc.code.Code || msg != tc.msg {
			t.Errorf("%v: (%d, %q), want (%d, %q)", tc.err, code, msg, tc.code.Code, tc.msg)
		}
	}
	if code, _ := dataErrorToKafka(nil); code != 0 {
		t.Errorf("nil: %d", code)
	}
	if code, msg := errorToKafka(storage.ErrClosed); code != kerr.UnknownServerError.Code || msg == nil || *msg != storage.ErrClosed.Error() {
		t.Errorf("control plane, storage error: %d %v", code, msg)
	}
	// A hot-path error unwraps to its kerr code; the control plane sends no message for it.
	if code, msg := errorToKafka(&hotpath.Error{Code: kerr.InvalidTimestamp.Code, Msg: "ts"}); code != kerr.InvalidTimestamp.Code || msg != nil {
		t.Errorf("control plane, hot-path error: %d %v", code, msg)
	}
	if code, msg := errorToKafka(fmt.Errorf("%w: x", errPolicy)); code != kerr.PolicyViolation.Code || msg == nil || *msg != "x" {
		t.Errorf("control plane, policy: %d %v", code, msg)
	}
}
