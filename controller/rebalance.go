package controller

import (
	"time"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// RebalanceConfig is the automatic preferred-leader rebalance
// (auto.leader.rebalance.enable, leader.imbalance.check.interval.seconds,
// leader.imbalance.per.broker.percentage).
type RebalanceConfig struct {
	// Enable turns it on (Kafka's default true; the zero value is off,
	// so callers set it).
	Enable bool
	// Interval is how often the controller looks (default 300 s).
	Interval time.Duration
	// PerBrokerPercentage is the share of a broker's preferred
	// partitions (in percent) that may be led elsewhere before it
	// rebalances them (default 10).
	PerBrokerPercentage int
}

// DefaultLeaderImbalancePercentage and DefaultLeaderImbalanceInterval are
// Kafka's defaults.
const (
	DefaultLeaderImbalancePercentage = 10
	DefaultLeaderImbalanceInterval   = 300 * time.Second
)

// Rebalance is the automatic preferred-leader election on a snapshot, as
// Kafka's controller decides it (its ZooKeeper-mode rule, which reads
// leader.imbalance.per.broker.percentage): for each broker, the
// partitions whose preferred replica (first in the assignment) it is
// are counted, and those not led by it; when the imbalance (the second
// over the first) is above percent/100 and the broker is live, each of
// its partitions a preferred election can move (the broker in the ISR,
// registered, not shutting down, no reassignment in progress) gets the
// preferred election's decision. Partitions without a leader count as
// imbalanced (the controller's own elections bring them back). Decisions
// come in topic then partition order.
func Rebalance(snap *clustermeta.Snapshot, percent int) []Decision {
	total := map[int32]int{}
	off := map[int32]int{}
	for _, ps := range snap.Partitions {
		for _, s := range ps {
			if len(s.Replicas) == 0 {
				continue
			}
			p := s.Replicas[0]
			total[p]++
			if s.Leader != p {
				off[p]++
			}
		}
	}
	imbalanced := map[int32]bool{}
	for b, n := range off {
		if _, live := snap.Brokers[b]; live && n*100 > percent*total[b] {
			imbalanced[b] = true
		}
	}
	if len(imbalanced) == 0 {
		return nil
	}
	var out []Decision
	for _, topic := range sortedTopics(snap) {
		for _, s := range snap.Partitions[topic] {
			if len(s.Replicas) == 0 || !imbalanced[s.Replicas[0]] || s.Leader == clustermeta.NoLeader ||
				len(s.AddingReplicas) > 0 || len(s.RemovingReplicas) > 0 {
				continue
			}
			if d, err := electPreferred(s, snap.Brokers); err == nil {
				out = append(out, d)
			}
		}
	}
	return out
}
