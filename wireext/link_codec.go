package wireext

// The codecs of the link admin requests and responses (link.go,
// docs/protocol.md "Cluster link APIs"): version 0, flexible. Fields are
// encoded in their declaration order; every struct ends with a tag
// section (empty when encoded, unknown tags skipped when decoded; the one
// tagged field so far is DescribeMirrorsRequest's LeaderOnly).
// Identifiers (names, topics, states, config keys and values) are compact
// strings; optional text (error messages, reasons, patterns, KeepTopic,
// KeptIn, SourceClusterID, the link of a request that may name none) is a
// compact nullable string, "" encoded as null; lists are compact arrays
// (empty encoded as the empty array, decoded as nil); SourceConfig is a
// compact array of {key, value, tags} sorted by key. ReadFrom decodes a
// whole message (bytes after it are malformed); on error the value is
// left zero.

import "fmt"

// Lower bounds of the encoded size of repeated structs, which bound the
// counts a decoder believes.
const (
	minLinkConfig     = 24
	minLinkDesc       = 2 + 1 + minLinkConfig + 16 + 5
	minLinkTopic      = 4
	minTopicResult    = 6
	minTruncatedPart  = 26
	minPartitionState = 69
)

// readMessage decodes b into *m with read, all or nothing.
func readMessage[T any](m *T, b []byte, name string, read func(*T, *reader)) error {
	return readTaggedMessage(m, b, name, read, nil)
}

// readTaggedMessage is readMessage for a message with tagged fields of
// its own: field is called with each field of the message's tag section
// (it ignores tags it does not know, and may fail r).
func readTaggedMessage[T any](m *T, b []byte, name string, read func(*T, *reader), field func(*T, uint32, []byte, *reader)) error {
	var zero, v T
	r := reader{b: b}
	read(&v, &r)
	if field == nil {
		r.tags(name)
	} else {
		r.taggedFields(name, func(tag uint32, val []byte) { field(&v, tag, val, &r) })
	}
	if err := r.end(name); err != nil {
		*m = zero
		return err
	}
	*m = v
	return nil
}

// The request-level outcome every response starts with.
func appendOutcome(dst []byte, throttleMs int32, code int16, msg string) []byte {
	dst = appendInt32(dst, throttleMs)
	dst = appendInt16(dst, code)
	return appendNullableString(dst, msg)
}

func readOutcome(r *reader, throttleMs *int32, code *int16, msg *string) {
	*throttleMs = r.int32("ThrottleMs")
	*code = r.int16("ErrorCode")
	*msg = r.nullableString("ErrorMessage")
}

// LinkConfig

func (c *LinkConfig) appendTo(dst []byte) []byte {
	dst = appendString(dst, c.Name)
	dst = appendString(dst, c.SourceBootstrap)
	dst = appendStringMap(dst, c.SourceConfig)
	dst = appendNullableString(dst, c.Topics)
	dst = appendNullableString(dst, c.Exclude)
	dst = appendNullableString(dst, c.Groups)
	dst = appendBool(dst, c.SyncConfigs)
	dst = appendInt64(dst, c.SyncIntervalMs)
	dst = appendInt64(dst, c.ThrottleBytesPerSec)
	return appendNoTags(dst)
}

func (c *LinkConfig) read(r *reader) {
	c.Name = r.string("LinkConfig.Name")
	c.SourceBootstrap = r.string("LinkConfig.SourceBootstrap")
	c.SourceConfig = r.stringMap("LinkConfig.SourceConfig")
	c.Topics = r.nullableString("LinkConfig.Topics")
	c.Exclude = r.nullableString("LinkConfig.Exclude")
	c.Groups = r.nullableString("LinkConfig.Groups")
	c.SyncConfigs = r.bool("LinkConfig.SyncConfigs")
	c.SyncIntervalMs = r.int64("LinkConfig.SyncIntervalMs")
	c.ThrottleBytesPerSec = r.int64("LinkConfig.ThrottleBytesPerSec")
	r.tags("LinkConfig")
}

