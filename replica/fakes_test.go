package replica

// Test doubles: an in-memory Replica and a Host over them.

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/kbatch"
)

// memLog is a log of whole batches from start; end is the log end (the
// last batch's end, or start when it holds none).
type memLog struct {
	start, end int64
	batches    [][]byte
}

func batchEnd(b []byte) int64 { return kbatch.BaseOffset(b) + int64(kbatch.LastOffsetDelta(b)) + 1 }

func (l *memLog) latestEpoch() int32 {
	if len(l.batches) == 0 {
		return -1
	}
	return kbatch.LeaderEpoch(l.batches[len(l.batches)-1])
}

// epochEntry is a leader-epoch cache entry: epoch and its start offset.
type epochEntry struct {
	epoch int32
	start int64
}

// entries is the log's leader-epoch cache (the first batch of each
// increasing epoch; the first entry starts no lower than the log start),
// plus extra when its epoch is above them (a leader's own epoch from its
// election on).
func (l *memLog) entries(extra *epochEntry) []epochEntry {
	var es []epochEntry
	for _, b := range l.batches {
		if e := kbatch.LeaderEpoch(b); len(es) == 0 || e > es[len(es)-1].epoch {
			es = append(es, epochEntry{e, max(kbatch.BaseOffset(b), l.start)})
		}
	}
	if extra != nil && (len(es) == 0 || extra.epoch > es[len(es)-1].epoch) {
		es = append(es, *extra)
	}
	return es
}

// endOffsetFor is Kafka's LeaderEpochFileCache.endOffsetFor over es.
func endOffsetFor(es []epochEntry, requested int32, leo int64) (int32, int64) {
	if requested < 0 {
		return -1, -1
	}
	if n := len(es); n > 0 && es[n-1].epoch == requested {
		return requested, leo
	}
	higher := 0
	for higher < len(es) && es[higher].epoch <= requested {
		higher++
	}
	switch {
	case higher == len(es):
		return -1, -1
	case higher == 0:
		return requested, es[0].start
	}
	return es[higher-1].epoch, es[higher].start
}

// truncate removes every batch whose last offset is >= to (below the log
// start: empties the log to start at to), as storage.Log.Truncate.
func (l *memLog) truncate(to int64) {
	if to >= l.end {
		return
	}
	if to < l.start {
		l.start, l.end, l.batches = to, to, nil
		return
	}
	n := 0
	for n < len(l.batches) && batchEnd(l.batches[n])-1 < to {
		n++
	}
	l.batches = l.batches[:n:n]
	l.end = l.start
	if n > 0 {
		l.end = batchEnd(l.batches[n-1])
	}
}

// advanceStart moves the log start up to to, dropping the batches wholly
// below it.
func (l *memLog) advanceStart(to int64) {
	if to <= l.start {
		return
	}
	to = min(to, l.end)
	l.start = to
	n := 0
	for n < len(l.batches) && batchEnd(l.batches[n]) <= to {
		n++
	}
	l.batches = l.batches[n:]
}

// isPrefixOf reports why l is not a prefix of o (whole batches, same
// bytes, same offsets, from where both hold data), "" when it is.
func (l *memLog) isPrefixOf(o *memLog) string {
	if l.end > o.end && len(l.batches) > 0 {
		// (An empty log may start beyond the leader's end after a
		// leader change: its first fetch goes out of range.)
		return fmt.Sprintf("log end %d beyond the leader's %d", l.end, o.end)
	}
	at := func(base int64) []byte { // o's batch at base, nil when none
		i := sort.Search(len(o.batches), func(i int) bool { return kbatch.BaseOffset(o.batches[i]) >= base })
		if i < len(o.batches) && kbatch.BaseOffset(o.batches[i]) == base {
			return o.batches[i]
		}
		return nil
	}
	next := int64(-1)
	for _, b := range l.batches {
		base := kbatch.BaseOffset(b)
		if next >= 0 && base != next {
			return fmt.Sprintf("batch at %d follows a batch ending at %d", base, next)
		}
		next = batchEnd(b)
		if next <= o.start {
			continue // below the leader's log start
		}
		if lb := at(base); lb == nil || !bytes.Equal(lb, b) {
			return fmt.Sprintf("batch %d-%d (epoch %d) is not the leader's", base, next-1, kbatch.LeaderEpoch(b))
		}
	}
	return ""
}

// memReplica is a Replica in memory; a violation of what the fetcher
// must ensure (a partial batch, a set starting below the log end) is
// recorded in bad; a set that is bad in itself (CRC, offsets) is refused
// as storage refuses it.
type memReplica struct {
	mu  sync.Mutex
	log memLog
	hw  int64
	bad string
	// appends counts Append calls that stored batches, truncates
	// Truncate calls, resets TruncateFullyAndStartAt calls.
	appends, truncates, resets int
	// stored is the last set Append stored.
	stored []byte
}

