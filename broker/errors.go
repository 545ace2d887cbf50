package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/hotpath"
	"github.com/verbatim-kafka/verbatim/storage"
)

// kafkaError is an internal error that already is a Kafka error code with
// a message, for handlers that decide the code themselves.
type kafkaError struct {
	err *kerr.Error
	msg string
}

func (e *kafkaError) Error() string { return e.err.Message + ": " + e.msg }
func (e *kafkaError) Unwrap() error { return e.err }

// kafkaErr wraps code with a message that is sent to the client.
func kafkaErr(code *kerr.Error, msg string) error { return &kafkaError{err: code, msg: msg} }

// errorCodes is the one table from internal sentinel errors to Kafka
// codes, in match order. Data-plane entries (storage's errors) are used
// only by dataErrorToKafka and come first, so a storage error wins over a
// control-plane sentinel wrapping it; their message is the whole error
// text, which names the offsets, sequences or limits involved.
// Control-plane entries are used by both mappings; their message loses the
// "<sentinel>: " prefix our wrapped errors carry, so clients see Kafka-like
// messages.
var errorCodes = []struct {
	err  error
	code *kerr.Error
	data bool
}{
	// The log was closed under the request (topic deleted or broker
	// stopping): the client refreshes metadata and retries.
	{storage.ErrClosed, kerr.NotLeaderForPartition, true},
	// A stored batch a read had to decode and could not (Kafka 4.4:
	// INVALID_RECORD; UNKNOWN_SERVER_ERROR for an undecodable stream).
	{storage.ErrUndecodableBatch, kerr.InvalidRecord, true},
	{storage.ErrOffline, kerr.KafkaStorageError, true},
	{storage.ErrNoSpace, kerr.KafkaStorageError, true},
	{storage.ErrWrite, kerr.KafkaStorageError, true},
	{storage.ErrCorruptLog, kerr.KafkaStorageError, true},
	{storage.ErrCorruptBatch, kerr.CorruptMessage, true},
	{storage.ErrUnsupportedMagic, kerr.UnsupportedForMessageFormat, true},
	{storage.ErrOffsetBelowLogEnd, kerr.InvalidRecord, true},
	{storage.ErrOffsetOutOfRange, kerr.OffsetOutOfRange, true},
	{storage.ErrRecordSetTooLarge, kerr.RecordListTooLarge, true},
	{storage.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber, true},
	{storage.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch, true},
	{storage.ErrInvalidTxnState, kerr.InvalidTxnState, true},
	{storage.ErrTransactionCoordinatorFenced, kerr.TransactionCoordinatorFenced, true},
	{storage.ErrUnsupportedControlType, kerr.InvalidRecord, true},
	{storage.ErrMalformedControl, kerr.InvalidRecord, true},
	// A mirror's source leader epoch that contradicts the stored batches.
	{storage.ErrEpochInconsistent, kerr.PolicyViolation, true},

	{errTopicExists, kerr.TopicAlreadyExists, false},
	{errUnknownTopic, kerr.UnknownTopicOrPartition, false},
	{errInvalidTopic, kerr.InvalidTopicException, false},
	{errInvalidPartitions, kerr.InvalidPartitions, false},
	{errInvalidReplicas, kerr.InvalidReplicationFactor, false},
	{errInvalidReplicaAsg, kerr.InvalidReplicaAssignment, false},
	{errInvalidConfig, kerr.InvalidConfig, false},
	{errPolicy, kerr.PolicyViolation, false},
	{errStorage, kerr.KafkaStorageError, false},
}

// mapError is the one boundary between internal errors and Kafka error
// codes, so a code never depends on where an error came from. In order: an
// error that carries its code and message (kafkaError; on the data plane
// also hotpath.Error), the table, a bare *kerr.Error (no message), and
// UNKNOWN_SERVER_ERROR. hasMsg is false for nil and a bare kerr code.
func mapError(err error, data bool) (code int16, msg string, hasMsg bool) {
	if err == nil {
		return 0, "", false
	}
	var ke *kafkaError
	if errors.As(err, &ke) {
		return ke.err.Code, ke.msg, true
	}
	if data {
		var he *hotpath.Error
		if errors.As(err, &he) {
			return he.Code, he.Msg, true
		}
	}
	for _, e := range errorCodes {
		if (data || !e.data) && errors.Is(err, e.err) {
			if e.data {
				return e.code.Code, err.Error(), true
			}
			return e.code.Code, stripSentinel(err.Error()), true
		}
	}
	var k *kerr.Error
	if errors.As(err, &k) {
		return k.Code, "", false
	}
	return kerr.UnknownServerError.Code, stripSentinel(err.Error()), true
}

// errorToKafka maps the error of a control-plane topic or partition
// operation (mapError); the message is nil when there is none.
func errorToKafka(err error) (int16, *string) {
	code, msg, ok := mapError(err, false)
	if !ok {
		return code, nil
	}
	return code, &msg
}

// dataErrorToKafka maps the error of a data-plane operation (storage and
// the hot path included; mapError); the message is "" when there is none.
func dataErrorToKafka(err error) (int16, string) {
	code, msg, _ := mapError(err, true)
	return code, msg
}

// stripSentinel removes the first control-plane sentinel's "text: " prefix
// msg starts with.
func stripSentinel(msg string) string {
	for _, e := range errorCodes {
		if e.data {
			continue
		}
		if p := e.err.Error() + ": "; len(msg) >= len(p) && msg[:len(p)] == p {
			return msg[len(p):]
		}
	}
	return msg
}
