package hotpath

import (
	"encoding/binary"
)

// ProduceResponse is a Produce response to encode (versions 3-13). Topic
// names alias the request.
type ProduceResponse struct {
	Version    int16
	Topics     []ProduceTopicResponse
	ThrottleMs int32
	// NodeEndpoints (v10+, tagged) tell clients where the leaders of
	// partitions answered NOT_LEADER_OR_FOLLOWER are.
	NodeEndpoints []NodeEndpoint
}

// ProduceTopicResponse is one topic of a Produce response.
type ProduceTopicResponse struct {
	Name       []byte   // v3-12
	ID         [16]byte // v13+
	Partitions []ProducePartitionResponse
}

// ProducePartitionResponse is one partition of a Produce response.
type ProducePartitionResponse struct {
	Index           int32
	ErrorCode       int16
	BaseOffset      int64
	LogAppendTimeMs int64
	LogStartOffset  int64
	RecordErrors    []RecordError // v8+
	ErrorMessage    string        // v8+, null when empty
	// CurrentLeader (v10+, tagged) is encoded when LeaderID or LeaderEpoch
	// is not -1; NewPartitionResponse sets both to -1.
	LeaderID, LeaderEpoch int32
}

// NodeEndpoint is a broker address in a Produce response (v10+).
type NodeEndpoint struct {
	NodeID int32
	Host   string
	Port   int32
	Rack   *string
}

// NewPartitionResponse returns a partition response with Kafka's defaults
// (offsets and times -1, no current leader).
func NewPartitionResponse(index int32, code int16) ProducePartitionResponse {
	return ProducePartitionResponse{Index: index, ErrorCode: code, BaseOffset: -1, LogAppendTimeMs: -1,
		LogStartOffset: -1, LeaderID: -1, LeaderEpoch: -1}
}

func appendLen(dst []byte, n int, flexible, wide bool) []byte {
	if flexible {
		return binary.AppendUvarint(dst, uint64(n)+1)
	}
	if wide {
		return binary.BigEndian.AppendUint32(dst, uint32(n))
	}
	return binary.BigEndian.AppendUint16(dst, uint16(n))
}

func appendNullableString(dst []byte, s string, null, flexible bool) []byte {
	if null {
		if flexible {
			return append(dst, 0)
		}
		return binary.BigEndian.AppendUint16(dst, 0xffff)
	}
	return append(appendLen(dst, len(s), flexible, false), s...)
}

// AppendTo appends the response body.
func (r *ProduceResponse) AppendTo(dst []byte) []byte {
	v := r.Version
	flexible := v >= 9
	be := binary.BigEndian
	dst = appendLen(dst, len(r.Topics), flexible, true)
	for i := range r.Topics {
		t := &r.Topics[i]
		if v >= 13 {
			dst = append(dst, t.ID[:]...)
		} else {
			dst = append(appendLen(dst, len(t.Name), flexible, false), t.Name...)
		}
		dst = appendLen(dst, len(t.Partitions), flexible, true)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			dst = be.AppendUint32(dst, uint32(p.Index))
			dst = be.AppendUint16(dst, uint16(p.ErrorCode))
			dst = be.AppendUint64(dst, uint64(p.BaseOffset))
			dst = be.AppendUint64(dst, uint64(p.LogAppendTimeMs))
			if v >= 5 {
				dst = be.AppendUint64(dst, uint64(p.LogStartOffset))
			}
			if v >= 8 {
				dst = appendLen(dst, len(p.RecordErrors), flexible, true)
				for k := range p.RecordErrors {
					e := &p.RecordErrors[k]
					dst = be.AppendUint32(dst, uint32(e.Index))
					dst = appendNullableString(dst, e.Message, e.Message == "", flexible)
					if flexible {
						dst = append(dst, 0)
					}
				}
				dst = appendNullableString(dst, p.ErrorMessage, p.ErrorMessage == "", flexible)
			}
			if flexible {
				if v >= 10 && (p.LeaderID != -1 || p.LeaderEpoch != -1) {
					// One tagged field: tag 0, size 9, leader id, epoch, no tags.
					dst = append(dst, 1, 0, 9)
					dst = be.AppendUint32(dst, uint32(p.LeaderID))
					dst = be.AppendUint32(dst, uint32(p.LeaderEpoch))
					dst = append(dst, 0)
				} else {
					dst = append(dst, 0)
				}
			}
		}
		if flexible {
			dst = append(dst, 0)
		}
	}
	dst = be.AppendUint32(dst, uint32(r.ThrottleMs))
	if flexible {
		if v >= 10 && len(r.NodeEndpoints) > 0 {
			dst = append(dst, 1, 0) // one tagged field, tag 0
			at := len(dst)
			dst = r.appendEndpoints(dst)
			size := len(dst) - at
			// Insert the size varint before the field (rarely taken path).
			var tmp [binary.MaxVarintLen32]byte
			n := binary.PutUvarint(tmp[:], uint64(size))
			dst = append(dst, tmp[:n]...)
			copy(dst[at+n:], dst[at:at+size])
			copy(dst[at:], tmp[:n])
		} else {
			dst = append(dst, 0)
		}
	}
	return dst
}

func (r *ProduceResponse) appendEndpoints(dst []byte) []byte {
	be := binary.BigEndian
	dst = appendLen(dst, len(r.NodeEndpoints), true, true)
	for i := range r.NodeEndpoints {
		e := &r.NodeEndpoints[i]
		dst = be.AppendUint32(dst, uint32(e.NodeID))
		dst = append(appendLen(dst, len(e.Host), true, false), e.Host...)
		dst = be.AppendUint32(dst, uint32(e.Port))
		if e.Rack == nil {
			dst = append(dst, 0)
		} else {
			dst = append(appendLen(dst, len(*e.Rack), true, false), *e.Rack...)
		}
		dst = append(dst, 0)
	}
	return dst
}
