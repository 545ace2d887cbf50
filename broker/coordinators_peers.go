package broker

// The coordinators' requests to other brokers in cluster mode (owner: the
// coordinators work; see cluster_config.go).
//
// Transaction markers for a partition led by another broker go to that
// leader as WriteTxnMarkers, as Kafka's TransactionMarkerChannelManager
// sends them: the leader is read from the cluster snapshot before every
// try, so after NOT_LEADER_OR_FOLLOWER (or a broken connection) the next
// try goes to the new leader. One WriteMarker call makes a few tries; a
// marker still unwritten keeps its transaction in Prepare*, and the
// transaction coordinator's tick retries it until a leader takes it.
//
// KIP-890's produce-time verification asks the transaction coordinator's
// broker with AddPartitionsToTxn v4 VerifyOnly when the coordinator of the
// transactional id is on another broker (Kafka's AddPartitionsToTxnManager,
// one request per verification here, not batched per coordinator).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/clustermeta"
	"github.com/verbatim-kafka/verbatim/coordlog"
)

const (
	// markerTries is how many leaders one WriteMarker call tries,
	// markerBackoff the pause between tries.
	markerTries   = 5
	markerBackoff = 100 * time.Millisecond
	// peerRequestTimeout bounds one request to another broker.
	peerRequestTimeout = 10 * time.Second
)

// writeMarkerCluster writes a marker to tp's current leader: this broker
// through the local marker path, another one over WriteTxnMarkers.
// coordlog.ErrPartitionGone when the topic no longer exists, an error with
// coordlog.ErrFenced when the leader refused the marker as stale.
func (s *Server) writeMarkerCluster(tp coordlog.TopicPartition, pid int64, epoch int16, commit bool, cepoch int32, now time.Time) error {
	var err error
	for try := 0; try < markerTries; try++ {
		if try > 0 {
			if !sleepCtx(s.coord.ctx, markerBackoff) {
				return errors.Join(err, s.coord.ctx.Err())
			}
		}
		var leader int32
		if leader, err = s.partitionLeader(tp); err != nil {
			return err
		}
		switch leader {
		case s.cfg.NodeID:
			p := s.localPartition(tp)
			if p == nil {
				err = fmt.Errorf("%s-%d is not hosted here yet", tp.Topic, tp.Partition)
				continue
			}
			err = s.writeMarkerLocal(p, pid, epoch, commit, cepoch, now)
		case clustermeta.NoLeader:
			err = fmt.Errorf("%s-%d has no leader", tp.Topic, tp.Partition)
		default:
			err = s.sendMarker(leader, tp, pid, epoch, commit, cepoch)
		}
		if err == nil || errors.Is(err, coordlog.ErrFenced) || errors.Is(err, coordlog.ErrPartitionGone) {
			return err
		}
	}
	return err
}

// partitionLeader is tp's leader in the latest cluster snapshot
// (NoLeader before the first); coordlog.ErrPartitionGone when the
// snapshot has no such partition.
func (s *Server) partitionLeader(tp coordlog.TopicPartition) (int32, error) {
	snap := s.clusterSnapshot()
	if snap == nil {
		return clustermeta.NoLeader, nil
	}
	st, ok := snap.Partition(tp.Topic, tp.Partition)
	if !ok {
		return clustermeta.NoLeader, coordlog.ErrPartitionGone
	}
	return st.Leader, nil
}

// localPartition is this broker's partition tp, nil if it has none.
func (s *Server) localPartition(tp coordlog.TopicPartition) *Partition {
	return s.cluster.topic(tp.Topic).Partition(tp.Partition)
}

// sendMarker sends one marker to broker node and maps its answer.
func (s *Server) sendMarker(node int32, tp coordlog.TopicPartition, pid int64, epoch int16, commit bool, cepoch int32) error {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = pid, epoch, commit, cepoch
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = tp.Topic, []int32{tp.Partition}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	kresp, err := s.peerRequest(node, req, writeTxnMarkersMaxVersion)
	if err != nil {
		return err
	}
	resp := kresp.(*kmsg.WriteTxnMarkersResponse)
	if len(resp.Markers) != 1 || len(resp.Markers[0].Topics) != 1 || len(resp.Markers[0].Topics[0].Partitions) != 1 {
		return fmt.Errorf("broker %d answered WriteTxnMarkers with another shape than asked", node)
	}
	return markerCodeError(resp.Markers[0].Topics[0].Partitions[0].ErrorCode)
}

