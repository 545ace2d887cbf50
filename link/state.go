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

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"

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

// store reads and writes the link meta files.
type store struct{ h metaHost }

func (s store) names() ([]string, error) {
	b, err := s.h.ReadLinkMeta(linkIndexFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	if err := json.Unmarshal(b, &names); err != nil {
		return nil, fmt.Errorf("link index %s is corrupt: %v", linkIndexFile, err)
	}
	return names, nil
}

func (s store) writeNames(names []string) error {
	names = append([]string(nil), names...)
	sort.Strings(names)
	b, err := json.Marshal(names)
	if err != nil {
		return err
	}
	return s.h.WriteLinkMeta(linkIndexFile, b)
}

func (s store) load(name string) (*linkMeta, error) {
	b, err := s.h.ReadLinkMeta(linkFile(name))
	if err != nil {
		return nil, err
	}
	var lm linkMeta
	if err := json.Unmarshal(b, &lm); err != nil {
		return nil, fmt.Errorf("link meta %s is corrupt: %v", linkFile(name), err)
	}
	if lm.Version != linkMetaVersion || lm.Config.Name != name {
		return nil, fmt.Errorf("link meta %s: version %d, name %q", linkFile(name), lm.Version, lm.Config.Name)
	}
	return &lm, nil
}

func (s store) save(lm *linkMeta) error {
	lm.Version = linkMetaVersion
	b, err := json.MarshalIndent(lm, "", "  ")
	if err != nil {
		return err
	}
	return s.h.WriteLinkMeta(linkFile(lm.Config.Name), append(b, '\n'))
}

func (s store) remove(name string) error { return s.h.RemoveLinkMeta(linkFile(name)) }
