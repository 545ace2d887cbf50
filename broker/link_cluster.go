package broker

// Cluster links in cluster mode (docs/cluster.md "Cluster links on a
// cluster"): what the link manager (package link) needs of a broker that
// is one of several.
//
// Every broker runs the link manager. The links' definitions and their
// persisted per-topic state are records of kind linkMetaKind in the
// cluster store, one per link meta file name (ReadLinkMeta and friends
// read and write them there instead of the data directory), so a link
// created through any broker is every broker's. Writes are
// compare-and-swap on the record's version (WriteLinkMetaIf) under the
// broker's registration fence, so two brokers updating one link never
// lose each other's change; the link re-reads (ReadLinkMetaVersion with
// fresh) and applies its change again.
//
// Who does what: each partition's copy runs on the broker that leads the
// destination partition (LinkLeads; the in-process append refuses any
// other, link_data.go pullPartition); the cluster-wide work of a link
// (topic discovery and creation, partition growth, config sync) runs on
// the controller's broker (LinkCoordinator); a group's offsets are synced
// by the broker that coordinates the group (the local coordinator answers
// NOT_COORDINATOR for the others). The manager follows leadership and
// record changes through ClusterApplied.
//
// On a single node the meta files stay in the data directory, LinkLeads
// and LinkCoordinator are true and ClusterApplied is nil.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// linkMetaKind is the cluster store's record kind of the link meta files
// (record name = file name).
const linkMetaKind = "link"

// ErrLinkMetaConflict: WriteLinkMetaIf or RemoveLinkMetaIf found another
// version than the one given (another broker changed the record): read it
// again and decide again.
var ErrLinkMetaConflict = errors.New("broker: the link meta record changed since it was read")

// LinkClustered reports cluster mode (the link meta files are cluster
// store records, copies run on partition leaders).
func (s *Server) LinkClustered() bool { return s.cm != nil }

// LinkLeads reports whether this broker leads topic's partition (true on
// a single node for any existing partition).
func (s *Server) LinkLeads(topic string, partition int32) bool {
	t := s.cluster.topic(topic)
	if t == nil {
		return false
	}
	p := t.Partition(partition)
	if p == nil {
		return false
	}
	if s.cm == nil {
		return true
	}
	rs := p.repl.Load()
	return rs != nil && rs.leader
}

// LinkCoordinator reports whether this broker runs the links'
// cluster-wide work: the controller's broker (true on a single node).
func (s *Server) LinkCoordinator() bool {
	if s.cm == nil {
		return true
	}
	snap := s.cm.snap.Load()
	return snap != nil && snap.Controller == s.cfg.NodeID && s.cm.session.Load() != nil
}

// ClusterApplied returns a channel closed once the broker has applied the
// next cluster snapshot (leaderships, topics, link records may have
// changed); call it again for the one after. nil on a single node.
func (s *Server) ClusterApplied() <-chan struct{} {
	if s.cm == nil {
		return nil
	}
	s.cm.mu.Lock()
	defer s.cm.mu.Unlock()
	return s.cm.mu.applied
}

// ReadLinkMetaVersion returns a link meta file with its version (cluster
// mode: the record's; 0 and fs.ErrNotExist when absent), from the snapshot
// this broker applied last, or, with fresh, read from the cluster store
// now (after a conflict). On a single node the version is always 1 for a
// file that exists.
func (s *Server) ReadLinkMetaVersion(ctx context.Context, name string, fresh bool) ([]byte, int64, error) {
	if err := checkLinkMetaName(name); err != nil {
		return nil, 0, err
	}
	if s.cm == nil {
		b, err := s.ReadLinkMeta(name)
		if err != nil {
			return nil, 0, err
		}
		return b, 1, nil
	}
	snap := s.cm.snap.Load()
	if fresh || snap == nil {
		var err error
		if snap, err = s.cm.store.Snapshot(ctx); err != nil {
			return nil, 0, storeErr("reading link meta "+name, err)
		}
	}
	rec, ok := snap.Record(linkMetaKind, name)
	if !ok {
		return nil, 0, fs.ErrNotExist
	}
	return rec.Value, rec.Version, nil
}

