// Package controller is the cluster's controller (docs/cluster.md): one
// broker at a time, elected through an etcd lease (clustermeta.Campaign),
// watches the registered brokers and the partition states and decides:
// rack-aware replica assignment for new topics and partitions (Assign,
// called by the broker's topic admin), leader election from the ISR when
// a leader's broker is fenced (lease expired), shutting down or
// registered again since the state was written (unclean election only
// where configured), removal of such brokers from ISRs, re-election of a
// returning ISR member where a partition has no leader (Decide), and
// preferred and unclean elections on request (Elect, for ElectLeaders,
// whose decisions the broker the request reached writes), the automatic
// preferred-leader rebalance (Rebalance, every
// leader.imbalance.check.interval.seconds when enabled), and partition
// reassignment (reassign.go, KIP-455: Reassign builds the state
// AlterPartitionReassignments writes, Complete the controller's step that
// finishes it once every added replica is in sync). Every decision is a
// new PartitionState (leader epoch raised on a leader change, partition
// epoch on every change) written with clustermeta's compare-and-swap under the
// controller's leadership fence, so a deposed controller cannot overwrite
// a newer decision.
//
// The decisions are pure functions of a snapshot and the configuration
// (assign.go, decide.go, elect.go, rebalance.go; none depends on the
// time: a broker's failure is its lease expiring in etcd); the runner
// (run.go) is the only part that does I/O, and times the rebalance's
// looks. It must not import the broker or storage, talk the
// Kafka protocol, write anything but partition states (the leaders write
// their ISR changes, the brokers their registrations), or keep state that
// is not in etcd beyond its current term.
package controller
