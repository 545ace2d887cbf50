package broker

// Failure logging. Every refused input is logged at WARN and every storage
// error at ERROR, once, by the handler that knows the topic, the partition
// and the client (client id and remote address); layers below (storage,
// the hot path) return errors and never log them. Lines go through one
// lograte.Limiter per Server, keyed by kind (which includes the Kafka
// code), topic and partition: the topics are ones that exist (a refusal of
// an unknown topic is routine and logged at DEBUG without its name in the
// key), so the keys are bounded by the broker's partitions, and lograte caps
// them anyway. A flood of failures therefore writes a few lines per key and
// interval; the next line let through carries "suppressed", the number held
// back.
//
// What is routine is logged at DEBUG: answers a client handles by
// refreshing metadata or retrying (NOT_LEADER_OR_FOLLOWER,
// UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID, LEADER_NOT_AVAILABLE,
// FENCED/UNKNOWN_LEADER_EPOCH, NOT_ENOUGH_REPLICAS while a transaction
// completes, REQUEST_TIMED_OUT, CONCURRENT_TRANSACTIONS).

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/coordlog"
	"github.com/verbatim-kafka/verbatim/groupcoord"
	"github.com/verbatim-kafka/verbatim/internal/lograte"
)

// Rate of failure lines: faultBurst lines per key in every faultInterval.
const (
	faultInterval = 10 * time.Second
	faultBurst    = 3
)

// clientInfo names the client of a request in log lines.
type clientInfo struct {
	id     string
	remote net.Addr
}

func clientOf(r *Request) clientInfo { return clientInfo{id: r.ClientID, remote: r.Remote} }

func (c clientInfo) remoteString() string {
	if c.remote == nil {
		return ""
	}
	return c.remote.String()
}

// faultKey is the limiter key of a failure line.
func faultKey(kind, topic string, partition int32) string {
	return kind + "\x00" + topic + "\x00" + strconv.Itoa(int(partition))
}

// logFault writes one failure line for topic/partition (partition -1: the
// whole topic) through the Server's limiter. args are extra attributes.
func (s *Server) logFault(level slog.Level, kind, msg, topic string, partition int32, c clientInfo, args ...any) {
	key := faultKey(kind, topic, partition)
	if level < slog.LevelWarn {
		key = kind // routine: the topic may be any name a client sent
	}
	s.logFaultKey(level, key, msg, topic, partition, c, args...)
}

// logFaultKey is logFault under a key of the caller's (one that holds no
// name a client chose freely, e.g. of a topic that does not exist).
func (s *Server) logFaultKey(level slog.Level, key, msg, topic string, partition int32, c clientInfo, args ...any) {
	if !s.log.Enabled(context.Background(), level) {
		return
	}
	attrs := make([]any, 0, 8+len(args))
	attrs = append(attrs, "topic", topic)
	if partition >= 0 {
		attrs = append(attrs, "partition", partition)
	}
	if c.remote != nil || c.id != "" { // background work has no client
		attrs = append(attrs, "client_id", c.id, "remote", c.remoteString())
	}
	attrs = append(attrs, args...)
	s.faults.Log(s.log, level, key, msg, attrs...)
}

// codeLevel classifies a Kafka error code answered for a data-plane
// operation: storage errors (and errors of our own) are ERROR, routine
// answers DEBUG, anything else refuses the client's input: WARN.
func codeLevel(code int16) slog.Level {
	switch code {
	case kerr.KafkaStorageError.Code, kerr.UnknownServerError.Code:
		return slog.LevelError
	case kerr.NotLeaderForPartition.Code, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicID.Code,
		kerr.LeaderNotAvailable.Code, kerr.FencedLeaderEpoch.Code, kerr.UnknownLeaderEpoch.Code,
		kerr.NotEnoughReplicas.Code, kerr.RequestTimedOut.Code, kerr.ConcurrentTransactions.Code:
		return slog.LevelDebug
	}
	return slog.LevelWarn
}

// codeName is the Kafka name of code, for log lines.
func codeName(code int16) string {
	if e := kerr.ErrorForCode(code); e != nil {
		if ke, ok := e.(*kerr.Error); ok {
			return ke.Message
		}
	}
	return strconv.Itoa(int(code))
}

// logDataFailure logs a data-plane partition failure (produce, delete
// records, list offsets) answered with code: what (the API) was refused or
// failed, and why (err, or the code alone when err is nil).
func (s *Server) logDataFailure(what, topic string, partition int32, code int16, err error, c clientInfo, args ...any) {
	level := codeLevel(code)
	if !s.log.Enabled(context.Background(), level) {
		return
	}
	msg := what + " refused"
	if level == slog.LevelError {
		msg = what + " failed"
	}
	args = append(args, "error_code", codeName(code))
	if err != nil {
		args = append(args, "err", err.Error())
	}
	s.logFault(level, what+"/"+strconv.Itoa(int(code)), msg, topic, partition, c, args...)
}

// logAdminFailure logs a failed or refused topic operation (CreateTopics,
// CreatePartitions) answered with code: storage errors at ERROR, an
// existing topic (tools create topics idempotently) at DEBUG, other
// refusals at WARN. The key holds the code, not the topic: the name is
// the client's and the topic may not exist.
func (s *Server) logAdminFailure(what, topic string, code int16, err error, c clientInfo) {
	level := codeLevel(code)
	msg := what + " refused"
	switch {
	case level == slog.LevelError:
		msg = what + " failed"
	case code == kerr.TopicAlreadyExists.Code:
		level = slog.LevelDebug
	}
	args := []any{"error_code", codeName(code)}
	if err != nil {
		args = append(args, "err", err.Error())
	}
	s.logFaultKey(level, what+"/"+strconv.Itoa(int(code)), msg, topic, -1, c, args...)
}

// logCommitFailure logs an offset commit (what: the API) whose offsets
// record could not be written: one line for the request, since its
// offsets are one record in the group's __consumer_offsets partition.
func (s *Server) logCommitFailure(what, group string, commits []groupcoord.OffsetCommit, c clientInfo) {
	for i := range commits {
		if oc := &commits[i]; oc.Err != nil {
			// The level of the write's own error: a storage error is
			// ERROR, a closed log (shutdown) DEBUG, a fenced producer
			// a refusal.
			code, _ := dataErrorToKafka(oc.Err)
			level := codeLevel(code)
			if errors.Is(oc.Err, coordlog.ErrFenced) {
				level = slog.LevelWarn
			}
			s.logFault(level, what, what+": offsets not stored", offsetsTopic, s.groups.PartitionFor(group), c,
				"group", group, "error_code", codeName(oc.Code), "err", oc.Err.Error(), "partitions", len(commits))
			return
		}
	}
}

// limitedHandler is the coordinators' log handler: their WARN and ERROR
// records (write failures, mostly) go through the Server's limiter too,
// keyed by message (a constant of their code) and partition attribute.
type limitedHandler struct {
	slog.Handler
	lim *lograte.Limiter
}

func (h limitedHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return h.Handler.Handle(ctx, r)
	}
	key := "coordinator\x00" + r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "partition" {
			key += "\x00" + a.Value.String()
			return false
		}
		return true
	})
	ok, n := h.lim.Allow(key)
	if !ok {
		return nil
	}
	if n > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("suppressed", n))
	}
	return h.Handler.Handle(ctx, r)
}

func (h limitedHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return limitedHandler{h.Handler.WithAttrs(as), h.lim}
}

func (h limitedHandler) WithGroup(name string) slog.Handler {
	return limitedHandler{h.Handler.WithGroup(name), h.lim}
}
