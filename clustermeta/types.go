package clustermeta

import "errors"

// NoLeader is PartitionState.Leader when no replica leads (Kafka's -1).
const NoLeader int32 = -1

// Endpoint is one advertised listener of a broker.
type Endpoint struct {
	// Listener is the listener's name ("PLAINTEXT", "INTERNAL").
	Listener string `json:"listener"`
	// SecurityProtocol is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
	SecurityProtocol string `json:"security_protocol"`
	Host             string `json:"host"`
	Port             int32  `json:"port"`
}

// BrokerInfo is a broker's registration (Kafka's BrokerRegistration).
type BrokerInfo struct {
	NodeID int32  `json:"node_id"`
	Rack   string `json:"rack,omitempty"`
	// Endpoints are the broker's advertised listeners.
	Endpoints []Endpoint `json:"endpoints"`
	// InterBrokerListener names the endpoint followers and the controller
	// use (inter.broker.listener.name).
	InterBrokerListener string `json:"inter_broker_listener"`
	// Incarnation is random per process start (Kafka's incarnation id).
	Incarnation string `json:"incarnation"`
	// ShuttingDown is set by a controlled shutdown: the controller moves
	// leadership away and takes the broker out of every ISR.
	ShuttingDown bool `json:"shutting_down,omitempty"`
	// Epoch is the broker epoch, assigned by the store at registration
	// (the etcd revision that created the registration): it grows with
	// every registration of the node id, and fetches from a follower carry
	// it (Fetch's ReplicaState.ReplicaEpoch). Not stored in the value.
	Epoch int64 `json:"-"`
}

// Endpoint returns the named endpoint, false when absent.
func (b BrokerInfo) Endpoint(listener string) (Endpoint, bool) {
	for _, e := range b.Endpoints {
		if e.Listener == listener {
			return e, true
		}
	}
	return Endpoint{}, false
}

// TopicRecord is a topic: its id, partition count and config overrides.
type TopicRecord struct {
	Name string `json:"name"`
	// ID is the topic id (Kafka's Uuid).
	ID [16]byte `json:"id"`
	// Partitions is the partition count; partition states exist for
	// 0..Partitions-1.
	Partitions int32 `json:"partitions"`
	// Configs are the topic's config overrides (what CreateTopics and
	// the config APIs set), not the effective values.
	Configs map[string]string `json:"configs,omitempty"`
	// Version is the record's etcd ModRevision, assigned by the store;
	// updates compare it. Not stored in the value.
	Version int64 `json:"-"`
}

// PartitionState is one partition's assignment and leadership (Kafka's
// PartitionRecord / PartitionChangeRecord applied).
type PartitionState struct {
	Topic     string   `json:"topic"`
	TopicID   [16]byte `json:"topic_id"`
	Partition int32    `json:"partition"`
	// Replicas is the assignment, preferred leader first.
	Replicas []int32 `json:"replicas"`
	// ISR is the in-sync replica set.
	ISR []int32 `json:"isr"`
	// Leader is the leading replica, NoLeader when none.
	Leader int32 `json:"leader"`
	// LeaderEpoch grows with every leader change (and with the mirror
	// epoch rule's bumps).
	LeaderEpoch int32 `json:"leader_epoch"`
	// PartitionEpoch grows with every change of the state.
	PartitionEpoch int32 `json:"partition_epoch"`
	// AddingReplicas and RemovingReplicas describe a reassignment in
	// progress (KIP-455); Replicas then holds the union.
	AddingReplicas   []int32 `json:"adding_replicas,omitempty"`
	RemovingReplicas []int32 `json:"removing_replicas,omitempty"`
	// Version is the record's etcd ModRevision, assigned by the store;
	// compare-and-swap writes compare it. Not stored in the value.
	Version int64 `json:"-"`
}

// Snapshot is the whole cluster state at one etcd revision. Snapshots
// are immutable: the store builds a new one for every change it delivers
// (sharing unchanged records), so readers keep one without locks.
type Snapshot struct {
	// Revision is the etcd revision the snapshot reflects.
	Revision  int64
	ClusterID string
	// Brokers are the registered (alive, unfenced) brokers.
	Brokers map[int32]BrokerInfo
	Topics  map[string]TopicRecord
	// Partitions holds each topic's partition states, index = partition.
	Partitions map[string][]PartitionState
	// Controller is the node id of the elected controller, NoLeader when
	// none.
	Controller int32
	// Records are the named, versioned records of other packages' kinds
	// (Store.PutRecord): kind -> name -> record. A kind without records
	// is absent.
	Records map[string]map[string]Record
	// Corrupt lists the stored values that did not decode, each error
	// naming its key; their records are left out of the snapshot.
	Corrupt []error
}

// Partition returns a partition's state, false when absent.
func (s *Snapshot) Partition(topic string, p int32) (PartitionState, bool) {
	ps := s.Partitions[topic]
	if p < 0 || int(p) >= len(ps) {
		return PartitionState{}, false
	}
	return ps[p], true
}

// Record is one named record of a kind (Store.PutRecord): its value is
// the owning package's encoding, opaque to the store.
type Record struct {
	Value []byte
	// Version is the record's etcd ModRevision, assigned by the store;
	// PutRecord and DeleteRecord compare it.
	Version int64
}

// Record returns the named record of a kind, false when absent.
func (s *Snapshot) Record(kind, name string) (Record, bool) {
	r, ok := s.Records[kind][name]
	return r, ok
}

// Errors of the store's conditional writes.
var (
	// ErrConflict: a compare-and-swap found a newer version (or a held
	// fence gone): re-read and decide again.
	ErrConflict = errors.New("clustermeta: the record changed since it was read")
	// ErrTopicExists: CreateTopic of a name that exists.
	ErrTopicExists = errors.New("clustermeta: the topic exists")
	// ErrNotFound: the record does not exist.
	ErrNotFound = errors.New("clustermeta: no such record")
	// ErrFenced: the writer's session or leadership is gone.
	ErrFenced = errors.New("clustermeta: the writer's session or leadership has ended")
)
