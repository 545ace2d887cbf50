package admin

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/client"
)

// Refused is a broker's refusal of an admin request: Kafka's error code,
// its name (TOPIC_AUTHORIZATION_FAILED) and the broker's message, if any.
type Refused struct {
	Resource string // what was refused: "topic demo", "group g1"
	Code     int16
	Name     string
	Message  string
}

func (e *Refused) Error() string {
	s := fmt.Sprintf("%s: %s (error code %d)", e.Resource, e.Name, e.Code)
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// IsRefused reports whether err is (or wraps) a broker's refusal, or a
// refusal Kafka's tools make themselves (ErrGroupActive).
func IsRefused(err error) bool {
	var r *Refused
	return errors.As(err, &r) || errors.Is(err, ErrGroupActive)
}

// refusal returns a *Refused for a non-zero error code, nil for 0.
func refusal(resource string, code int16, msg *string) error {
	if code == 0 {
		return nil
	}
	r := &Refused{Resource: resource, Code: code, Name: ErrorName(code)}
	if msg != nil && *msg != "" {
		r.Message = *msg
	}
	return r
}

// ErrorName is Kafka's name of an error code (UNKNOWN_SERVER_ERROR for
// codes franz-go does not know, "NONE" for 0).
func ErrorName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &ke) {
		return ke.Message
	}
	return fmt.Sprintf("UNKNOWN_ERROR_%d", code)
}

// asRefused turns an error wrapping a Kafka error code (the client
// package's answers) into a *Refused; other errors are returned as they
// are.
func asRefused(resource string, err error) error {
	var ke *kerr.Error
	if err == nil || !errors.As(err, &ke) {
		return err
	}
	r := &Refused{Resource: resource, Code: ke.Code, Name: ke.Message}
	var ae *client.AlterError
	if errors.As(err, &ae) {
		r.Message = ae.Message
	}
	return r
}
