package broker

// Partition logs: the storage side of each partition.
//
// Every partition's log lives in "<data-dir>/<topic>-<partition>", as Kafka
// names partition directories, and is opened with a storage.Config derived
// from the topic config (segment.*, index.interval.bytes, retention.*) and
// the broker's --flush policy. Logs are opened when the broker starts (for
// every persisted partition) and when topics or partitions are created,
// before the new partitions are published, so handlers never see a
// partition without its log unless opening it failed; such a partition
// answers KAFKA_STORAGE_ERROR.
//
// message.timestamp.type and max.message.bytes are applied by the hot path
// per request from the current topic config, so changing them takes effect
// at once. A change of the segment and retention settings is pushed into
// the open logs (reconfigureLogs), as Kafka updates its live logs.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/hotpath"
	"github.com/verbatim-kafka/verbatim/storage"
)

// partData is the data-plane state of a partition beside its log.
type partData struct {
	// mu guards waiters: the long-polling fetches to wake on the next
	// append; nwait mirrors len(waiters) so appends skip the lock when
	// nobody waits.
	mu      sync.Mutex
	waiters map[chan struct{}]struct{}
	nwait   atomic.Int32
	// appendMu orders a mirror partition's appends with the leader-epoch
	// bookkeeping that follows them.
	appendMu sync.Mutex
	// sourceHW is a mirror partition's source high watermark as its
	// writer last reported it (0: never), for its lag.
	sourceHW atomic.Int64
}

// NoteSourceHighWatermark records the source high watermark a mirror
// partition's writer reported with an accepted append (0: none).
func (p *Partition) NoteSourceHighWatermark(hw int64) {
	if hw > 0 {
		p.data.sourceHW.Store(hw)
	}
}

// SourceHighWatermark is the last one recorded (0: none yet).
func (p *Partition) SourceHighWatermark() int64 { return p.data.sourceHW.Load() }

// addWaiter makes the next append to p signal ch (buffered, capacity 1).
func (p *Partition) addWaiter(ch chan struct{}) {
	d := &p.data
	d.mu.Lock()
	if d.waiters == nil {
		d.waiters = make(map[chan struct{}]struct{})
	}
	d.waiters[ch] = struct{}{}
	d.nwait.Store(int32(len(d.waiters)))
	d.mu.Unlock()
}

// removeWaiter forgets ch.
func (p *Partition) removeWaiter(ch chan struct{}) {
	d := &p.data
	d.mu.Lock()
	delete(d.waiters, ch)
	d.nwait.Store(int32(len(d.waiters)))
	d.mu.Unlock()
}

// notifyAppend wakes the fetches waiting on p once what was appended is
// visible: at once, or under --flush always once it is durable (see
// highWatermark).
func (p *Partition) notifyAppend() {
	if rs := p.repl.Load(); rs != nil && rs.leader {
		rs.lead.appended() // cluster mode: the high watermark (replica_leader.go)
	}
	d := &p.data
	if d.nwait.Load() == 0 {
		return
	}
	if h, ok := p.Log.(*logHandle); ok && h.always {
		if end := h.log.LogEndOffset(); h.log.DurableOffset() < end {
			h.log.OnDurable(end, func(error) { p.wakeWaiters() })
			return
		}
	}
	p.wakeWaiters()
}

func (p *Partition) wakeWaiters() {
	d := &p.data
	d.mu.Lock()
	for ch := range d.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	d.mu.Unlock()
}

// highWatermark is the end of what consumers may read. Kafka's high
// watermark is the offset every in-sync replica has; on this single node
// durability plays replication's part: under --flush always it is the
// durable offset, so no consumer ever reads a record that a crash could
// take back (and that a later append would then reuse the offset of);
// otherwise the log end.
//
// In cluster mode it is the replicated high watermark (replica_leader.go,
// replica_follower.go), within the log's bounds.
func highWatermark(h *logHandle) int64 {
	leo := h.log.LogEndOffset()
	if h.replicated {
		hw := min(h.hw.Load(), leo)
		return max(hw, h.log.LogStartOffset())
	}
	if !h.always {
		return leo
	}
	hw := h.log.DurableOffset()
	if hw > leo {
		hw = leo
	}
	if start := h.log.LogStartOffset(); hw < start {
		hw = start
	}
	return hw
}

