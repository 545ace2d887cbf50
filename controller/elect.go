package controller

import (
	"errors"
	"slices"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// ElectionType is ElectLeaders' election type (Kafka's values).
type ElectionType int8

// The election types.
const (
	PreferredElection ElectionType = 0
	UncleanElection   ElectionType = 1
)

// The per-partition refusals of Elect, each one of Kafka's ElectLeaders
// error codes.
var (
	// ErrElectionNotNeeded: the preferred replica leads already (or, for
	// an unclean election, the partition has a live leader):
	// ELECTION_NOT_NEEDED.
	ErrElectionNotNeeded = errors.New("controller: leader election not needed")
	// ErrPreferredLeaderNotAvailable: the preferred replica is not live
	// or not in the ISR: PREFERRED_LEADER_NOT_AVAILABLE.
	ErrPreferredLeaderNotAvailable = errors.New("controller: the preferred leader is not available")
	// ErrEligibleLeadersNotAvailable: no replica can lead:
	// ELIGIBLE_LEADERS_NOT_AVAILABLE.
	ErrEligibleLeadersNotAvailable = errors.New("controller: no eligible leader available")
	// ErrUnknownPartition: UNKNOWN_TOPIC_OR_PARTITION.
	ErrUnknownPartition = errors.New("controller: unknown topic or partition")
)

// PartitionRef names a partition.
type PartitionRef struct {
	Topic     string
	Partition int32
}

// Election is Elect's outcome for one partition: the decision to write
// when Err is nil.
type Election struct {
	PartitionRef
	Decision Decision
	Err      error
}

// Elect is ElectLeaders' decision for the named partitions (nil: every
// partition of the snapshot, in topic then partition order), one
// Election per partition asked for, in the order asked.
//
// Preferred: the first replica becomes the leader if it is live (its
// broker registered, not shutting down, not restarted since the state)
// and in the ISR; the ISR is unchanged. Unclean (the operator's request,
// whatever the topic config says): a partition without a live leader
// gets the election Decide would make with unclean election enabled (a
// clean one when an ISR member is electable), and only a decision that
// leaves it with a leader counts.
func Elect(snap *clustermeta.Snapshot, parts []PartitionRef, kind ElectionType) []Election {
	if parts == nil {
		for _, topic := range sortedTopics(snap) {
			for _, s := range snap.Partitions[topic] {
				parts = append(parts, PartitionRef{Topic: topic, Partition: s.Partition})
			}
		}
	}
	out := make([]Election, len(parts))
	for i, ref := range parts {
		out[i].PartitionRef = ref
		s, ok := snap.Partition(ref.Topic, ref.Partition)
		if !ok {
			out[i].Err = ErrUnknownPartition
			continue
		}
		switch kind {
		case PreferredElection:
			out[i].Decision, out[i].Err = electPreferred(s, snap.Brokers)
		case UncleanElection:
			out[i].Decision, out[i].Err = electUnclean(s, snap.Brokers)
		default:
			out[i].Err = errors.New("controller: unknown election type")
		}
	}
	return out
}

func electPreferred(s clustermeta.PartitionState, brokers map[int32]clustermeta.BrokerInfo) (Decision, error) {
	if len(s.Replicas) == 0 {
		return Decision{}, ErrPreferredLeaderNotAvailable
	}
	p := s.Replicas[0]
	if s.Leader == p {
		return Decision{}, ErrElectionNotNeeded
	}
	if !slices.Contains(s.ISR, p) || statusOf(brokers, p, s) != statusLive {
		return Decision{}, ErrPreferredLeaderNotAvailable
	}
	return Decision{Old: s, New: changed(s, p, s.ISR, true), Reason: ReasonPreferredElection}, nil
}

func electUnclean(s clustermeta.PartitionState, brokers map[int32]clustermeta.BrokerInfo) (Decision, error) {
	if s.Leader != clustermeta.NoLeader && slices.Contains(s.ISR, s.Leader) && statusOf(brokers, s.Leader, s) == statusLive {
		return Decision{}, ErrElectionNotNeeded
	}
	n, why, ok := decidePartition(s, brokers, true)
	if !ok || n.Leader == clustermeta.NoLeader {
		return Decision{}, ErrEligibleLeadersNotAvailable
	}
	return Decision{Old: s, New: n, Reason: why}, nil
}