// AppendTo appends the encoded request body to dst.
func (m *CreateMirrorLinkRequest) AppendTo(dst []byte) []byte {
	dst = m.Link.appendTo(dst)
	dst = appendBool(dst, m.ValidateOnly)
	return appendNoTags(dst)
}

// ReadFrom decodes a request body.
func (m *CreateMirrorLinkRequest) ReadFrom(b []byte) error {
	return readMessage(m, b, "CreateMirrorLinkRequest", func(v *CreateMirrorLinkRequest, r *reader) {
		v.Link.read(r)
		v.ValidateOnly = r.bool("ValidateOnly")
	})
}

// AppendTo appends the encoded response body to dst.
func (m *CreateMirrorLinkResponse) AppendTo(dst []byte) []byte {
	return appendNoTags(appendOutcome(dst, m.ThrottleMs, m.ErrorCode, m.ErrorMessage))
}

// ReadFrom decodes a response body.
func (m *CreateMirrorLinkResponse) ReadFrom(b []byte) error {
	return readMessage(m, b, "CreateMirrorLinkResponse", func(v *CreateMirrorLinkResponse, r *reader) {
		readOutcome(r, &v.ThrottleMs, &v.ErrorCode, &v.ErrorMessage)
	})
}

// AppendTo appends the encoded request body to dst.
func (m *DeleteMirrorLinkRequest) AppendTo(dst []byte) []byte {
	dst = appendString(dst, m.Name)
	dst = appendBool(dst, m.Force)
	return appendNoTags(dst)
}

// ReadFrom decodes a request body.
func (m *DeleteMirrorLinkRequest) ReadFrom(b []byte) error {
	return readMessage(m, b, "DeleteMirrorLinkRequest", func(v *DeleteMirrorLinkRequest, r *reader) {
		v.Name = r.string("Name")
		v.Force = r.bool("Force")
	})
}

// AppendTo appends the encoded response body to dst.
func (m *DeleteMirrorLinkResponse) AppendTo(dst []byte) []byte {
	return appendNoTags(appendOutcome(dst, m.ThrottleMs, m.ErrorCode, m.ErrorMessage))
}

// ReadFrom decodes a response body.
func (m *DeleteMirrorLinkResponse) ReadFrom(b []byte) error {
	return readMessage(m, b, "DeleteMirrorLinkResponse", func(v *DeleteMirrorLinkResponse, r *reader) {
		readOutcome(r, &v.ThrottleMs, &v.ErrorCode, &v.ErrorMessage)
	})
}

// AppendTo appends the encoded request body to dst.
func (m *DescribeMirrorLinksRequest) AppendTo(dst []byte) []byte {
	return appendNoTags(appendStrings(dst, m.Names))
}

// ReadFrom decodes a request body.
func (m *DescribeMirrorLinksRequest) ReadFrom(b []byte) error {
	return readMessage(m, b, "DescribeMirrorLinksRequest", func(v *DescribeMirrorLinksRequest, r *reader) {
		v.Names = r.strings("Names")
	})
}

// AppendTo appends the encoded response body to dst.
func (m *DescribeMirrorLinksResponse) AppendTo(dst []byte) []byte {
	dst = appendOutcome(dst, m.ThrottleMs, m.ErrorCode, m.ErrorMessage)
	dst = appendArrayLen(dst, len(m.Links))
	for i := range m.Links {
		dst = m.Links[i].appendTo(dst)
	}
	return appendNoTags(dst)
}

