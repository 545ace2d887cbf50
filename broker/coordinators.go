package broker

// The broker's side of the group and transaction coordinators: it builds
// them over coordHost, the narrow interface they write through (internal
// topic appends, markers, replay, producer ids), and runs their timers.
// The coordinators never hold their own lock while calling coordHost, so
// these methods may take any broker lock and may call back into either
// coordinator.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/coordlog"
	"github.com/verbatim-kafka/verbatim/groupcoord"
	"github.com/verbatim-kafka/verbatim/storage"
	"github.com/verbatim-kafka/verbatim/txncoord"
)

// newCoordClock is the clock given to the coordinators when a Server
// opens; tests replace it to drive timeouts without sleeping.
var newCoordClock = func() coordlog.Clock { return coordlog.WallClock{} }

// initialRebalanceDelay is group.initial.rebalance.delay.ms for new
// servers; tests shorten it.
var initialRebalanceDelay = groupcoord.DefaultInitialRebalanceDelay

// requestedPartitions flattens a coordinator request's topics, each a name
// and its partition numbers as topic reads them, into the partitions the
// coordinators take, in request order. It is never nil: a nil list means
// "all partitions" to FetchOffsets.
func requestedPartitions[T any](topics []T, topic func(*T) (string, []int32)) []coordlog.TopicPartition {
	tps := []coordlog.TopicPartition{}
	for i := range topics {
		name, parts := topic(&topics[i])
		for _, p := range parts {
			tps = append(tps, coordlog.TopicPartition{Topic: name, Partition: p})
		}
	}
	return tps
}

// startCoordinators recovers the group and transaction coordinators from
// the internal topics and starts their timer loop. In cluster mode they
// start empty and load the partitions this broker is elected to lead
// (coordinators_cluster.go).
func (s *Server) startCoordinators() error {
	clock := newCoordClock()
	delay := initialRebalanceDelay
	if d := s.cfg.GroupInitialRebalanceDelay; d != nil {
		delay = *d
	}
	h := coordHost{s}
	lg := slog.New(limitedHandler{s.log.Handler(), s.faults}) // their failure lines are rate-limited too
	perPartition := s.cfg.Cluster != nil
	s.groups = groupcoord.New(groupcoord.Config{Log: h, Clock: clock, Logger: lg, InitialRebalanceDelay: delay, PerPartition: perPartition})
	s.txns = txncoord.New(txncoord.Config{Host: h, Clock: clock, Logger: lg, PerPartition: perPartition})
	if perPartition {
		s.startCoordinatorsCluster()
		go s.coordinatorLoop(s.baseCtx, clock)
		return nil
	}
	if err := s.groups.Load(); err != nil {
		return err
	}
	if err := s.txns.Load(); err != nil {
		return err
	}
	go s.coordinatorLoop(s.baseCtx, clock)
	return nil
}

func (s *Server) coordinatorLoop(ctx context.Context, clock coordlog.Clock) {
	every(ctx, coordlog.TickInterval, func() {
		now := clock.Now()
		s.groups.Tick(now)
		s.txns.Tick(now)
	})
}

// stopCoordinators answers waiting group members and refuses new
// coordinator requests (shutdown).
func (s *Server) stopCoordinators() {
	if s.groups != nil {
		s.groups.Shutdown()
	}
	if s.txns != nil {
		s.txns.Shutdown()
	}
	s.stopCoordinatorsCluster()
}

// coordHost is what the coordinators write through: coordlog.Log for
// both, txncoord.Host for the transaction coordinator.
type coordHost struct{ s *Server }

func (h coordHost) PartitionCount(topic string) int32 { return h.s.internalPartitionCount(topic) }

// Append maps the broker's errors to what the coordinators answer: the
// Kafka code of a kafkaError (a lost leadership is NOT_COORDINATOR, too
// few in-sync replicas COORDINATOR_NOT_AVAILABLE), ErrFenced for a fenced
// producer.
func (h coordHost) Append(topic string, p int32, recs []coordlog.Record, b coordlog.Batch, now time.Time) error {
	_, err := h.s.appendInternal(topic, p, recs, b, now)
	err = coordError(err)
	var ce *coordlog.CodedError
	if errors.As(err, &ce) {
		ce.Code = coordinatorWriteCode(ce.Code)
	}
	return err
}

