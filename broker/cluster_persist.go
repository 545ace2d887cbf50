package broker

// The topic metadata on disk (meta/topics.json): names, ids, leader epochs
// and config overrides, loaded at Open and rewritten atomically on every
// change.

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"

	"github.com/verbatim-kafka/verbatim/storage"
)

// The persisted form of the topic metadata: one JSON document rewritten
// atomically on every change (control-plane changes are rare and small).
const topicsFile = metaDirName + "/topics.json"

type persistedCluster struct {
	Version int              `json:"version"`
	Topics  []persistedTopic `json:"topics"`
}

type persistedTopic struct {
	Name         string            `json:"name"`
	ID           string            `json:"id"`
	LeaderEpochs []int32           `json:"leader_epochs"`
	Configs      map[string]string `json:"configs,omitempty"`
}

func loadCluster(fsys storage.FS, log *slog.Logger) (*cluster, error) {
	c := &cluster{fs: fsys, log: log}
	if err := fsys.MkdirAll(metaDirName, 0o755); err != nil {
		return nil, err
	}
	snap := &clusterSnap{byName: map[string]*Topic{}, byID: map[[16]byte]*Topic{}}
	data, err := readFile(fsys, topicsFile)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("reading topic metadata: %w", err)
	default:
		var pc persistedCluster
		if err := json.Unmarshal(data, &pc); err != nil {
			return nil, fmt.Errorf("topic metadata %s is corrupt: %w", topicsFile, err)
		}
		if pc.Version != 1 {
			return nil, fmt.Errorf("%w: %s has version %d", ErrDataDirFormat, topicsFile, pc.Version)
		}
		for _, pt := range pc.Topics {
			t, err := topicFromPersisted(pt)
			if err != nil {
				return nil, fmt.Errorf("topic metadata %s: %w", topicsFile, err)
			}
			if snap.byName[t.Name] != nil || snap.byID[t.ID] != nil {
				return nil, fmt.Errorf("topic metadata %s: duplicate topic %q", topicsFile, t.Name)
			}
			snap.byName[t.Name] = t
			snap.byID[t.ID] = t
		}
	}
	c.snap.Store(snap)
	c.removeDeletedDirs()
	return c, nil
}

func topicFromPersisted(pt persistedTopic) (*Topic, error) {
	if err := validateTopicName(pt.Name); err != nil {
		return nil, err
	}
	raw, err := hex.DecodeString(pt.ID)
	if err != nil || len(raw) != 16 {
		return nil, fmt.Errorf("topic %q has a bad id %q", pt.Name, pt.ID)
	}
	if len(pt.LeaderEpochs) == 0 {
		return nil, fmt.Errorf("topic %q has no partitions", pt.Name)
	}
	cfg, err := newTopicConfig(pt.Configs)
	if err != nil {
		return nil, fmt.Errorf("topic %q: %w", pt.Name, err)
	}
	t := &Topic{Name: pt.Name}
	copy(t.ID[:], raw)
	t.cfg.Store(cfg)
	parts := make([]*Partition, len(pt.LeaderEpochs))
	for i, e := range pt.LeaderEpochs {
		if e < 0 {
			return nil, fmt.Errorf("topic %q partition %d has leader epoch %d", pt.Name, i, e)
		}
		parts[i] = &Partition{Topic: t, Index: int32(i)}
		parts[i].leaderEpoch.Store(e)
	}
	t.parts.Store(&parts)
	return t, nil
}

// persistLocked writes snap as the topic metadata file.
// REQUIRES: c.mu is held.
func (c *cluster) persistLocked(snap *clusterSnap) error {
	pc := persistedCluster{Version: 1}
	names := make([]string, 0, len(snap.byName))
	for n := range snap.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t := snap.byName[n]
		pt := persistedTopic{Name: t.Name, ID: hex.EncodeToString(t.ID[:]), Configs: t.Config().Overrides()}
		for _, p := range t.Partitions() {
			pt.LeaderEpochs = append(pt.LeaderEpochs, p.LeaderEpoch())
		}
		pc.Topics = append(pc.Topics, pt)
	}
	data, err := json.MarshalIndent(pc, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(c.fs, metaDirName, "topics.json", append(data, '\n'))
}
