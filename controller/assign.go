package controller

import (
	"errors"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// ErrNotEnoughBrokers is an assignment asking for more replicas than
// there are live brokers (Kafka's INVALID_REPLICATION_FACTOR).
var ErrNotEnoughBrokers = errors.New("controller: replication factor larger than the available brokers")

// Assign places count new partitions (numbered from first) with rf
// replicas each on the live brokers, rack-aware as Kafka's
// StripedReplicaPlacer: replicas of one partition on distinct brokers and,
// when racks are set, spread over racks; leaders (first replicas) spread
// over brokers. start seeds the rotation (Kafka picks it at random; tests
// pass a fixed one).
func Assign(brokers []clustermeta.BrokerInfo, first, count int32, rf int16, start int) ([][]int32, error) {
	return nil, errors.New("controller: not built yet")
}
