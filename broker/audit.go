package broker

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The audit log: one record per admin mutation a client asked for
// (validate-only requests change nothing and are not recorded), with
// the principal, the client's address, the listener, the resource and
// the outcome (OK or Kafka's error name). Config.AuditLog set: JSON lines
// to that writer; unset: the same records on the main log at INFO
// ("audit").
//
// Recorded: CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
// IncrementalAlterConfigs, CreateAcls, DeleteAcls,
// AlterUserScramCredentials, DeleteGroups, and the cluster link's
// state-changing requests (link_admin.go: never a source config value),
// and mirror writer registrations (a pusher taking over a mirror topic's
// partitions with a new writer epoch, one record per topic).

// auditLogger is the logger audit records go to.
func (s *Server) auditLogger() *slog.Logger {
	if s.audit != nil {
		return s.audit
	}
	return s.log
}

// auditRecord records one admin mutation: action ("create topic"), the
// resource's type and name, and the Kafka error code of its outcome.
// args are extra attributes (never a secret).
func (s *Server) auditRecord(r *Request, action, resourceType, resource string, code int16, args ...any) {
	outcome := "OK"
	if code != 0 {
		outcome = codeName(code)
	}
	attrs := []any{"action", action, "resource_type", resourceType, "resource", auditString(resource),
		"principal", r.Principal, "client", clientOf(r).remoteString(), "client_id", auditString(r.ClientID), "outcome", outcome}
	if r.Listener != nil {
		attrs = append(attrs, "listener", r.Listener.Name)
	}
	s.auditLogger().Log(context.Background(), slog.LevelInfo, "audit", append(attrs, args...)...)
}

// configNames are the names an AlterConfigs resource sets (values are
// left out: a broker config may be a secret).
func configNames(cs []kmsg.AlterConfigsRequestResourceConfig) []string {
	out := make([]string, len(cs))
	for i := range cs {
		out[i] = cs[i].Name
	}
	return out
}

// configNamesIncremental are the "op:name" changes of an
// IncrementalAlterConfigs resource, values left out.
func configNamesIncremental(cs []kmsg.IncrementalAlterConfigsRequestResourceConfig) []string {
	out := make([]string, len(cs))
	for i := range cs {
		out[i] = cs[i].Op.String() + ":" + cs[i].Name
	}
	return out
}

// auditString keeps a client's string whole up to 1000 bytes (topic
// names are at most 249; the JSON encoder escapes control characters).
func auditString(s string) string {
	if len(s) > 1000 {
		return s[:1000] + "..."
	}
	return s
}

// auditRegistration records a mirror writer registration of one topic
// (DeleteRecords with the mirror tag and RegisterWriterEpoch): the epoch
// assigned, the writer id, and the first partition error as the outcome.
func (s *Server) auditRegistration(r *Request, t *kmsg.DeleteRecordsResponseTopic, w mirrorWriter) {
	var code int16
	for _, p := range t.Partitions {
		if p.ErrorCode != 0 {
			code = p.ErrorCode
			break
		}
	}
	id, _ := w.ID.MarshalText()
	s.auditRecord(r, "register mirror writer", "TOPIC", t.Topic, code, "writer_epoch", w.Epoch, "writer_id", string(id), "partitions", len(t.Partitions))
}