// ReadFrom decodes a response body.
func (m *DescribeMirrorLinksResponse) ReadFrom(b []byte) error {
	return readMessage(m, b, "DescribeMirrorLinksResponse", func(v *DescribeMirrorLinksResponse, r *reader) {
		readOutcome(r, &v.ThrottleMs, &v.ErrorCode, &v.ErrorMessage)
		if n := r.arrayLen("Links", minLinkDesc); n > 0 {
			v.Links = make([]LinkDescription, n)
			for i := range v.Links {
				v.Links[i].read(r)
			}
		}
	})
}

func (d *LinkDescription) appendTo(dst []byte) []byte {
	dst = appendInt16(dst, d.ErrorCode)
	dst = appendNullableString(dst, d.ErrorMessage)
	dst = d.Config.appendTo(dst)
	dst = append(dst, d.LinkID[:]...)
	dst = appendNullableString(dst, d.SourceClusterID)
	dst = appendString(dst, d.State)
	dst = appendNullableString(dst, d.Reason)
	dst = appendArrayLen(dst, len(d.Topics))
	for _, t := range d.Topics {
		dst = appendString(dst, t.Topic)
		dst = appendString(dst, t.State)
		dst = appendNullableString(dst, t.Reason)
		dst = appendNoTags(dst)
	}
	return appendNoTags(dst)
}

func (d *LinkDescription) read(r *reader) {
	d.ErrorCode = r.int16("LinkDescription.ErrorCode")
	d.ErrorMessage = r.nullableString("LinkDescription.ErrorMessage")
	d.Config.read(r)
	d.LinkID = r.uuid("LinkDescription.LinkID")
	d.SourceClusterID = r.nullableString("LinkDescription.SourceClusterID")
	d.State = r.string("LinkDescription.State")
	d.Reason = r.nullableString("LinkDescription.Reason")
	if n := r.arrayLen("LinkDescription.Topics", minLinkTopic); n > 0 {
		d.Topics = make([]LinkTopic, n)
		for i := range d.Topics {
			t := &d.Topics[i]
			t.Topic = r.string("LinkTopic.Topic")
			t.State = r.string("LinkTopic.State")
			t.Reason = r.nullableString("LinkTopic.Reason")
			r.tags("LinkTopic")
		}
	}
	r.tags("LinkDescription")
}

// AppendTo appends the encoded request body to dst.
func (m *StartMirrorTopicsRequest) AppendTo(dst []byte) []byte {
	dst = appendString(dst, m.Link)
	dst = appendStrings(dst, m.Topics)
	dst = appendBool(dst, m.TruncateToCommon)
	dst = appendNullableString(dst, m.KeepTopic)
	return appendNoTags(dst)
}

// ReadFrom decodes a request body.
func (m *StartMirrorTopicsRequest) ReadFrom(b []byte) error {
	return readMessage(m, b, "StartMirrorTopicsRequest", func(v *StartMirrorTopicsRequest, r *reader) {
		v.Link = r.string("Link")
		v.Topics = r.strings("Topics")
		v.TruncateToCommon = r.bool("TruncateToCommon")
		v.KeepTopic = r.nullableString("KeepTopic")
	})
}

// The response of StartMirrorTopics, PauseMirrorTopics and
// TruncateMirrorTopics: the outcome, then one result per topic.
func appendTopicResults(dst []byte, throttleMs int32, code int16, msg string, ts []MirrorTopicResult) []byte {
	dst = appendOutcome(dst, throttleMs, code, msg)
	dst = appendArrayLen(dst, len(ts))
	for i := range ts {
		t := &ts[i]
		dst = appendString(dst, t.Topic)
		dst = appendInt16(dst, t.ErrorCode)
		dst = appendNullableString(dst, t.ErrorMessage)
		dst = appendArrayLen(dst, len(t.Partitions))
		for _, p := range t.Partitions {
			dst = appendInt32(dst, p.Partition)
			dst = appendInt64(dst, p.TruncatedTo)
			dst = appendInt32(dst, p.RemovedBatches)
			dst = appendInt64(dst, p.RemovedBytes)
			dst = appendNullableString(dst, p.KeptIn)
			dst = appendNoTags(dst)
		}
		dst = appendNoTags(dst)
	}
	return appendNoTags(dst)
}

