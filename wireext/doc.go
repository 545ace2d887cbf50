// Package wireext owns the bytes of Verbatim's Kafka protocol extensions
// (docs/protocol.md): the values of the tagged field MirrorTag in Produce
// (request level: MirrorProduce; partition level: MirrorPartition),
// DeleteRecords (request level: MirrorProduce, the log-start forward and
// the writer registration of a pusher; request partition level:
// MirrorStartEpoch, the source's leader epoch at the forwarded log start;
// response partition level: MirrorWriterEpoch, the writer epoch a
// registration was assigned) and
// CreateTopics (topic entry: MirrorTopicID), the ApiVersions
// feature names and versions that advertise them, and the walker of a
// flexible-version tagged-field section (Tags) that the broker's request
// header, the hot path's Produce decoder and these values share.
//
// Each value is a typed struct in franz-go kmsg's style: AppendTo(dst)
// appends its encoding, ReadFrom(b) decodes it. Decoding never allocates
// and aliases nothing, so the hot path's Produce decoder calls it per
// partition. Encoding is canonical (minimal varints, tags ascending,
// tagged fields at their default omitted, no unknown tags), and for every
// value x, ReadFrom(AppendTo(x)) gives x back; bytes in canonical form
// re-encode to themselves. ReadFrom skips unknown tags and, as Verbatim
// has always done, ignores bytes after a Produce or DeleteRecords value's
// tag section (MirrorTopicID, MirrorWriterEpoch and MirrorStartEpoch
// values must end with their tag section).
//
// The errors name the field and MirrorTag; callers wrap them into their
// protocol error (a malformed Produce or DeleteRecords value closes the
// connection, a malformed MirrorTopicID is INVALID_REQUEST for its topic).
//
// It must not import the broker, the hot path, kmsg or anything outside the
// standard library: it is the leaf both ends of the wire (broker, pusher,
// benchmarks) share.
package wireext
