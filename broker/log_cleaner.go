package broker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/verbatim-kafka/verbatim/storage"
)

// The log cleaner threads (Kafka's LogCleaner and the choice part of
// LogCleanerManager): each thread takes the dirtiest cleanable log of a
// compacted topic (cleanup.policy compact or compact,delete; the internal
// topics are compacted), cleans it once with storage's cleaner, and
// backs off for log.cleaner.backoff.ms when no log needs cleaning. Mirror
// topics (push mode) are left alone: their bytes are the source's.

// defaultCleanerBackoff is Kafka's log.cleaner.backoff.ms.
const defaultCleanerBackoff = 15 * time.Second

type logCleaner struct {
	s    *Server
	mu   sync.Mutex
	busy map[*storage.Log]bool // logs being cleaned by a thread
	// uncleanable counts the partitions marked uncleanable (Kafka's
	// uncleanable-partitions-count).
	uncleanable atomic.Int64
	cleaned     atomic.Int64 // cleans completed
	cleaners    []*storage.Cleaner
	wg          sync.WaitGroup
}

// stopCleaners stops the cleaner threads (a clean in progress is abandoned
// at its next batch, before its swap) and waits for them, so that no
// cleaner touches a log after the broker closed it.
func (s *Server) stopCleaners() {
	lc := s.cleaner
	if lc == nil {
		return
	}
	for _, c := range lc.cleaners {
		c.Stop()
	}
	lc.wg.Wait()
}

// startCleaners starts the cleaner threads.
func (s *Server) startCleaners(ctx context.Context) {
	n := s.cfg.LogCleanerThreads
	if n == 0 {
		n = 1
	}
	if n < 0 {
		return
	}
	buf := s.cfg.LogCleanerDedupeBufferSize
	if buf <= 0 {
		buf = storage.DefaultDedupeBufferBytes
	}
	backoff := s.cfg.cleanerBackoff
	if backoff <= 0 {
		backoff = defaultCleanerBackoff
	}
	lc := &logCleaner{s: s, busy: map[*storage.Log]bool{}}
	s.cleaner = lc
	for i := 0; i < n; i++ {
		c := storage.NewCleaner(storage.CleanerConfig{DedupeBufferBytes: buf / int64(n),
			IOMaxBytesPerSecond: s.cfg.LogCleanerIOMaxBytesPerSecond / float64(n)})
		lc.cleaners = append(lc.cleaners, c)
		lc.wg.Add(1)
		go func() {
			defer lc.wg.Done()
			// Every backoff, clean while some log needs it.
			every(ctx, backoff, func() {
				for ctx.Err() == nil && lc.cleanOnce(c, time.Now().UnixMilli()) {
				}
			})
		}()
	}
}

func compactConfig(tc *TopicConfig) storage.CompactConfig {
	return storage.CompactConfig{DeleteRetentionMs: tc.DeleteRetentionMs, MinCompactionLagMs: tc.MinCompactionLagMs,
		MaxCompactionLagMs: tc.MaxCompactionLagMs, MinCleanableRatio: tc.MinCleanableDirtyRatio}
}

// cleanOnce cleans the dirtiest cleanable log, if any, and reports
// whether it cleaned one.
func (lc *logCleaner) cleanOnce(c *storage.Cleaner, now int64) bool {
	s := lc.s
	var (
		best      *storage.Log
		bestTopic string
		bestPart  int32
		bestCC    storage.CompactConfig
		bestRatio = -1.0
	)
	lc.mu.Lock()
	for _, tp := range s.cluster.topics() {
		tc := tp.Config()
		if !tc.CleanupPolicyCompact || tc.MirrorPush || tp.Deleted() {
			continue
		}
		cc := compactConfig(tc)
		for _, p := range tp.Partitions() {
			l, err := partitionLog(p)
			if err != nil || lc.busy[l] {
				continue
			}
			st, err := l.CleanableState(cc, now)
			if err != nil || !st.ShouldClean(cc) {
				continue
			}
			ratio := st.Ratio
			if st.NeedCompactionNow {
				ratio += 1 // past max.compaction.lag.ms first
			}
			if ratio > bestRatio {
				best, bestTopic, bestPart, bestCC, bestRatio = l, tp.Name, p.Index, cc, ratio
			}
		}
	}
	if best == nil {
		lc.mu.Unlock()
		return false
	}
	lc.busy[best] = true
	lc.mu.Unlock()
	defer func() {
		lc.mu.Lock()
		delete(lc.busy, best)
		lc.mu.Unlock()
	}()
	start := time.Now()
	st, err := c.Clean(best, bestCC, now)
	switch {
	case errors.Is(err, storage.ErrUncleanable):
		lc.uncleanable.Add(1)
		s.log.Error("log cleaner: partition marked uncleanable", "topic", bestTopic, "partition", bestPart, "err", err)
		return true
	case errors.Is(err, storage.ErrClosed), errors.Is(err, storage.ErrCleanInProgress), errors.Is(err, storage.ErrCleanerStopped):
		return false
	case err != nil:
		s.log.Warn("log cleaner: clean failed", "topic", bestTopic, "partition", bestPart, "err", err)
		return false
	}
	lc.cleaned.Add(1)
	s.log.Debug("log cleaner: cleaned", "topic", bestTopic, "partition", bestPart,
		"segments", st.SegmentsBefore, "groups", st.Groups, "read", st.BytesRead, "written", st.BytesWritten,
		"records", st.RecordsRead, "kept", st.RecordsKept, "mapped_to", st.EndOffset, "took", time.Since(start))
	// A clean whose map filled, or that changed nothing, must not spin:
	// another round comes after the backoff unless the log is still dirty
	// past its ratio (the next CleanableState says).
	return st.Groups > 0 && !st.Aborted
}