func readTopicResults(r *reader, throttleMs *int32, code *int16, msg *string) []MirrorTopicResult {
	readOutcome(r, throttleMs, code, msg)
	n := r.arrayLen("Topics", minTopicResult)
	if n == 0 {
		return nil
	}
	ts := make([]MirrorTopicResult, n)
	for i := range ts {
		t := &ts[i]
		t.Topic = r.string("MirrorTopicResult.Topic")
		t.ErrorCode = r.int16("MirrorTopicResult.ErrorCode")
		t.ErrorMessage = r.nullableString("MirrorTopicResult.ErrorMessage")
		if k := r.arrayLen("MirrorTopicResult.Partitions", minTruncatedPart); k > 0 {
			t.Partitions = make([]TruncatedPartition, k)
			for j := range t.Partitions {
				p := &t.Partitions[j]
				p.Partition = r.int32("TruncatedPartition.Partition")
				p.TruncatedTo = r.int64("TruncatedPartition.TruncatedTo")
				p.RemovedBatches = r.int32("TruncatedPartition.RemovedBatches")
				p.RemovedBytes = r.int64("TruncatedPartition.RemovedBytes")
				p.KeptIn = r.nullableString("TruncatedPartition.KeptIn")
				r.tags("TruncatedPartition")
			}
		}
		r.tags("MirrorTopicResult")
	}
	return ts
}

// AppendTo appends the encoded response body to dst.
func (m *StartMirrorTopicsResponse) AppendTo(dst []byte) []byte {
	return appendTopicResults(dst, m.ThrottleMs, m.ErrorCode, m.ErrorMessage, m.Topics)
}

// ReadFrom decodes a response body.
func (m *StartMirrorTopicsResponse) ReadFrom(b []byte) error {
	return readMessage(m, b, "StartMirrorTopicsResponse", func(v *StartMirrorTopicsResponse, r *reader) {
		v.Topics = readTopicResults(r, &v.ThrottleMs, &v.ErrorCode, &v.ErrorMessage)
	})
}

// AppendTo appends the encoded request body to dst.
func (m *PauseMirrorTopicsRequest) AppendTo(dst []byte) []byte {
	dst = appendNullableString(dst, m.Link)
	dst = appendStrings(dst, m.Topics)
	dst = appendBool(dst, m.Pause)
	return appendNoTags(dst)
}

// ReadFrom decodes a request body.
func (m *PauseMirrorTopicsRequest) ReadFrom(b []byte) error {
	return readMessage(m, b, "PauseMirrorTopicsRequest", func(v *PauseMirrorTopicsRequest, r *reader) {
		v.Link = r.nullableString("Link")
		v.Topics = r.strings("Topics")
		v.Pause = r.bool("Pause")
	})
}

// AppendTo appends the encoded response body to dst.
func (m *PauseMirrorTopicsResponse) AppendTo(dst []byte) []byte {
	return appendTopicResults(dst, m.ThrottleMs, m.ErrorCode, m.ErrorMessage, m.Topics)
}

// ReadFrom decodes a response body.
func (m *PauseMirrorTopicsResponse) ReadFrom(b []byte) error {
	return readMessage(m, b, "PauseMirrorTopicsResponse", func(v *PauseMirrorTopicsResponse, r *reader) {
		v.Topics = readTopicResults(r, &v.ThrottleMs, &v.ErrorCode, &v.ErrorMessage)
	})
}

// AppendTo appends the encoded request body to dst; LeaderOnly is a
// tagged field, written only when true.
func (m *DescribeMirrorsRequest) AppendTo(dst []byte) []byte {
	dst = appendNullableString(dst, m.Link)
	dst = appendStrings(dst, m.Topics)
	if !m.LeaderOnly {
		return appendNoTags(dst)
	}
	dst = AppendUvarint(dst, 1)
	return appendTag(dst, DescribeMirrorsLeaderOnlyTag, []byte{1})
}

