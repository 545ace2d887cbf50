package broker

// Open in cluster mode (owner: the cluster-metadata work; see
// cluster_config.go): the data dir is locked and keeps meta.properties
// (the node id, and the cluster id, which is the store's), but no cluster
// metadata of its own: the topics and partitions are built from the
// store's snapshot, only the logs of the replicas this node hosts are
// opened (openAllLogs), and a partition directory whose topic the store
// no longer has (deleted while this broker was down) is removed.

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// clusterOpenTimeout bounds Open's first read of the cluster store.
const clusterOpenTimeout = 30 * time.Second

// openClusterState is Open's cluster-mode replacement of reading
// meta.properties and the topic metadata: it sets s.clusterID, s.cluster
// and s.cm.
func (s *Server) openClusterState() error {
	cc := s.cfg.Cluster
	if cc.Store == nil {
		return errors.New("broker: cluster mode needs Config.Cluster.Store")
	}
	cm := newClusterMode(s, *cc)
	ctx, cancel := context.WithTimeout(context.Background(), clusterOpenTimeout)
	defer cancel()
	snap, err := cm.store.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("broker: reading the cluster state: %w", err)
	}
	cid := cm.store.ClusterID()
	if cid == "" {
		cid = snap.ClusterID
	}
	if cid == "" {
		return errors.New("broker: the cluster store has no cluster id")
	}
	mp, err := loadOrCreateMetaPropsWith(s.fs, s.cfg.NodeID, cid)
	if err != nil {
		return err
	}
	if err := s.fs.MkdirAll(metaDirName, 0o755); err != nil {
		return err
	}
	c := &cluster{fs: s.fs, log: s.log, remote: cm}
	local := &clusterSnap{byName: map[string]*Topic{}, byID: map[[16]byte]*Topic{}}
	for name, rec := range snap.Topics {
		t := cm.buildTopic(rec, snap.Partitions[name])
		local.byName[name] = t
		local.byID[t.ID] = t
	}
	c.snap.Store(local)
	c.removeDeletedDirs()
	s.clusterID, s.cluster, s.cm = mp.clusterID, c, cm
	cm.snap.Store(snap)
	cm.removeOrphanDirs()
	return nil
}

// hostsPartition reports whether this broker hosts a replica of p (cluster
// mode; on a single node every partition).
func (s *Server) hostsPartition(p *Partition) bool {
	if s.cm == nil {
		return true
	}
	st := p.cstate.Load()
	return st != nil && hosts(st, s.cm.nodeID)
}

// removeOrphanDirs removes the partition directories of topics the store
// does not have, and of partitions it does not place on this broker: they
// were deleted or moved away while this broker was down (renamed to
// a "-delete" name first, as a deletion does, so a crash midway leaves a
// name removeDeletedDirs finishes).
func (cm *clusterMode) removeOrphanDirs() {
	c := cm.s.cluster
	names, err := c.fs.ReadDir(".")
	if err != nil {
		cm.s.log.Warn("listing data dir", "err", err)
		return
	}
	removed := false
	for _, n := range names {
		topic, idx, ok := partitionDirTopic(n)
		if !ok {
			continue
		}
		if t := c.topic(topic); t != nil {
			// A replica moved off this broker while it was down is
			// removed as a deleted one is.
			if p := t.Partition(idx); p != nil && cm.s.hostsPartition(p) {
				continue
			}
		}
		if fi, err := c.fs.Stat(n); err != nil || !fi.IsDir() {
			continue
		}
		tomb := n + "." + hex.EncodeToString(make([]byte, 16)) + "-delete"
		if err := c.fs.Rename(n, tomb); err != nil {
			cm.s.log.Warn("renaming the dir of a deleted partition", "dir", n, "err", err)
			continue
		}
		if err := removeAll(c.fs, tomb); err != nil {
			cm.s.log.Warn("removing the dir of a deleted partition", "dir", tomb, "err", err)
		}
		cm.s.log.Info("removed the log of a partition the cluster deleted", "dir", n)
		removed = true
	}
	if removed {
		if err := c.fs.SyncDir("."); err != nil {
			cm.s.log.Warn("syncing data dir after delete", "err", err)
		}
	}
}

// partitionDirTopic parses a partition directory name "<topic>-<n>" (n
// as partitionDir writes it: decimal, no sign or leading zero).
func partitionDirTopic(name string) (string, int32, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return "", 0, false
	}
	n, err := strconv.ParseUint(name[i+1:], 10, 31)
	if err != nil || strconv.FormatUint(n, 10) != name[i+1:] {
		return "", 0, false
	}
	topic := name[:i]
	if validateTopicName(topic) != nil {
		return "", 0, false
	}
	return topic, int32(n), true
}
