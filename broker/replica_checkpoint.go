package broker

// The high-watermark checkpoint of cluster mode (owner: the replication
// work): Kafka's replication-offset-checkpoint file in the data dir, the
// high watermark of every hosted replica, written every
// replica.high.watermark.checkpoint.interval.ms (5 s) and at shutdown, and
// read when a log opens, so a restarted broker does not show consumers
// what was never replicated (and a new leader starts from what the old
// one had confirmed). Its text format is Kafka's OffsetCheckpointFile:
//
//	0                  version
//	2                  entry count
//	orders 0 1234      topic, partition, offset
//	orders 1 987
//
// A single node has no such file: its high watermark is the log end (or
// the durable offset).

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/verbatim-kafka/verbatim/storage"
)

const (
	hwCheckpointFile = "replication-offset-checkpoint"
	// hwCheckpointInterval is Kafka's
	// replica.high.watermark.checkpoint.interval.ms default.
	hwCheckpointInterval = 5 * time.Second
)

// checkpointedHW is p's high watermark as last checkpointed, within l's
// bounds (0 when the file or its entry is missing: a new replica).
func (s *Server) checkpointedHW(p *Partition, l *storage.Log) int64 {
	s.repl.ckptOnce.Do(func() {
		data, err := readFile(s.fs, hwCheckpointFile)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				s.log.Warn("high-watermark checkpoint not read: high watermarks start at the log start", "err", err)
			}
			return
		}
		m, err := parseHWCheckpoint(data)
		if err != nil {
			s.log.Warn("high-watermark checkpoint not readable: high watermarks start at the log start", "err", err)
			return
		}
		s.repl.ckpt = m
	})
	s.repl.ckptMu.Lock()
	hw := s.repl.ckpt[TopicPartition{Topic: p.Topic.Name, Partition: p.Index}]
	s.repl.ckptMu.Unlock()
	return max(min(hw, l.LogEndOffset()), l.LogStartOffset())
}

// writeHWCheckpoint writes the high watermark of every replicated log
// (atomically: after a crash the old or the new file).
func (s *Server) writeHWCheckpoint() error {
	m := make(map[TopicPartition]int64)
	for _, t := range s.cluster.topics() {
		for _, p := range t.Partitions() {
			if h, ok := p.Log.(*logHandle); ok && h != nil && h.replicated {
				m[TopicPartition{Topic: t.Name, Partition: p.Index}] = highWatermark(h)
			}
		}
	}
	s.repl.ckptMu.Lock()
	defer s.repl.ckptMu.Unlock()
	// Entries of hosted replicas whose logs are not open now (offline)
	// are kept; those of partitions this broker no longer hosts go.
	for tp, hw := range s.repl.ckpt {
		if _, ok := m[tp]; ok {
			continue
		}
		if t := s.cluster.topic(tp.Topic); t != nil {
			if p := t.Partition(tp.Partition); p != nil && s.hostsPartition(p) {
				m[tp] = hw
			}
		}
	}
	if err := writeFileAtomic(s.fs, ".", hwCheckpointFile, formatHWCheckpoint(m)); err != nil {
		return err
	}
	s.repl.ckpt = m
	return nil
}

// shutdownReplication writes the last checkpoint before the logs close.
func (s *Server) shutdownReplication() {
	if s.cfg.Cluster == nil {
		return
	}
	if err := s.writeHWCheckpoint(); err != nil {
		s.log.Warn("high-watermark checkpoint not written at shutdown", "err", err)
	}
}

// formatHWCheckpoint encodes m in the checkpoint's text format, sorted.
func formatHWCheckpoint(m map[TopicPartition]int64) []byte {
	keys := make([]TopicPartition, 0, len(m))
	for tp := range m {
		keys = append(keys, tp)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Topic != keys[j].Topic {
			return keys[i].Topic < keys[j].Topic
		}
		return keys[i].Partition < keys[j].Partition
	})
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(keys))
	for _, tp := range keys {
		fmt.Fprintf(&b, "%s %d %d\n", tp.Topic, tp.Partition, m[tp])
	}
	return b.Bytes()
}

// parseHWCheckpoint decodes the checkpoint's text format: version 0, the
// entry count, then one "topic partition offset" line per entry.
func parseHWCheckpoint(data []byte) (map[TopicPartition]int64, error) {
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) < 2 {
		return nil, fmt.Errorf("%s: %d lines, want at least 2", hwCheckpointFile, len(lines))
	}
	if lines[0] != "0" {
		return nil, fmt.Errorf("%s: unsupported version %q", hwCheckpointFile, lines[0])
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n < 0 || n != len(lines)-2 {
		return nil, fmt.Errorf("%s: entry count %q does not match its %d entries", hwCheckpointFile, lines[1], len(lines)-2)
	}
	m := make(map[TopicPartition]int64, n)
	for i, line := range lines[2:] {
		f := strings.Split(line, " ")
		if len(f) != 3 || f[0] == "" {
			return nil, fmt.Errorf("%s: entry %d %q is not \"topic partition offset\"", hwCheckpointFile, i, line)
		}
		part, err1 := strconv.ParseInt(f[1], 10, 32)
		off, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || part < 0 || off < 0 {
			return nil, fmt.Errorf("%s: entry %d %q has a bad partition or offset", hwCheckpointFile, i, line)
		}
		m[TopicPartition{Topic: f[0], Partition: int32(part)}] = off
	}
	return m, nil
}
