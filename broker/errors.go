package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
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

// errorToKafka is the one boundary between internal errors and Kafka error
// codes: every handler turns the error of a topic or partition operation
// into (code, message) here, so a code never depends on where an error
// came from. nil maps to (0, nil). The message is the internal error text,
// which names the topic, value or limit involved.
func errorToKafka(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	msg := err.Error()
	var ke *kafkaError
	if errors.As(err, &ke) {
		m := ke.msg
		return ke.err.Code, &m
	}
	var code *kerr.Error
	switch {
	case errors.Is(err, errTopicExists):
		code = kerr.TopicAlreadyExists
	case errors.Is(err, errUnknownTopic):
		code = kerr.UnknownTopicOrPartition
	case errors.Is(err, errInvalidTopic):
		code = kerr.InvalidTopicException
	case errors.Is(err, errInvalidPartitions):
		code = kerr.InvalidPartitions
	case errors.Is(err, errInvalidReplicas):
		code = kerr.InvalidReplicationFactor
	case errors.Is(err, errInvalidReplicaAsg):
		code = kerr.InvalidReplicaAssignment
	case errors.Is(err, errInvalidConfig):
		code = kerr.InvalidConfig
	case errors.Is(err, errPolicy):
		code = kerr.PolicyViolation
	case errors.Is(err, errStorage):
		code = kerr.KafkaStorageError
	default:
		var k *kerr.Error
		if errors.As(err, &k) {
			return k.Code, nil
		}
		code = kerr.UnknownServerError
	}
	return code.Code, stripSentinel(&msg)
}

// stripSentinel removes the "<sentinel>: " prefix our wrapped errors carry,
// so clients see Kafka-like messages.
func stripSentinel(msg *string) *string {
	if msg == nil {
		return nil
	}
	for _, s := range []error{errTopicExists, errUnknownTopic, errInvalidTopic, errInvalidPartitions, errInvalidReplicas,
		errInvalidReplicaAsg, errInvalidConfig, errPolicy, errStorage} {
		p := s.Error() + ": "
		if len(*msg) >= len(p) && (*msg)[:len(p)] == p {
			m := (*msg)[len(p):]
			return &m
		}
	}
	return msg
}