// WriteLinkMetaIf replaces a link meta file if its version is still
// version (0: only if absent) and returns the new version;
// ErrLinkMetaConflict otherwise. In cluster mode it is fenced by this
// broker's registration and returns once this broker applied the write
// (the next ReadLinkMetaVersion sees it). On a single node it is
// WriteLinkMeta (one writer: the version is not compared).
func (s *Server) WriteLinkMetaIf(ctx context.Context, name string, data []byte, version int64) (int64, error) {
	if err := checkLinkMetaName(name); err != nil {
		return 0, err
	}
	if s.cm == nil {
		return 1, s.WriteLinkMeta(name, data)
	}
	expect := version
	if expect == 0 {
		expect = clustermeta.MustNotExist
	}
	return s.putLinkRecord(ctx, name, data, expect)
}

// RemoveLinkMetaIf deletes a link meta file if its version is still
// version (ErrLinkMetaConflict otherwise; absent is no error).
func (s *Server) RemoveLinkMetaIf(ctx context.Context, name string, version int64) error {
	if err := checkLinkMetaName(name); err != nil {
		return err
	}
	if s.cm == nil {
		return s.RemoveLinkMeta(name)
	}
	return s.deleteLinkRecord(ctx, name, version)
}

func (s *Server) putLinkRecord(ctx context.Context, name string, data []byte, expect int64) (int64, error) {
	sess := s.cm.session.Load()
	if sess == nil {
		return 0, kafkaErr(kerr.NotLeaderForPartition, "this broker is not registered in the cluster (yet): link meta "+name+" not written")
	}
	v, err := s.cm.store.PutRecord(ctx, sess.Fence(), linkMetaKind, name, data, expect)
	switch {
	case errors.Is(err, clustermeta.ErrConflict):
		return 0, ErrLinkMetaConflict
	case err != nil:
		return 0, storeErr("writing link meta "+name, err)
	}
	s.cm.awaitRevision(ctx, v)
	return v, nil
}

func (s *Server) deleteLinkRecord(ctx context.Context, name string, version int64) error {
	sess := s.cm.session.Load()
	if sess == nil {
		return kafkaErr(kerr.NotLeaderForPartition, "this broker is not registered in the cluster (yet): link meta "+name+" not removed")
	}
	expect := version
	if expect == 0 {
		expect = clustermeta.AnyVersion
	}
	rev, err := s.cm.store.DeleteRecord(ctx, sess.Fence(), linkMetaKind, name, expect)
	switch {
	case errors.Is(err, clustermeta.ErrNotFound):
		return nil
	case errors.Is(err, clustermeta.ErrConflict):
		if version != 0 {
			if _, _, rerr := s.ReadLinkMetaVersion(ctx, name, true); errors.Is(rerr, fs.ErrNotExist) {
				return nil // gone already
			}
		}
		return ErrLinkMetaConflict
	case err != nil:
		return storeErr("removing link meta "+name, err)
	}
	s.cm.awaitRevision(ctx, rev)
	return nil
}

// clusterLinkMeta are ReadLinkMeta, WriteLinkMeta and RemoveLinkMeta in
// cluster mode: unconditional writes of the records.
func (s *Server) readClusterLinkMeta(name string) ([]byte, error) {
	ctx, cancel := s.cm.writeCtx()
	defer cancel()
	b, _, err := s.ReadLinkMetaVersion(ctx, name, false)
	return b, err
}

func (s *Server) writeClusterLinkMeta(name string, data []byte) error {
	ctx, cancel := s.cm.writeCtx()
	defer cancel()
	_, err := s.putLinkRecord(ctx, name, data, clustermeta.AnyVersion)
	return err
}

func (s *Server) removeClusterLinkMeta(name string) error {
	ctx, cancel := s.cm.writeCtx()
	defer cancel()
	return s.deleteLinkRecord(ctx, name, 0)
}

// errRepairInCluster refuses divergence repair and failback in cluster
// mode: truncating a replicated partition's tail is not a replicated
// operation in this version (docs/cluster.md).
func errRepairInCluster(op string) error {
	return kafkaErr(kerr.InvalidRequest, fmt.Sprintf("%s is not supported on a replicated cluster in this version: truncating a replicated partition's tail would need every replica to truncate with it; stop the mirror and re-create the topic instead", op))
}
