package link

// What a link persists (the broker's link meta files): its definition,
// its id, and per topic what must survive a restart: that the link
// mirrors it (also once stopped), that it was paused, and its partitions
// that FAILED with their reason. Everything else (PREPARING, MIRRORING,
// STOPPING, STOPPED, lag) is derived again from the broker and the source.
//
// Files: linkIndexFile lists the links by name; linkFile(name) holds one
// link. Each is replaced atomically (WriteLinkMeta); a link's file is
// written before its index entry and removed after it, so a crash leaves
// at worst a file no index names, which is ignored.
//
// On a cluster (cluster.go) the files are the cluster store's records,
// shared by every broker: each is read with its version and written only
// if that version still holds (errConflict otherwise), so a change made
// through another broker is re-read and the update applied again to it,
// never overwritten.

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"time"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/wireext"
)

const (
	linkIndexFile   = "links.json"
	linkMetaVersion = 1
)

func linkFile(name string) string { return "link-" + name + ".json" }

// linkMeta is one link's persisted form.
type linkMeta struct {
	Version int                `json:"version"`
	Config  wireext.LinkConfig `json:"config"`
	// ID is the link id (hex), also its writer id on its partitions.
	ID        string `json:"id"`
	CreatedBy string `json:"created_by,omitempty"`
	// Topics are the topics the link mirrors or was asked to mirror.
	Topics map[string]*topicMeta `json:"topics,omitempty"`

	// version is the stored record's version on a cluster (0: not
	// stored yet); the next save writes only over it.
	version int64
}

// topicMeta is one topic's persisted part.
type topicMeta struct {
	// Added: named by StartMirrorTopics (mirrored whatever the
	// patterns say).
	Added bool `json:"added,omitempty"`
	// Mirrored: the link created or adopted it as its pull-mode topic
	// (so, once stopped, it is the link's STOPPED topic, not a skipped
	// ordinary one).
	Mirrored bool `json:"mirrored,omitempty"`
	Paused   bool `json:"paused,omitempty"`
	// Failed are the partitions in FAILED, by index.
	Failed map[int32]failure `json:"failed,omitempty"`
	// SourceID is the source topic's id (as Kafka prints it) when the
	// link first mirrored the topic: a source topic with another id was
	// re-created (sync.go).
	SourceID string `json:"source_id,omitempty"`
}

// failure is a FAILED partition's reason. Divergence is where the logs
// part (-1: not a divergence); Retry failures (the source unreachable
// beyond the retry bound, unclassified errors) are retried once the
// source answers again, the others need an operator (resume, truncate,
// stop).
type failure struct {
	Reason     string `json:"reason"`
	Divergence int64  `json:"divergence_offset"`
	Retry      bool   `json:"retry,omitempty"`
}

func (lm *linkMeta) id() ([16]byte, error) {
	var id [16]byte
	b, err := hex.DecodeString(lm.ID)
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("link %s: bad link id %q", lm.Config.Name, lm.ID)
	}
	copy(id[:], b)
	return id, nil
}

func (lm *linkMeta) topic(name string) *topicMeta {
	if lm.Topics == nil {
		lm.Topics = map[string]*topicMeta{}
	}
	tm := lm.Topics[name]
	if tm == nil {
		tm = &topicMeta{}
		lm.Topics[name] = tm
	}
	return tm
}

// clone is a deep copy (the persisted state is replaced, never shared).
func (lm *linkMeta) clone() *linkMeta {
	c := *lm
	c.Config.SourceConfig = make(map[string]string, len(lm.Config.SourceConfig))
	for k, v := range lm.Config.SourceConfig {
		c.Config.SourceConfig[k] = v
	}
	c.Topics = make(map[string]*topicMeta, len(lm.Topics))
	for n, tm := range lm.Topics {
		t := *tm
		t.Failed = make(map[int32]failure, len(tm.Failed))
		for p, f := range tm.Failed {
			t.Failed[p] = f
		}
		c.Topics[n] = &t
	}
	return &c
}

// store reads and writes the link meta files; c is set on a cluster
// (the versioned records).
type store struct {
	h metaHost
	c clusterHost
}

