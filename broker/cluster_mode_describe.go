package broker

// Cluster mode's answers about the cluster (owner: the cluster-metadata
// work; see cluster_config.go), shared by Metadata, DescribeCluster,
// DescribeTopicPartitions and FindCoordinator: the registered brokers
// with the endpoint of the listener the request came on (as Kafka answers
// with the same listener's advertised endpoints; a broker without that
// listener is left out), the controller, and each partition's leader,
// leader epoch, replicas, ISR and offline replicas from the snapshot the
// reconciler applied last.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/clustermeta"
	"github.com/verbatim-kafka/verbatim/coordlog"
)

// clusterBroker is one registered broker as a request's listener sees it.
type clusterBroker struct {
	id   int32
	host string
	port int32
	rack *string
}

func listenerName(l *Listener) string {
	if l == nil || l.Name == "" {
		return string(ProtocolPlaintext)
	}
	return l.Name
}

// clusterBrokers are the registered brokers that have the listener, by
// node id.
func clusterBrokers(snap *clustermeta.Snapshot, l *Listener) []clusterBroker {
	name := listenerName(l)
	var out []clusterBroker
	for _, b := range liveBrokers(snap) {
		e, ok := b.Endpoint(name)
		if !ok {
			continue
		}
		cb := clusterBroker{id: b.NodeID, host: e.Host, port: e.Port}
		if b.Rack != "" {
			rack := b.Rack
			cb.rack = &rack
		}
		out = append(out, cb)
	}
	return out
}

// clusterControllerID is the controller's node id when it is registered;
// otherwise (no controller elected) the lowest registered node id (every
// broker answers the same), so clients that send admin requests to "the
// controller" reach a broker that serves them (any broker does).
func (s *Server) clusterControllerID(snap *clustermeta.Snapshot) int32 {
	if _, ok := snap.Brokers[snap.Controller]; ok && snap.Controller != clustermeta.NoLeader {
		return snap.Controller
	}
	if bs := liveBrokers(snap); len(bs) > 0 {
		return bs[0].NodeID
	}
	return s.cfg.NodeID
}

// partitionView is one partition as the describe APIs answer it.
type partitionView struct {
	code                    int16
	leader, epoch           int32
	replicas, isr, offlines []int32
}

// clusterPartition describes partition i of t from snap:
// LEADER_NOT_AVAILABLE (leader -1) when no registered broker leads it,
// LISTENER_NOT_FOUND (listenerErrors: Metadata v6+) when its leader has no
// endpoint on the request's listener; offline replicas are the
// unregistered ones.
func clusterPartition(snap *clustermeta.Snapshot, t *Topic, i int32, l *Listener, listenerErrors bool) partitionView {
	st, ok := snap.Partition(t.Name, i)
	if !ok || st.TopicID != t.ID {
		return partitionView{code: kerr.LeaderNotAvailable.Code, leader: -1, epoch: -1, replicas: []int32{}, isr: []int32{}, offlines: []int32{}}
	}
	v := partitionView{leader: st.Leader, epoch: st.LeaderEpoch, replicas: slices.Clone(st.Replicas), isr: slices.Clone(st.ISR), offlines: []int32{}}
	for _, r := range st.Replicas {
		if _, ok := snap.Brokers[r]; !ok {
			v.offlines = append(v.offlines, r)
		}
	}
	leader, alive := snap.Brokers[st.Leader]
	switch {
	case st.Leader == clustermeta.NoLeader || !alive:
		v.code, v.leader = kerr.LeaderNotAvailable.Code, -1
	default:
		if _, ok := leader.Endpoint(listenerName(l)); !ok {
			v.code = kerr.LeaderNotAvailable.Code
			if listenerErrors {
				v.code = kerr.ListenerNotFound.Code
			}
		}
	}
	if v.replicas == nil {
		v.replicas = []int32{}
	}
	if v.isr == nil {
		v.isr = []int32{}
	}
	return v
}

// clusterCoordinator answers FindCoordinator in cluster mode: the leader
// of the internal topic's partition the key maps to, with its endpoint on
// the request's listener; COORDINATOR_NOT_AVAILABLE while it has none.
func (s *Server) clusterCoordinator(l *Listener, topic, key string) (int32, string, int32, int16, *string) {
	t, err := s.internalTopic(topic)
	if err != nil {
		msg := err.Error()
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code, &msg
	}
	p := coordlog.PartitionForKey(key, int32(len(t.Partitions())))
	snap := s.clusterSnapshot()
	st, ok := snap.Partition(topic, p)
	if ok {
		if b, alive := snap.Brokers[st.Leader]; alive && st.Leader != clustermeta.NoLeader {
			if e, ok := b.Endpoint(listenerName(l)); ok {
				return b.NodeID, e.Host, e.Port, 0, nil
			}
		}
	}
	msg := "The coordinator's partition has no leader."
	return -1, "", -1, kerr.CoordinatorNotAvailable.Code, &msg
}

// metadataBrokers is Metadata's broker list in cluster mode.
func metadataBrokers(snap *clustermeta.Snapshot, l *Listener) []kmsg.MetadataResponseBroker {
	var out []kmsg.MetadataResponseBroker
	for _, cb := range clusterBrokers(snap, l) {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port, b.Rack = cb.id, cb.host, cb.port, cb.rack
		out = append(out, b)
	}
	return out
}

// replicationFactor is t's replica count (1 on a single node).
func replicationFactor(t *Topic) int16 {
	if p := t.Partition(0); p != nil {
		if st := p.cstate.Load(); st != nil {
			return int16(len(st.Replicas) - len(st.AddingReplicas))
		}
	}
	return 1
}
