package storage

// Reconfigure applies new segment and retention settings to an open log,
// as Kafka applies a topic's config change to its live logs: roll
// decisions, the index interval of segments created from now on, and the
// next ApplyRetention use them. Only SegmentBytes, SegmentMs,
// SegmentJitterMs, SegmentIndexBytes, IndexIntervalBytes, RetentionMs and
// RetentionBytes are taken from c (zero values get Open's defaults); the
// topic name, flush policy, clock and everything else stay as opened.
func (l *Log) Reconfigure(c Config) error {
	n := c.withDefaults(l.dir)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkLocked(); err != nil {
		return err
	}
	l.cfg.SegmentBytes = n.SegmentBytes
	l.cfg.SegmentMs = n.SegmentMs
	l.cfg.SegmentJitterMs = n.SegmentJitterMs
	l.cfg.SegmentIndexBytes = n.SegmentIndexBytes
	l.cfg.IndexIntervalBytes = n.IndexIntervalBytes
	l.cfg.RetentionMs = n.RetentionMs
	l.cfg.RetentionBytes = n.RetentionBytes
	return nil
}
