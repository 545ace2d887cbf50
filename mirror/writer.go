package mirror

// The pusher's identity towards the destination and the topic ids it
// keeps (docs/protocol.md "Writer epoch" and "Mirror topic id").
//
// Fencing: each partition of a mirror topic remembers its newest writer,
// ordered by (WriterEpoch, WriterID). Every worker first registers ("claims")
// its partition with a mirror DeleteRecords to offset 0, which moves no
// log start but makes this pusher the partition's newest writer or fences
// it at once. After two pushers claimed a partition, exactly one of them
// can write it; the other's next write is PRODUCER_FENCED and it stops
// with exit code 1.

import (
	"crypto/rand"
	"encoding/binary"
	"time"

	"github.com/verbatim-kafka/verbatim/client"
)

// newWriterID is the start time in Unix nanoseconds followed by 8 random
// bytes.
func newWriterID(now time.Time) [16]byte {
	var id [16]byte
	binary.BigEndian.PutUint64(id[:8], uint64(now.UnixNano()))
	_, _ = rand.Read(id[8:]) // crypto/rand.Read never fails (Go 1.24+)
	return id
}

// checkDestFeatures notes what the destination supports and warns about
// what an older Verbatim lacks.
func (p *Pusher) checkDestFeatures(dc *client.Conn) {
	if dc.FeatureMaxVersion(mirrorFeature) < writerIDFeatureVers {
		p.log.Warn("the destination does not know writer ids ("+mirrorFeature+" < 1): a pusher started in the same second as this one would not be fenced by it", "dest", p.o.Dest)
	}
	p.pinIDs = dc.HasFeature(topicIDFeature)
	if p.o.CreateTopics && !p.pinIDs {
		p.log.Warn("the destination cannot take the source's topic ids (no feature "+topicIDFeature+"): topics it creates get new ids", "dest", p.o.Dest)
	}
}

// checkTopicID logs, once per topic, a destination topic whose id is not
// the source's (created before topic ids were kept, or by hand).
func (p *Pusher) checkTopicID(name string, src, dst [16]byte) {
	if src == dst || src == ([16]byte{}) {
		return
	}
	p.mu.Lock()
	warned := p.idWarned[name]
	p.idWarned[name] = true
	p.mu.Unlock()
	if !warned {
		p.log.Warn("the destination topic's id differs from the source's (it was not created by mirror push --create-topics with topic ids); the data is mirrored all the same", "topic", name, "source_id", client.FormatTopicID(src), "dest_id", client.FormatTopicID(dst))
	}
}
