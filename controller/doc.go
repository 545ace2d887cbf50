// Package controller is the cluster's controller (docs/cluster.md): one
// broker at a time, elected through an etcd lease (clustermeta.Campaign),
// watches the registered brokers and the partition states and decides:
// rack-aware replica assignment for new topics and partitions, leader
// election from the ISR when a leader's broker is fenced (lease expired)
// or shutting down (unclean election only where configured), removal of
// fenced brokers from ISRs, re-election of a returning ISR member where a
// partition has no leader, preferred-leader and requested elections,
// reassignment steps. Every decision is a new PartitionState (leader epoch
// and partition epoch raised) written with clustermeta's compare-and-swap
// under the controller's leadership fence, so a deposed controller cannot
// overwrite a newer decision.
//
// The decisions are pure functions of a snapshot, the configuration and
// the time (decide.go, assign.go); the runner (run.go) is the only part
// that does I/O. It must not import the broker or storage, talk the Kafka
// protocol, or keep state that is not in etcd beyond its current term.
package controller
