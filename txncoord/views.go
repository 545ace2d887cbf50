package txncoord

// The read-only views: ListTransactions and DescribeTransactions.

import (
	"regexp"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Listing is one ListTransactions entry.
type Listing struct {
	ID    string
	PID   int64
	State string
}

// List answers ListTransactions; unknown are the state filters that name
// no state.
func (c *Coordinator) List(states []string, pids []int64, minDuration time.Duration, pattern *regexp.Regexp) (out []Listing, unknown []string) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	want := map[txnState]bool{}
	for _, s := range states {
		st, ok := parseTxnState(s)
		if !ok {
			unknown = append(unknown, s)
			continue
		}
		want[st] = true
	}
	if len(states) > 0 && len(want) == 0 {
		return nil, unknown
	}
	pidSet := map[int64]bool{}
	for _, p := range pids {
		pidSet[p] = true
	}
	for _, m := range c.txns {
		if m.pid < 0 {
			continue // its first record is being written
		}
		if len(want) > 0 && !want[m.state] {
			continue
		}
		if len(pidSet) > 0 && !pidSet[m.pid] {
			continue
		}
		if minDuration >= 0 && (m.state != txnOngoing || now.Sub(m.startTs) < minDuration) {
			continue
		}
		if pattern != nil && !pattern.MatchString(m.id) {
			continue
		}
		out = append(out, Listing{m.id, m.pid, m.state.String()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, unknown
}

// Describe fills one DescribeTransactions entry.
func (c *Coordinator) Describe(id string, d *kmsg.DescribeTransactionsResponseTransactionState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.refusal(id); e != nil {
		d.ErrorCode = e.Code
		d.ProducerID, d.ProducerEpoch, d.StartTimestamp = -1, -1, -1
		return
	}
	m := c.txns[id]
	if m == nil || m.pid < 0 {
		d.ErrorCode = kerr.TransactionalIDNotFound.Code
		d.ProducerID, d.ProducerEpoch, d.StartTimestamp = -1, -1, -1
		return
	}
	d.State = m.state.String()
	d.TimeoutMillis = int32(m.timeout.Milliseconds())
	d.StartTimestamp = -1
	if !m.startTs.IsZero() {
		d.StartTimestamp = m.startTs.UnixMilli()
	}
	d.ProducerID, d.ProducerEpoch = m.pid, m.epoch
	for _, tt := range topicsOf(m.parts) {
		dt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
		dt.Topic, dt.Partitions = tt.topic, tt.partitions
		d.Topics = append(d.Topics, dt)
	}
}