// ReadFrom decodes a request body; a LeaderOnly field of another size
// than one byte is malformed.
func (m *DescribeMirrorsRequest) ReadFrom(b []byte) error {
	return readTaggedMessage(m, b, "DescribeMirrorsRequest", func(v *DescribeMirrorsRequest, r *reader) {
		v.Link = r.nullableString("Link")
		v.Topics = r.strings("Topics")
	}, func(v *DescribeMirrorsRequest, tag uint32, val []byte, r *reader) {
		if tag != DescribeMirrorsLeaderOnlyTag {
			return
		}
		if len(val) != 1 {
			r.fail("DescribeMirrorsRequest.LeaderOnly", fmt.Sprintf("tag %d: want one byte, got %d", tag, len(val)))
			return
		}
		v.LeaderOnly = val[0] != 0
	})
}

// AppendTo appends the encoded response body to dst.
func (m *DescribeMirrorsResponse) AppendTo(dst []byte) []byte {
	dst = appendOutcome(dst, m.ThrottleMs, m.ErrorCode, m.ErrorMessage)
	dst = appendArrayLen(dst, len(m.Partitions))
	for i := range m.Partitions {
		p := &m.Partitions[i]
		dst = appendString(dst, p.Topic)
		dst = appendInt32(dst, p.Partition)
		dst = appendNullableString(dst, p.Link)
		dst = appendString(dst, p.State)
		dst = appendNullableString(dst, p.Reason)
		dst = appendInt64(dst, p.SourceHighWatermark)
		dst = appendInt64(dst, p.LogEndOffset)
		dst = appendInt64(dst, p.Lag)
		dst = appendInt64(dst, p.LagMs)
		dst = appendInt64(dst, p.LastMirroredOffset)
		dst = appendInt32(dst, p.LastMirroredEpoch)
		dst = appendInt64(dst, p.BytesPerSec)
		dst = appendInt64(dst, p.DivergenceOffset)
		dst = appendNoTags(dst)
	}
	return appendNoTags(dst)
}

// ReadFrom decodes a response body.
func (m *DescribeMirrorsResponse) ReadFrom(b []byte) error {
	return readMessage(m, b, "DescribeMirrorsResponse", func(v *DescribeMirrorsResponse, r *reader) {
		readOutcome(r, &v.ThrottleMs, &v.ErrorCode, &v.ErrorMessage)
		n := r.arrayLen("Partitions", minPartitionState)
		if n == 0 {
			return
		}
		v.Partitions = make([]MirrorPartitionStatus, n)
		for i := range v.Partitions {
			p := &v.Partitions[i]
			p.Topic = r.string("MirrorPartitionStatus.Topic")
			p.Partition = r.int32("MirrorPartitionStatus.Partition")
			p.Link = r.nullableString("MirrorPartitionStatus.Link")
			p.State = r.string("MirrorPartitionStatus.State")
			p.Reason = r.nullableString("MirrorPartitionStatus.Reason")
			p.SourceHighWatermark = r.int64("MirrorPartitionStatus.SourceHighWatermark")
			p.LogEndOffset = r.int64("MirrorPartitionStatus.LogEndOffset")
			p.Lag = r.int64("MirrorPartitionStatus.Lag")
			p.LagMs = r.int64("MirrorPartitionStatus.LagMs")
			p.LastMirroredOffset = r.int64("MirrorPartitionStatus.LastMirroredOffset")
			p.LastMirroredEpoch = r.int32("MirrorPartitionStatus.LastMirroredEpoch")
			p.BytesPerSec = r.int64("MirrorPartitionStatus.BytesPerSec")
			p.DivergenceOffset = r.int64("MirrorPartitionStatus.DivergenceOffset")
			r.tags("MirrorPartitionStatus")
		}
	})
}

