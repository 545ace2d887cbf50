package clustermeta

import "context"

// Store is the cluster state in etcd (etcd.go implements it over
// go.etcd.io/etcd/client/v3). Every write is one etcd transaction; the
// conditional ones compare versions (ModRevisions) and, when given a
// Fence, that the fencing key still exists at the revision the fence
// holds, so a writer whose lease or leadership ended cannot write.
type Store interface {
	// ClusterID is the cluster's id, created by the first broker that
	// opened the store (Kafka's cluster.id).
	ClusterID() string

	// Snapshot reads the whole state at the current revision.
	Snapshot(ctx context.Context) (*Snapshot, error)
	// Watch delivers a snapshot after every change from the current one
	// on (the first value is the current state). Deliveries coalesce: a
	// slow reader skips to the latest. The channel closes when ctx ends
	// or the store closes.
	Watch(ctx context.Context) <-chan *Snapshot

	// Register stores the broker's registration under a lease of the
	// given TTL (broker.session.timeout.ms) that the session keeps alive.
	// A node id registered by another live session is refused with
	// ErrConflict (Kafka refuses a duplicate broker id).
	Register(ctx context.Context, b BrokerInfo, ttlSeconds int64) (*Session, error)

	// CreateTopic writes a new topic and its partition states in one
	// transaction; ErrTopicExists if the name exists. The returned values
	// carry their versions.
	CreateTopic(ctx context.Context, t TopicRecord, parts []PartitionState) (TopicRecord, []PartitionState, error)
	// UpdateTopic replaces a topic's record (configs) if its Version is
	// unchanged (ErrConflict otherwise, ErrNotFound if deleted).
	UpdateTopic(ctx context.Context, t TopicRecord) (TopicRecord, error)
	// AddPartitions raises the partition count of t (its Version
	// compared) and writes the new partitions' states.
	AddPartitions(ctx context.Context, t TopicRecord, parts []PartitionState) (TopicRecord, error)
	// DeleteTopic removes a topic and its partition states if its id is
	// id (ErrNotFound otherwise).
	DeleteTopic(ctx context.Context, name string, id [16]byte) error

	// CASPartitions writes the states, each only if its Version is the
	// stored one, all or none, and only while fence holds (the zero
	// Fence: unfenced). PartitionEpoch is the caller's to raise. It
	// returns the states with their new versions; ErrConflict or
	// ErrFenced when a comparison fails.
	CASPartitions(ctx context.Context, fence Fence, states []PartitionState) ([]PartitionState, error)

	// AllocateProducerIDs reserves n consecutive producer ids no other
	// caller ever gets and returns the first.
	AllocateProducerIDs(ctx context.Context, n int64) (int64, error)

	// PutRecord writes the named record of a kind (a space for other
	// packages' state: ACLs, SCRAM credentials, mirror state; each kind
	// is its owner's to encode) if expectVersion holds: AnyVersion
	// writes unconditionally, MustNotExist only if the record is absent,
	// a version only if it is the stored one (ErrConflict otherwise,
	// also when the record is gone), and only while fence holds (the
	// zero Fence: unfenced; ErrFenced). It returns the new version.
	// Kinds hold no '/' and neither is empty; names are not empty and
	// may hold anything else.
	PutRecord(ctx context.Context, fence Fence, kind, name string, value []byte, expectVersion int64) (int64, error)
	// DeleteRecord removes the named record if expectVersion holds: a
	// version only if it is the stored one (ErrConflict otherwise, also
	// when the record is gone), AnyVersion whatever it is (ErrNotFound
	// when absent); only while fence holds (ErrFenced). It returns the
	// deletion's revision (a snapshot at or after it lacks the record).
	DeleteRecord(ctx context.Context, fence Fence, kind, name string, expectVersion int64) (int64, error)

	// Campaign blocks until this node is the controller (or ctx ends);
	// the leadership lasts until its Done channel closes or Resign.
	Campaign(ctx context.Context, nodeID int32, ttlSeconds int64) (*Leadership, error)

	// Close releases the client (not the sessions' leases: close those
	// first).
	Close() error
}

// Fence makes a write conditional on a session or a leadership still
// holding: the key exists with this create revision. The zero Fence does
// not fence.
type Fence struct {
	Key       string
	CreateRev int64
}

// Session is a broker's registration held alive by its lease.
type Session struct {
	// Info is the registration as stored, its Epoch set.
	Info BrokerInfo
	// impl is the implementation's state (etcd.go).
	impl SessionImpl
}

// Leadership is the controller's election win.
type Leadership struct {
	NodeID int32
	impl   LeadershipImpl
}
