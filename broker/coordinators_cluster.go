package broker

// The coordinators in cluster mode (owner: the coordinators work; see
// cluster_config.go): a broker runs the group and transaction coordinator
// of the internal topics' partitions it leads.
//
// As Kafka's GroupCoordinator and TransactionCoordinator onElection and
// onResignation: becoming the leader of a partition of __consumer_offsets
// or __transaction_state loads that partition's groups or transactional
// ids from the local, replicated log (its requests answer
// COORDINATOR_LOAD_IN_PROGRESS meanwhile), and losing it unloads them
// (NOT_COORDINATOR from then on). The coordinators' writes are acks=all:
// appendInternal waits for the high watermark (awaitReplicated) and a
// write to a partition this broker no longer leads fails with
// NOT_COORDINATOR, so a client looks the coordinator up again. Markers
// for partitions led elsewhere travel as WriteTxnMarkers, produce-time
// verification asks the coordinator's broker (coordinators_peers.go).

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/client"
)

// coordCluster is the coordinators' cluster-mode state.
type coordCluster struct {
	mu sync.Mutex
	// ctx ends when the coordinators stop: loads and requests to other
	// brokers give up.
	ctx    context.Context
	cancel context.CancelFunc
	closed bool
	loads  sync.WaitGroup
	// peers are the connections to other brokers (markers,
	// verification), by node id.
	peers map[int32]*client.Conn
}

// startCoordinatorsCluster prepares the cluster-mode state; the
// coordinators then serve no partition until elected.
func (s *Server) startCoordinatorsCluster() {
	s.coord.ctx, s.coord.cancel = context.WithCancel(s.baseCtx)
}

// stopLoadWait bounds how long shutdown waits for partition loads in
// flight (a load completing a transaction may wait on replication).
const stopLoadWait = 2 * time.Second

// stopCoordinatorsCluster ends the loads in flight (waiting a bounded
// time; a later one finds the coordinators shut and installs nothing) and
// the connections to other brokers.
func (s *Server) stopCoordinatorsCluster() {
	c := &s.coord
	c.mu.Lock()
	if c.cancel == nil || c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.cancel()
	peers := c.peers
	c.peers = nil
	c.mu.Unlock()
	done := make(chan struct{})
	go func() { c.loads.Wait(); close(done) }()
	t := time.NewTimer(stopLoadWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		s.log.Warn("coordinators stopped with partition loads still running")
	}
	for _, p := range peers {
		p.Close()
	}
}

// coordinatorsElected is called when this broker becomes the leader of a
// partition of __consumer_offsets or __transaction_state at epoch: the
// coordinator loads that partition's state from its replicated log and
// then serves it. It returns at once (the load runs on its own
// goroutine); calls for one partition come in the order of its
// leadership changes.
func (s *Server) coordinatorsElected(p *Partition, epoch int32) {
	if s.cfg.Cluster == nil || s.groups == nil {
		return
	}
	var load func()
	switch p.Topic.Name {
	case offsetsTopic:
		load = s.groups.LoadPartition(p.Index, epoch)
	case txnStateTopic:
		load = s.txns.LoadPartition(p.Index, epoch)
	default:
		return
	}
	c := &s.coord
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.loads.Add(1)
	go func() {
		defer c.loads.Done()
		load()
	}()
}

// coordinatorsResigned is called when this broker stops leading such a
// partition: the coordinator unloads it (its requests answer
// NOT_COORDINATOR from then on).
func (s *Server) coordinatorsResigned(p *Partition) {
	if s.cfg.Cluster == nil || s.groups == nil {
		return
	}
	switch p.Topic.Name {
	case offsetsTopic:
		s.groups.UnloadPartition(p.Index)
	case txnStateTopic:
		s.txns.UnloadPartition(p.Index)
	}
}

// coordinatorWriteCode maps the code of a coordinator write that failed
// as Kafka's coordinators answer it: the partition moved
// (NOT_LEADER_OR_FOLLOWER) or its disk failed is NOT_COORDINATOR, too few
// in-sync replicas is COORDINATOR_NOT_AVAILABLE; the client looks the
// coordinator up again or retries.
func coordinatorWriteCode(code int16) int16 {
	switch code {
	case kerr.NotLeaderForPartition.Code, kerr.KafkaStorageError.Code:
		return kerr.NotCoordinator.Code
	case kerr.NotEnoughReplicas.Code, kerr.NotEnoughReplicasAfterAppend.Code, kerr.UnknownTopicOrPartition.Code:
		return kerr.CoordinatorNotAvailable.Code
	}
	return code
}
