package controller

import (
	"errors"
	"fmt"
	"sort"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// ErrNotEnoughBrokers is an assignment asking for more replicas than
// there are live brokers (Kafka's INVALID_REPLICATION_FACTOR).
var ErrNotEnoughBrokers = errors.New("controller: replication factor larger than the available brokers")

// ErrInvalidReplicationFactor is a replication factor below 1 (Kafka's
// INVALID_REPLICATION_FACTOR too; the caller resolves -1, "the broker's
// default.replication.factor", before calling Assign).
var ErrInvalidReplicationFactor = errors.New("controller: replication factor must be at least 1")

// Assign places count new partitions (numbered from first) with rf
// replicas each on the live brokers, rack-aware as Kafka's
// StripedReplicaPlacer: replicas of one partition on distinct brokers and,
// when racks are set, spread over racks; leaders (first replicas) spread
// over brokers. start seeds the rotation (Kafka picks it at random; tests
// pass a fixed one).
//
// Brokers in controlled shutdown take no new replicas (Kafka places only
// on unfenced brokers not shutting down); a node id listed twice counts
// once. A broker without a rack is a rack of its own name "" (Kafka
// treats the absent rack as one more rack). The result is a function of
// the set of brokers, first, count, rf and start alone: the order in
// which brokers are given does not matter.
//
// The placement: brokers are sorted by node id within their rack and the
// racks by name, then interleaved rack by rack (r0[0], r1[0], r2[0],
// r0[1], ...) into one ring, so neighbours on the ring are on different
// racks as long as racks remain. Partition first+i is led by the ring's
// broker start+first+i: leaders go round the ring, each broker leading
// count/n or count/n+1 of the new partitions. Its followers are taken
// walking the ring from the leader, each the next broker on a rack the
// partition has no replica on yet (once every rack has one, or the racks
// still free have no broker left, the next broker on any rack); the walk's starting offset grows by one every full
// turn of the leaders, so followers of the same leader differ from turn
// to turn as the older AdminUtils placement shifts them.
func Assign(brokers []clustermeta.BrokerInfo, first, count int32, rf int16, start int) ([][]int32, error) {
	if rf < 1 {
		return nil, fmt.Errorf("%w (got %d)", ErrInvalidReplicationFactor, rf)
	}
	if count < 0 || first < 0 {
		return nil, fmt.Errorf("controller: invalid partition range %d+%d", first, count)
	}
	ring, racks := placementRing(brokers)
	n := len(ring)
	if int(rf) > n {
		return nil, fmt.Errorf("%w: replication factor %d, %d usable brokers", ErrNotEnoughBrokers, rf, n)
	}
	rackCount := len(racks)
	out := make([][]int32, count)
	used := make(map[string]bool, rackCount)
	for i := 0; i < int(count); i++ {
		pos := int(first) + i
		leader := mod(start+pos, n)
		// The followers' offset: 0 on the first turn of the leaders
		// around the ring, then 1, 2, ... (n-1 possible offsets).
		shift := 0
		if n > 1 {
			shift = mod(floorDiv(start+pos, n), n-1)
		}
		replicas := make([]int32, 0, rf)
		chosen := make([]bool, n)
		clear(used)
		take := func(j int) {
			chosen[j] = true
			replicas = append(replicas, ring[j].id)
			used[ring[j].rack] = true
			if len(used) == rackCount {
				clear(used) // every rack has one: start a new round
			}
		}
		take(leader)
		for len(replicas) < int(rf) {
			// The next broker on a rack without a replica of this
			// partition; when no unchosen broker is on such a rack (the
			// racks left are used up), the next unchosen broker.
			next := -1
			for k := 0; k < n; k++ {
				j := mod(leader+1+shift+k, n)
				if chosen[j] {
					continue
				}
				if !used[ring[j].rack] {
					next = j
					break
				}
				if next < 0 {
					next = j
				}
			}
			take(next) // rf <= n: an unchosen broker exists
		}
		out[i] = replicas
	}
	return out, nil
}

type ringBroker struct {
	id   int32
	rack string
}

// placementRing is the usable brokers interleaved rack by rack, and the
// racks' names in order.
func placementRing(brokers []clustermeta.BrokerInfo) ([]ringBroker, []string) {
	byRack := make(map[string][]int32)
	seen := make(map[int32]bool, len(brokers))
	for _, b := range brokers {
		if b.ShuttingDown || seen[b.NodeID] {
			continue
		}
		seen[b.NodeID] = true
		byRack[b.Rack] = append(byRack[b.Rack], b.NodeID)
	}
	racks := make([]string, 0, len(byRack))
	for r, ids := range byRack {
		racks = append(racks, r)
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	}
	sort.Strings(racks)
	ring := make([]ringBroker, 0, len(seen))
	for depth := 0; len(ring) < len(seen); depth++ {
		for _, r := range racks {
			if ids := byRack[r]; depth < len(ids) {
				ring = append(ring, ringBroker{id: ids[depth], rack: r})
			}
		}
	}
	return ring, racks
}

func mod(a, n int) int {
	m := a % n
	if m < 0 {
		m += n
	}
	return m
}

func floorDiv(a, n int) int {
	q := a / n
	if a%n != 0 && (a < 0) != (n < 0) {
		q--
	}
	return q
}