// AppendTo appends the encoded request body to dst.
func (m *TruncateMirrorTopicsRequest) AppendTo(dst []byte) []byte {
	dst = appendStrings(dst, m.Topics)
	dst = appendNullableString(dst, m.KeepTopic)
	return appendNoTags(dst)
}

// ReadFrom decodes a request body.
func (m *TruncateMirrorTopicsRequest) ReadFrom(b []byte) error {
	return readMessage(m, b, "TruncateMirrorTopicsRequest", func(v *TruncateMirrorTopicsRequest, r *reader) {
		v.Topics = r.strings("Topics")
		v.KeepTopic = r.nullableString("KeepTopic")
	})
}

// AppendTo appends the encoded response body to dst.
func (m *TruncateMirrorTopicsResponse) AppendTo(dst []byte) []byte {
	return appendTopicResults(dst, m.ThrottleMs, m.ErrorCode, m.ErrorMessage, m.Topics)
}

// ReadFrom decodes a response body.
func (m *TruncateMirrorTopicsResponse) ReadFrom(b []byte) error {
	return readMessage(m, b, "TruncateMirrorTopicsResponse", func(v *TruncateMirrorTopicsResponse, r *reader) {
		v.Topics = readTopicResults(r, &v.ThrottleMs, &v.ErrorCode, &v.ErrorMessage)
	})
}

// LinkMessage is every link admin request and response.
type LinkMessage interface {
	AppendTo(dst []byte) []byte
	ReadFrom(b []byte) error
}

// linkAPIs names each link key and makes its empty messages.
var linkAPIs = map[int16]struct {
	name      string
	req, resp func() LinkMessage
}{
	APIKeyCreateMirrorLink:     {"CreateMirrorLink", func() LinkMessage { return new(CreateMirrorLinkRequest) }, func() LinkMessage { return new(CreateMirrorLinkResponse) }},
	APIKeyDeleteMirrorLink:     {"DeleteMirrorLink", func() LinkMessage { return new(DeleteMirrorLinkRequest) }, func() LinkMessage { return new(DeleteMirrorLinkResponse) }},
	APIKeyDescribeMirrorLinks:  {"DescribeMirrorLinks", func() LinkMessage { return new(DescribeMirrorLinksRequest) }, func() LinkMessage { return new(DescribeMirrorLinksResponse) }},
	APIKeyStartMirrorTopics:    {"StartMirrorTopics", func() LinkMessage { return new(StartMirrorTopicsRequest) }, func() LinkMessage { return new(StartMirrorTopicsResponse) }},
	APIKeyPauseMirrorTopics:    {"PauseMirrorTopics", func() LinkMessage { return new(PauseMirrorTopicsRequest) }, func() LinkMessage { return new(PauseMirrorTopicsResponse) }},
	APIKeyDescribeMirrors:      {"DescribeMirrors", func() LinkMessage { return new(DescribeMirrorsRequest) }, func() LinkMessage { return new(DescribeMirrorsResponse) }},
	APIKeyTruncateMirrorTopics: {"TruncateMirrorTopics", func() LinkMessage { return new(TruncateMirrorTopicsRequest) }, func() LinkMessage { return new(TruncateMirrorTopicsResponse) }},
}

// NewLinkRequest returns an empty request of a link API key, nil for a
// key that is not one.
func NewLinkRequest(key int16) LinkMessage {
	if a, ok := linkAPIs[key]; ok {
		return a.req()
	}
	return nil
}

// NewLinkResponse returns an empty response of a link API key, nil for a
// key that is not one.
func NewLinkResponse(key int16) LinkMessage {
	if a, ok := linkAPIs[key]; ok {
		return a.resp()
	}
	return nil
}

// LinkAPIName is the name of a link API key ("" for other keys).
func LinkAPIName(key int16) string { return linkAPIs[key].name }