// markerCodeError is the WriteMarker error of a leader's marker answer,
// as Kafka's TransactionMarkerRequestCompletionHandler reads it: a stale
// producer or coordinator epoch ends the marker (ErrFenced), anything
// else is retried.
func markerCodeError(code int16) error {
	switch code {
	case 0:
		return nil
	case kerr.InvalidProducerEpoch.Code, kerr.ProducerFenced.Code, kerr.TransactionCoordinatorFenced.Code:
		return fmt.Errorf("%w: %w", coordlog.ErrFenced, kerr.ErrorForCode(code))
	}
	return &coordlog.CodedError{Code: code, Err: kerr.ErrorForCode(code)}
}

// verifyTxnRemote asks the transaction coordinator's broker whether p is
// in the ongoing transaction of pid/epoch (AddPartitionsToTxn v4
// VerifyOnly); it returns the code for p, NETWORK_EXCEPTION when the
// coordinator's broker could not be asked.
func (s *Server) verifyTxnRemote(node int32, txnID string, pid int64, epoch int16, p coordlog.TopicPartition) int16 {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = txnID, pid, epoch, true
	tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	tt.Topic, tt.Partitions = p.Topic, []int32{p.Partition}
	tx.Topics = append(tx.Topics, tt)
	req.Transactions = append(req.Transactions, tx)
	kresp, err := s.peerRequest(node, req, 4)
	if err != nil || req.Version < 4 {
		return kerr.NetworkException.Code
	}
	resp := kresp.(*kmsg.AddPartitionsToTxnResponse)
	if resp.ErrorCode != 0 {
		return resp.ErrorCode
	}
	for _, rtx := range resp.Transactions {
		for _, rt := range rtx.Topics {
			for _, rp := range rt.Partitions {
				if rt.Topic == p.Topic && rp.Partition == p.Partition {
					return rp.ErrorCode
				}
			}
		}
	}
	return kerr.UnknownServerError.Code
}

// verifyTxnOffsetsRemote checks a TxnOffsetCommit against a transaction
// coordinated on broker node: the group's offsets partition tp must be in
// the ongoing transaction. What the coordinator's broker could not answer
// is COORDINATOR_NOT_AVAILABLE, which the client retries.
func (s *Server) verifyTxnOffsetsRemote(node int32, txnID string, pid int64, epoch int16, tp coordlog.TopicPartition) int16 {
	if node == clustermeta.NoLeader {
		return kerr.CoordinatorNotAvailable.Code
	}
	switch code := s.verifyTxnRemote(node, txnID, pid, epoch, tp); code {
	case kerr.NetworkException.Code, kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code:
		return kerr.CoordinatorNotAvailable.Code
	default:
		return code
	}
}

// txnCoordinatorNode is the broker coordinating txnID: the leader of its
// __transaction_state partition (NoLeader when unknown). On a single node
// it is this one.
func (s *Server) txnCoordinatorNode(txnID string) int32 {
	if s.cfg.Cluster == nil {
		return s.cfg.NodeID
	}
	p := s.txns.PartitionFor(txnID)
	leader, _ := s.partitionLeader(coordlog.TopicPartition{Topic: txnStateTopic, Partition: p})
	return leader
}

// peerRequest sends req to broker node over the inter-broker listener
// (one connection per broker, dialled again after a failure), at most at
// maxVersion.
func (s *Server) peerRequest(node int32, req kmsg.Request, maxVersion int16) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(s.coord.ctx, peerRequestTimeout)
	defer cancel()
	conn, err := s.peerConn(ctx, node)
	if err != nil {
		return nil, err
	}
	resp, err := conn.Request(ctx, req, maxVersion)
	if err != nil {
		s.dropPeer(node, conn)
		return nil, fmt.Errorf("broker %d: %w", node, err)
	}
	return resp, nil
}

// peerConn is the connection to broker node, dialled if there is none
// (or it broke, or the broker's address changed).
func (s *Server) peerConn(ctx context.Context, node int32) (*client.Conn, error) {
	addr, ok := s.LeaderAddr(node)
	if !ok {
		return nil, fmt.Errorf("broker %d is not registered", node)
	}
	c := &s.coord
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errors.New("coordinators stopped")
	}
	if pc := c.peers[node]; pc != nil && !pc.Broken() && pc.Addr() == addr {
		c.mu.Unlock()
		return pc, nil
	}
	c.mu.Unlock()
	conn, err := client.Dial(ctx, addr, s.InterBrokerClient())
	if err != nil {
		return nil, fmt.Errorf("broker %d: %w", node, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		conn.Close()
		return nil, errors.New("coordinators stopped")
	}
	if old := c.peers[node]; old != nil {
		old.Close()
	}
	if c.peers == nil {
		c.peers = map[int32]*client.Conn{}
	}
	c.peers[node] = conn
	return conn, nil
}

func (s *Server) dropPeer(node int32, conn *client.Conn) {
	c := &s.coord
	c.mu.Lock()
	if c.peers[node] == conn {
		delete(c.peers, node)
	}
	c.mu.Unlock()
	conn.Close()
}