func coordError(err error) error {
	if err == nil {
		return nil
	}
	if isProducerFenceErr(err) {
		err = fmt.Errorf("%w: %w", coordlog.ErrFenced, err)
	}
	var ke *kafkaError
	if errors.As(err, &ke) {
		return &coordlog.CodedError{Code: ke.err.Code, Err: err}
	}
	if code, _ := dataErrorToKafka(err); code == kerr.KafkaStorageError.Code {
		// As Kafka's coordinators answer a write that hit a storage
		// error: the client looks the coordinator up again.
		return &coordlog.CodedError{Code: kerr.NotCoordinator.Code, Err: err}
	}
	return err
}

func isProducerFenceErr(err error) bool {
	return errors.Is(err, storage.ErrInvalidProducerEpoch) || errors.Is(err, storage.ErrTransactionCoordinatorFenced)
}

func (h coordHost) Partitions(topic string) []int32 {
	t := h.s.cluster.topic(topic)
	if t == nil {
		return nil
	}
	ps := t.Partitions()
	out := make([]int32, len(ps))
	for i, p := range ps {
		out[i] = p.Index
	}
	return out
}

func (h coordHost) Replay(topic string, p int32, fn func(coordlog.Entry)) error {
	t := h.s.cluster.topic(topic)
	if t == nil {
		return nil
	}
	part := t.Partition(p)
	if part == nil {
		return nil
	}
	l, err := partitionLog(part)
	if err != nil {
		return fmt.Errorf("%s offline: %w", part.Dir(), err)
	}
	if err := h.s.replayInternal(l, fn); err != nil {
		return fmt.Errorf("%s: %w", part.Dir(), err)
	}
	return nil
}

func (h coordHost) PartitionExists(tp coordlog.TopicPartition) bool {
	t := h.s.cluster.topic(tp.Topic)
	if t == nil && tp.Topic == offsetsTopic {
		var err error
		if t, err = h.s.internalTopic(offsetsTopic); err != nil {
			return false
		}
	}
	return t != nil && t.Partition(tp.Partition) != nil
}

func (h coordHost) CoordinatorEpoch(p int32) int32 {
	if t := h.s.cluster.topic(txnStateTopic); t != nil {
		if part := t.Partition(p); part != nil {
			return part.LeaderEpoch()
		}
	}
	return 0
}

// WriteMarker writes the marker and, in __consumer_offsets, settles the
// producer's transactional offsets in the group coordinator (also when
// the partition refused the marker as stale: that transaction is over).
// In cluster mode the marker goes to the partition's leader
// (coordinators_peers.go).
func (h coordHost) WriteMarker(tp coordlog.TopicPartition, pid int64, epoch int16, commit bool, coordinatorEpoch int32, now time.Time) error {
	if h.s.cfg.Cluster != nil {
		return h.s.writeMarkerCluster(tp, pid, epoch, commit, coordinatorEpoch, now)
	}
	p := h.s.localPartition(tp)
	if p == nil {
		return coordlog.ErrPartitionGone
	}
	return h.s.writeMarkerLocal(p, pid, epoch, commit, coordinatorEpoch, now)
}

// writeMarkerLocal writes a marker to a partition of this broker (the
// marker path of the local coordinator and of WriteTxnMarkers) and, in
// __consumer_offsets, settles the producer's transactional offsets.
func (s *Server) writeMarkerLocal(p *Partition, pid int64, epoch int16, commit bool, coordinatorEpoch int32, now time.Time) error {
	err := coordError(s.writeTxnMarker(p, pid, epoch, commit, coordinatorEpoch, now))
	if err != nil && !errors.Is(err, coordlog.ErrFenced) {
		return err
	}
	if p.Topic.Name == offsetsTopic {
		s.groups.CompleteTxn(p.Index, pid, commit)
	}
	return err
}

func (h coordHost) AllocateProducerID() (int64, error) { return h.s.pids.allocate() }

func (h coordHost) EnsureProducerIDsAbove(min int64) error { return h.s.pids.ensureAbove(min) }

func (h coordHost) MaxLoggedProducerID() int64 { return h.s.maxLoggedProducerID() }

// maxLoggedProducerID is the highest producer id in the producer state of
// any partition (mirrored producers included), or -1.
func (s *Server) maxLoggedProducerID() int64 {
	maxPid := int64(-1)
	for _, t := range s.cluster.topics() {
		for _, p := range t.Partitions() {
			if l, err := partitionLog(p); err == nil {
				for _, pi := range l.Producers() {
					maxPid = max(maxPid, pi.ProducerID)
				}
			}
		}
	}
	return maxPid
}