// flushPolicy is the storage policy for the broker's --flush setting.
func (s *Server) flushPolicy() storage.FlushPolicy {
	p, err := storage.ParseFlushPolicy(s.cfg.Flush)
	if err != nil {
		return storage.FlushNever // withDefaults validated it
	}
	return p
}

// storageConfig derives the storage configuration of p from its topic.
func (s *Server) storageConfig(p *Partition) storage.Config {
	tc := p.Topic.Config()
	c := storage.Config{
		Topic:              p.Topic.Name,
		Partition:          p.Index,
		SegmentBytes:       int64(tc.SegmentBytes),
		SegmentMs:          tc.SegmentMs,
		SegmentJitterMs:    tc.SegmentJitterMs,
		SegmentIndexBytes:  int(tc.SegmentIndexBytes),
		IndexIntervalBytes: int(tc.IndexIntervalBytes),
		RetentionMs:        tc.RetentionMs,
		RetentionBytes:     tc.RetentionBytes,
		Flush:              s.flushPolicy(),
		DecodeBudget:       s.decode,
		OnFlush:            s.metrics.LogFlush,
	}
	topic, index := p.Topic.Name, p.Index
	c.OnOffline = func(err error) {
		// Once per partition going offline, whatever work hit it (an
		// append, a background flush or retention, a roll).
		s.logFault(slog.LevelError, "offline", "partition offline after an I/O error", topic, index, clientInfo{}, "err", err.Error())
	}
	if tc.CleanupPolicyCompact && tc.MaxCompactionLagMs > 0 && tc.MaxCompactionLagMs < c.SegmentMs {
		// Kafka's maxSegmentMs: the active segment, never cleaned, rolls
		// in time for max.compaction.lag.ms.
		c.SegmentMs = tc.MaxCompactionLagMs
	}
	if !tc.CleanupPolicyDelete {
		// Retention deletes segments only under cleanup.policy=delete.
		c.RetentionMs, c.RetentionBytes = -1, -1
	}
	if c.RetentionMs == 0 {
		c.RetentionMs = 1 // retention.ms=0 means delete at once, not "default"
	}
	return c
}

// reconfigureLogs pushes t's current segment and retention settings into
// the open logs of its partitions. A log that refuses (closed or offline)
// keeps its old settings until it is reopened, which reads the config
// anew.
func (s *Server) reconfigureLogs(t *Topic) {
	for _, p := range t.Partitions() {
		l, err := partitionLog(p)
		if err != nil {
			continue
		}
		if err := l.Reconfigure(s.storageConfig(p)); err != nil && !errors.Is(err, storage.ErrClosed) {
			s.log.Warn("topic config not applied to an offline log", "topic", t.Name, "partition", p.Index, "err", err)
		}
	}
}

// partitionLogDir is the slash-separated directory of p's log.
func (s *Server) partitionLogDir(p *Partition) string {
	return path.Join(filepath.ToSlash(s.cfg.DataDir), p.Dir())
}

// openPartitionLog opens (creating or recovering) p's log and attaches it.
func (s *Server) openPartitionLog(p *Partition) error {
	s.checkPartitionMetadata(p) // partition_metadata.go
	l, err := storage.Open(s.cfg.FS, s.partitionLogDir(p), s.storageConfig(p))
	if err != nil {
		return fmt.Errorf("%w: opening the log of %s: %v", errStorage, p.Dir(), err)
	}
	if err := s.writePartitionMetadata(p); err != nil {
		l.Close()
		return fmt.Errorf("%w: writing %s of %s: %v", errStorage, partitionMetadataFile, p.Dir(), err)
	}
	h := &logHandle{log: l, queue: hotpath.NewPartition(l, hotpath.QueueConfig{}), always: l.Config().Flush == storage.FlushAlways}
	if s.cfg.Cluster != nil {
		h.replicated = true
		h.hw.Store(s.checkpointedHW(p, l))
	}
	p.Log = h
	return nil
}

