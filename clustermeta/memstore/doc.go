// Package memstore is an in-memory clustermeta.Store for fast unit tests
// of the packages that use the cluster state (controller, replica,
// broker): the same semantics as the etcd store (one revision per write,
// versions as modification revisions, compare-and-swap, fences on a
// registration's or a leadership's create revision, coalescing watches
// of immutable snapshots, a controller election), with leases that end
// only by hand (Expire) or by Close, never by time. The conformance suite
// in clustermeta runs against both stores.
//
// It must not be used by product code, talk to etcd, or decide anything
// the etcd store does not.
package memstore