func (r *memReplica) LogStartOffset() int64 { r.mu.Lock(); defer r.mu.Unlock(); return r.log.start }
func (r *memReplica) LogEndOffset() int64   { r.mu.Lock(); defer r.mu.Unlock(); return r.log.end }
func (r *memReplica) LatestEpoch() int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log.latestEpoch()
}

func (r *memReplica) EndOffsetForEpoch(epoch int32) (int32, int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, end := endOffsetFor(r.log.entries(nil), epoch, r.log.end)
	return e, end, nil
}

func (r *memReplica) Append(set []byte, hw, logStart int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Checked first, stored only when all are good (as storage does).
	var bs [][]byte
	end := r.log.end
	it := kbatch.Batches(set)
	for it.Next() {
		b := it.Batch()
		base := kbatch.BaseOffset(b)
		switch {
		case len(bs) == 0 && base < end:
			// The fetcher must never send this.
			r.violate("append: batch at %d below the log end %d", base, end)
			return fmt.Errorf("below the log end")
		case base < end || kbatch.StoredCRC(b) != kbatch.CRC(b) || kbatch.LastOffsetDelta(b) < 0:
			return fmt.Errorf("append: batch at %d: bad offsets or CRC", base)
		}
		bs = append(bs, bytes.Clone(b))
		end = batchEnd(b)
	}
	if it.Pos() != len(set) {
		r.violate("append: %d trailing bytes are not a whole batch", len(set)-it.Pos())
		return fmt.Errorf("partial batch")
	}
	if len(bs) > 0 {
		r.appends++
	}
	r.log.batches, r.log.end = append(r.log.batches, bs...), end
	r.stored = set
	r.hw = min(hw, r.log.end)
	r.log.advanceStart(min(logStart, r.hw)) // never past the high watermark, as the broker's replica
	return nil
}

func (r *memReplica) violate(format string, args ...any) {
	if r.bad == "" {
		r.bad = fmt.Sprintf(format, args...)
	}
}

func (r *memReplica) Truncate(offset int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.truncates++
	r.log.truncate(offset)
	r.hw = min(r.hw, r.log.end)
	return nil
}

func (r *memReplica) TruncateFullyAndStartAt(offset int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resets++
	r.log = memLog{start: offset, end: offset}
	r.hw = offset
	return nil
}

// counts is the replica's counters and flags, read under its lock (the
// fetcher may be writing).
type counts struct {
	hw                         int64
	bad                        string
	appends, truncates, resets int
}

func (r *memReplica) counts() counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return counts{r.hw, r.bad, r.appends, r.truncates, r.resets}
}

// snapshot copies the replica's log.
func (r *memReplica) snapshot() memLog {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.log
	l.batches = append([][]byte(nil), l.batches...)
	return l
}

// memHost is a Host over memReplicas (created on first use).
type memHost struct {
	mu    sync.Mutex
	id    int32
	epoch int64
	addrs map[int32]string
	opts  client.Options
	reps  map[client.TopicPartition]*memReplica
	// missing makes Replica fail for a partition this many more times.
	missing map[client.TopicPartition]int
}

func newMemHost(id int32) *memHost {
	return &memHost{id: id, epoch: 7, addrs: map[int32]string{}, reps: map[client.TopicPartition]*memReplica{}, missing: map[client.TopicPartition]int{}}
}

func (h *memHost) NodeID() int32      { return h.id }
func (h *memHost) BrokerEpoch() int64 { return h.epoch }
func (h *memHost) LeaderAddr(node int32) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a, ok := h.addrs[node]
	return a, ok
}
func (h *memHost) InterBrokerClient() client.Options { return h.opts }

func (h *memHost) Replica(topic string, partition int32) (Replica, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	tp := client.TopicPartition{Topic: topic, Partition: partition}
	if h.missing[tp] > 0 {
		h.missing[tp]--
		return nil, fmt.Errorf("%s: no local replica yet", tp)
	}
	return h.rep(tp), nil
}

// rep is tp's replica (the caller holds mu).
func (h *memHost) rep(tp client.TopicPartition) *memReplica {
	r := h.reps[tp]
	if r == nil {
		r = &memReplica{}
		h.reps[tp] = r
	}
	return r
}

func (h *memHost) replica(tp client.TopicPartition) *memReplica {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rep(tp)
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func clientTP(topic string, p int32) client.TopicPartition {
	return client.TopicPartition{Topic: topic, Partition: p}
}