// logHandle is what a partition's Log field holds: the storage log and the
// hot path's submission queue that owns its appends (one writer per
// partition; appends from every connection are coalesced there).
type logHandle struct {
	log   *storage.Log
	queue *hotpath.Partition
	// always: --flush always (see highWatermark).
	always bool
	// replicated: cluster mode, whose high watermark is hw (the leader's
	// or the one the follower last fetched), read at open from the
	// high-watermark checkpoint (replica_checkpoint.go).
	replicated bool
	hw         atomic.Int64
}

// Close stops the queue (failing appends still queued) and closes the log.
func (h *logHandle) Close() error {
	h.queue.Close()
	return h.log.Close()
}

// openAllLogs opens the log of every partition of every persisted topic.
// A partition whose log does not open stays without one (its requests are
// answered KAFKA_STORAGE_ERROR) so one bad directory does not stop the
// broker, as Kafka keeps serving with an offline log dir.
func (s *Server) openAllLogs() {
	for _, t := range s.cluster.topics() {
		for _, p := range t.Partitions() {
			if !s.hostsPartition(p) {
				continue // cluster mode: another broker's replica
			}
			if err := s.openPartitionLog(p); err != nil {
				s.log.Error("partition offline: its log does not open", "topic", t.Name, "partition", p.Index, "err", err)
			}
		}
	}
}

// retentionCheckInterval is Kafka's log.retention.check.interval.ms.
const retentionCheckInterval = 5 * time.Minute

// retentionLoop applies retention to every log until ctx is done.
func (s *Server) retentionLoop(ctx context.Context) {
	every(ctx, retentionCheckInterval, func() { s.applyRetention(time.Now().UnixMilli()) })
}

// every calls fn every interval until ctx is done.
func every(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fn()
	}
}

// applyRetention is one round of the retention loop over every log.
func (s *Server) applyRetention(now int64) {
	for _, tp := range s.cluster.topics() {
		if tp.Config().Mirror {
			// Dormant while a mirror: the source's log start is
			// forwarded instead; it runs once the mirror stops.
			continue
		}
		for _, p := range tp.Partitions() {
			l, err := partitionLog(p)
			if err != nil {
				continue
			}
			// An offline log was logged when it went offline (OnOffline).
			if n, err := l.ApplyRetention(now); err != nil && !errors.Is(err, storage.ErrClosed) && !errors.Is(err, storage.ErrOffline) {
				s.logFault(slog.LevelError, "retention", "retention failed", tp.Name, p.Index, clientInfo{}, "err", err.Error())
			} else if n > 0 {
				s.log.Info("retention deleted segments", "topic", tp.Name, "partition", p.Index, "segments", n)
			}
		}
	}
}

// errNoLog is returned for a partition whose log could not be opened.
var errNoLog = errors.New("the partition's log is offline")

// partitionHandle returns p's log and queue.
func partitionHandle(p *Partition) (*logHandle, error) {
	if p.Topic.Deleted() {
		return nil, kafkaErr(kerr.UnknownTopicOrPartition, "This server does not host this topic-partition.")
	}
	h, ok := p.Log.(*logHandle)
	if !ok || h == nil {
		return nil, fmt.Errorf("%w: %s: %v", errStorage, p.Dir(), errNoLog)
	}
	return h, nil
}

// partitionLog returns p's storage log.
func partitionLog(p *Partition) (*storage.Log, error) {
	h, err := partitionHandle(p)
	if err != nil {
		return nil, err
	}
	return h.log, nil
}
