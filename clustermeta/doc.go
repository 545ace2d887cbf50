// Package clustermeta owns the cluster's shared state in etcd when
// Verbatim runs as several brokers (docs/cluster.md): the key layout under
// one prefix, the records stored there (brokers, topics and their ids and
// config overrides, partition assignments with leader, leader epoch, ISR
// and partition epoch, the producer-id allocator, the controller's
// election, and a space of named, versioned records of kinds other
// packages own and encode: ACLs, SCRAM credentials, mirror state),
// their encoding, and the operations on them with etcd's
// leases and transactions: broker registration held by a lease (its loss
// fences the broker), compare-and-swap writes on a record's version so a
// stale writer (a deposed controller, a leader with an old epoch) cannot
// overwrite a newer decision, and a watch that turns etcd's events into
// consistent snapshots. It also starts an embedded etcd member for
// `verbatim serve` (embed.go).
//
// Files: codec.go (the key layout and the values' JSON; decoders check
// what they read and name the key when they refuse it), builder.go (the
// copy-on-write snapshot builder both stores share), validate.go (the
// argument checks both stores share), records.go (the record space's
// keys and checks), etcd_records.go (its writes over etcd), etcd.go (Store over
// go.etcd.io/etcd/client/v3), etcd_session.go (its registrations and
// controller election), embed.go (the embedded member), session.go
// (Session and Leadership over an implementation's state). memstore is the
// same Store in memory for other packages' unit tests; the conformance
// suite runs against both.
//
// It must not import the broker, storage or the controller, decide
// anything (who leads, who is in sync: the controller and the leaders
// decide, this package stores), or keep state beyond the latest snapshot.
package clustermeta
