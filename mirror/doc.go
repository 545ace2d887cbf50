// Package mirror is `verbatim mirror push` and `verbatim mirror stop`: the
// applications that copy topics from any Kafka source into Verbatim at
// their offsets and fail a mirror topic over.
//
// It owns:
//   - the per-partition copy (partition.go, fetch.go, produce.go): a state
//     machine that registers as the partition's writer, resumes from the
//     destination's log end, refuses a source that diverged
//     (OffsetForLeaderEpoch at the start, DivergingEpoch while copying),
//     follows the source's log start (forwarding the source's leader
//     epoch there, so EARLIEST answers alike where the source's first
//     batches are gone; read again from a new destination leader after
//     a leader change and forwarded again when it lacks them), and
//     writes whole source batches as
//     mirror produces, pipelined and retried. It takes its I/O as the
//     Source, Dest and Clock interfaces and knows nothing of flags or
//     output, so other drivers (a simulation, an in-broker link) can run
//     it; endpoints.go adapts it to real clusters;
//   - the pusher (push.go): options, one copy per partition, follow-mode
//     metadata refreshes, progress lines; topic admin (topics.go: create
//     topics and partitions like the source's, configs kept in sync);
//     consumer group offsets (groups.go);
//   - the requests that carry Verbatim's wire extensions, whose bytes
//     wireext encodes (wire.go), and the writer identity (writer.go);
//   - the stop (stop.go) and the exit-code errors (errors.go).
//
// It must not speak the Kafka protocol itself (package client does),
// decide anything for verify (which has its own expectations), or touch
// the broker's storage: everything it does goes over the wire.
package mirror
