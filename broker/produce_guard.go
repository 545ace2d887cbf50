package broker

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/storage"
)

// produceGuard is the hotpath.Guard of a produce append whose admission
// depends on the log as the append finds it: the topic's policies judge
// the log end, the epoch cache and the open transactions of that moment,
// and a mirror append (mirror) is also fenced by writer and checked
// against the log end its pusher expects. It lives in the request's
// pooled pendingAppend, so guarding allocates nothing.
//
// For a mirror append Begin takes the partition's append lock and End
// releases it, so the writer check, the expected-log-end check and the
// append are one step that a mirror stop or a mirror DeleteRecords
// (which take the same lock) is ordered against: once a stop holds the
// lock and has marked the topic stopping, no mirror append lands after its
// barrier.
type produceGuard struct {
	s   *Server
	p   *Partition
	log *storage.Log
	set []byte
	// mirror: a mirror produce (verbatim append); the fields below it
	// are the request's writer and expectation and the set's
	// validation summary.
	mirror   bool
	writer   mirrorWriter
	expected int64
	last     int64
	maxEpoch int32
	// sourceHW is the source high watermark the writer sent (0: none).
	sourceHW int64
	// leo is the log end Begin found (mirror).
	leo int64
	// lead is the leadership the append was accepted under (cluster
	// mode): Begin refuses the append once it ended, and holds it from
	// ending until End (replica_leader.go). A guard with lead and no s
	// judges nothing else.
	lead *leaderState
}

// Begin admits the append (see hotpath.Guard).
func (g *produceGuard) Begin() error {
	if g.lead == nil {
		return g.begin()
	}
	if err := g.lead.admitAppend(); err != nil {
		return err
	}
	if err := g.begin(); err != nil {
		g.lead.appendDone()
		return err
	}
	return nil
}

func (g *produceGuard) begin() error {
	if g.s == nil {
		return nil // only the leadership to hold
	}
	if !g.mirror {
		return g.s.judgePolicies(g.p, g.log, g.set, g.log.LogEndOffset())
	}
	g.p.data.appendMu.Lock()
	if err := g.admitMirror(); err != nil {
		g.p.data.appendMu.Unlock()
		return err
	}
	return nil
}

// admitMirror checks a mirror append under the append lock.
func (g *produceGuard) admitMirror() error {
	if err := g.s.checkMirrorWriter(g.p, g.writer); err != nil {
		return err
	}
	g.leo = g.log.LogEndOffset()
	if g.last < g.leo {
		// Only an identical retry of stored batches may disagree with
		// the log end (storage acknowledges it with the original
		// offsets, or refuses it); it was judged when first appended.
		return nil
	}
	if g.expected != g.leo {
		if g.expected < g.leo && kbatch.BaseOffset(g.set) < g.leo {
			// A resend that overlaps the log end: after a leader
			// change the new leader may hold the first batches of
			// what the writer sent the old one (it replicated them
			// before the old leader failed) but not the rest. Storage
			// appends the rest only when every batch below the log
			// end is the stored one byte for byte (a prefix of what
			// the writer sent), and refuses it otherwise, which
			// settleMirror reports as the mismatch. The policies
			// judge the new batches.
			if rest := batchesFrom(g.set, g.leo); len(rest) > 0 {
				return g.s.judgePolicies(g.p, g.log, rest, g.leo)
			}
			return nil // a batch straddles the log end: storage refuses it
		}
		// Anything else reaching past the end is refused unwritten.
		return g.mismatch()
	}
	// The topic's policies (docs/policies.md) judge what is new.
	return g.s.judgePolicies(g.p, g.log, g.set, g.leo)
}

// batchesFrom returns the batches of set from the first one whose base
// offset is at least offset (all of them when none starts below it).
func batchesFrom(set []byte, offset int64) []byte {
	for it := kbatch.Batches(set); it.Next(); {
		if kbatch.BaseOffset(it.Batch()) >= offset {
			return set[it.Pos():]
		}
	}
	return set[len(set):]
}

// End releases what Begin took.
func (g *produceGuard) End(*storage.AppendResult, error) {
	if g.mirror {
		g.p.data.appendMu.Unlock()
	}
	if g.lead != nil {
		g.lead.appendDone()
	}
}

func (g *produceGuard) mismatch() error {
	return kafkaErr(kerr.OffsetOutOfRange, fmt.Sprintf("mirror: expected log end %d, log end is %d", g.expected, g.leo))
}

// settleMirror maps a completed mirror append's outcome: a retry refused
// below the log end under a wrong expectation is the expectation's error,
// and a stored set keeps the partition's leader epoch ahead of its batch
// epochs (KIP-1279, storage.MirrorLeaderEpoch). The epoch only rises, so
// appends settled in any order leave the same epoch.
func (g *produceGuard) settleMirror(err error) error {
	if err != nil {
		if g.expected != g.leo && errors.Is(err, storage.ErrOffsetBelowLogEnd) {
			return g.mismatch()
		}
		return err
	}
	// The validation summary has the set's largest batch epoch: the set
	// is not walked again.
	p := g.p
	p.NoteSourceHighWatermark(g.sourceHW)
	if cur, want := p.LeaderEpoch(), storage.MirrorLeaderEpoch(p.LeaderEpoch(), g.maxEpoch); want != cur {
		if err := g.s.SetLeaderEpochAtLeast(p, want); err != nil {
			// The batches are stored; the epoch catches up on the next
			// append. Report the failure so the pusher retries.
			return err
		}
	}
	return nil
}
