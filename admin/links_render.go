package admin

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteLinks renders `link list`.
func WriteLinks(w io.Writer, ls []Link) error {
	rows := make([][]string, 0, len(ls))
	for _, l := range ls {
		rows = append(rows, []string{l.Name, l.Source, l.State, fmt.Sprint(len(l.MirrorTopics)), dash(l.Reason)})
	}
	return Table(w, []string{"NAME", "SOURCE", "STATE", "TOPICS", "REASON"}, rows)
}

// WriteLink renders `link describe`.
func WriteLink(w io.Writer, l *Link) error {
	interval := "default"
	if l.SyncIntervalMs > 0 {
		interval = (time.Duration(l.SyncIntervalMs) * time.Millisecond).String()
	}
	throttle := "none"
	if l.ThrottleBytesPerSec > 0 {
		throttle = fmt.Sprintf("%d bytes/s", l.ThrottleBytesPerSec)
	}
	rows := [][]string{
		{"NAME", l.Name}, {"LINK-ID", l.LinkID}, {"STATE", l.State}, {"REASON", dash(l.Reason)},
		{"SOURCE", l.Source}, {"SOURCE-CLUSTER-ID", dash(l.SourceClusterID)},
		{"TOPICS", dash(l.Topics)}, {"EXCLUDE", dash(l.Exclude)}, {"GROUPS", dash(l.Groups)},
		{"SYNC-CONFIGS", fmt.Sprint(l.SyncConfigs)}, {"SYNC-INTERVAL", interval}, {"THROTTLE", throttle},
	}
	for _, k := range sortedKeys(l.SourceConfig) {
		rows = append(rows, []string{"SOURCE-CONFIG", k + "=" + l.SourceConfig[k]})
	}
	for _, r := range rows {
		if _, err := fmt.Fprintf(w, "%-18s %s\n", r[0], r[1]); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	rows = rows[:0]
	for _, t := range l.MirrorTopics {
		rows = append(rows, []string{t.Topic, t.State, dash(t.Reason)})
	}
	return Table(w, []string{"TOPIC", "STATE", "REASON"}, rows)
}

// WriteTopicResults renders the per-topic outcome of `mirror
// create|pause|resume|truncate`.
func WriteTopicResults(w io.Writer, rs []TopicResult) error {
	rows := make([][]string, 0, len(rs))
	for _, r := range rs {
		res := "OK"
		if r.Error != "" {
			res = r.Error
			if r.Message != "" {
				res += ": " + r.Message
			}
		}
		var cut []string
		for _, p := range r.Truncated {
			if p.TruncatedTo < 0 {
				cut = append(cut, fmt.Sprintf("%d: nothing", p.Partition))
				continue
			}
			cut = append(cut, fmt.Sprintf("%d: from %d, %d batches (%d bytes) kept in %s", p.Partition, p.TruncatedTo, p.RemovedBatches, p.RemovedBytes, p.KeptIn))
		}
		rows = append(rows, []string{r.Topic, res, dash(strings.Join(cut, "; "))})
	}
	return Table(w, []string{"TOPIC", "RESULT", "TRUNCATED"}, rows)
}

// WriteMirrorStatus renders `mirror status`.
func WriteMirrorStatus(w io.Writer, st *MirrorStatus) error {
	rows := make([][]string, 0, len(st.Partitions))
	for _, p := range st.Partitions {
		state := p.State
		if p.Reason != "" {
			state += " (" + p.Reason + ")"
		}
		lagTime := "-"
		if p.LagMs >= 0 {
			lagTime = (time.Duration(p.LagMs) * time.Millisecond).String()
		}
		rows = append(rows, []string{p.Topic, fmt.Sprint(p.Partition), dash(p.Link), state, num(p.SourceHighWatermark), num(p.LogEndOffset),
			num(p.Lag), lagTime, num(p.LastMirroredOffset), num(int64(p.LastMirroredEpoch)), num(p.BytesPerSec)})
	}
	return Table(w, []string{"TOPIC", "PARTITION", "LINK", "STATE", "SOURCE-HW", "LOG-END", "LAG", "LAG-TIME", "LAST-MIRRORED", "EPOCH", "BYTES/S"}, rows)
}

// dash shows an empty value as "-".
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// num shows an unknown (-1) number as "-".
func num(v int64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprint(v)
}