// errConflict: a versioned write found another broker's newer version.
var errConflict = errors.New("link: the link meta changed on another broker")

// storeTimeout bounds one cluster store read or write of the link meta.
const storeTimeout = 10 * time.Second

func (s store) read(name string, fresh bool) ([]byte, int64, error) {
	if s.c == nil {
		b, err := s.h.ReadLinkMeta(name)
		return b, 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	return s.c.ReadLinkMetaVersion(ctx, name, fresh)
}

func (s store) write(name string, data []byte, version int64) (int64, error) {
	if s.c == nil {
		return 0, s.h.WriteLinkMeta(name, data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	v, err := s.c.WriteLinkMetaIf(ctx, name, data, version)
	if errors.Is(err, broker.ErrLinkMetaConflict) {
		return 0, errConflict
	}
	return v, err
}

func (s store) names() ([]string, error) {
	names, _, err := s.namesVersion(false)
	return names, err
}

// namesVersion is the index with its version (fresh: read from the
// cluster store now, not the broker's last snapshot).
func (s store) namesVersion(fresh bool) ([]string, int64, error) {
	b, v, err := s.read(linkIndexFile, fresh)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var names []string
	if err := json.Unmarshal(b, &names); err != nil {
		return nil, 0, fmt.Errorf("link index %s is corrupt: %v", linkIndexFile, err)
	}
	return names, v, nil
}

// writeNamesIf writes the index over version (a cluster; ignored on a
// single node).
func (s store) writeNamesIf(names []string, version int64) (int64, error) {
	names = append([]string(nil), names...)
	sort.Strings(names)
	b, err := json.Marshal(names)
	if err != nil {
		return 0, err
	}
	return s.write(linkIndexFile, b, version)
}

// editNames applies fn to the index, on a cluster again to a fresh read
// while another broker's write conflicts.
func (s store) editNames(fn func(names []string) ([]string, error)) error {
	fresh := false
	for attempt := 0; ; attempt++ {
		names, v, err := s.namesVersion(fresh)
		if err != nil {
			return err
		}
		next, err := fn(names)
		if err != nil {
			return err
		}
		_, err = s.writeNamesIf(next, v)
		if !errors.Is(err, errConflict) || attempt == casRetries {
			return err
		}
		fresh = true
	}
}

// casRetries bounds the re-reads of one update that keeps conflicting.
const casRetries = 20

func (s store) load(name string) (*linkMeta, error) {
	return s.loadFresh(name, false)
}

func (s store) loadFresh(name string, fresh bool) (*linkMeta, error) {
	b, v, err := s.read(linkFile(name), fresh)
	if err != nil {
		return nil, err
	}
	return decodeMeta(name, b, v)
}

// decodeMeta is link name's meta file b, stored at version v.
func decodeMeta(name string, b []byte, v int64) (*linkMeta, error) {
	lm := linkMeta{version: v}
	if err := json.Unmarshal(b, &lm); err != nil {
		return nil, fmt.Errorf("link meta %s is corrupt: %v", linkFile(name), err)
	}
	if lm.Version != linkMetaVersion || lm.Config.Name != name {
		return nil, fmt.Errorf("link meta %s: version %d, name %q", linkFile(name), lm.Version, lm.Config.Name)
	}
	for t, tm := range lm.Topics {
		if tm == nil { // never written so; every reader of the state assumes a value
			return nil, fmt.Errorf("link meta %s is corrupt: topic %q has no state", linkFile(name), t)
		}
	}
	return &lm, nil
}

// save persists lm; on a cluster only over the version it was read at
// (errConflict otherwise), and lm then carries the new one.
func (s store) save(lm *linkMeta) error {
	lm.Version = linkMetaVersion
	b, err := json.MarshalIndent(lm, "", "  ")
	if err != nil {
		return err
	}
	v, err := s.write(linkFile(lm.Config.Name), append(b, '\n'), lm.version)
	if err != nil {
		return err
	}
	lm.version = v
	return nil
}

func (s store) remove(name string) error { return s.h.RemoveLinkMeta(linkFile(name)) }
