package broker

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/verbatim-kafka/verbatim/clustermeta"
	"github.com/verbatim-kafka/verbatim/metrics"
	"github.com/verbatim-kafka/verbatim/storage"
)

// Topic is one topic. Name and ID never change; the config and the
// partition list are replaced atomically, so data-plane handlers read them
// without locks.
type Topic struct {
	Name string
	ID   [16]byte

	cfg     atomic.Pointer[TopicConfig]
	parts   atomic.Pointer[[]*Partition]
	deleted atomic.Bool
	// metrics are the topic's counters, resolved on first use
	// (metrics.go).
	metrics atomic.Pointer[metrics.Topic]
}

// Config is the topic's current effective configuration.
func (t *Topic) Config() *TopicConfig { return t.cfg.Load() }

// Partitions is the current partition list (index = partition number).
func (t *Topic) Partitions() []*Partition { return *t.parts.Load() }

// Partition returns partition i, or nil if it does not exist; a nil t
// (the topic does not exist) has none, so a handler looks a requested
// partition up as cluster.topic(name).Partition(i).
func (t *Topic) Partition(i int32) *Partition {
	if t == nil {
		return nil
	}
	ps := t.Partitions()
	if i < 0 || int(i) >= len(ps) {
		return nil
	}
	return ps[i]
}

// Deleted reports whether the topic has been deleted; handlers holding a
// *Topic or *Partition from before the deletion check it.
func (t *Topic) Deleted() bool { return t.deleted.Load() }

// Partition is the per-partition object the data-plane handlers work on:
// its topic (and through it the topic config), its leader epoch and,
// once storage is wired, its log. This single node leads every partition.
type Partition struct {
	Topic *Topic
	Index int32

	leaderEpoch atomic.Int32
	// Log is the partition's storage log (partition_log.go), attached
	// before the partition is published; nil if it failed to open.
	Log PartitionLog
	// data is the data plane's per-partition state (partition_log.go).
	data partData
	// cstate is the partition's state in the cluster store (cluster mode
	// only, cluster_mode.go sets it); repl its local replica's role and
	// replication state (replica_role.go). Both nil on a single node.
	cstate atomic.Pointer[clustermeta.PartitionState]
	repl   atomic.Pointer[replState]

	// sourceStart is the mirror source's epoch at a log start this
	// replica has still to record (cluster mode only,
	// mirror_start_epoch_cluster.go); nil: nothing pending.
	sourceStart atomic.Pointer[mirrorSourceStart]
}

// PartitionLog is what the broker needs from a partition's storage log to
// manage its lifetime; data-plane handlers type-assert the concrete log.
type PartitionLog interface {
	Close() error
}

// LeaderEpoch is the partition's current leader epoch.
func (p *Partition) LeaderEpoch() int32 { return p.leaderEpoch.Load() }

// Dir is the partition's directory under the data dir, as Kafka names it.
func (p *Partition) Dir() string { return partitionDir(p.Topic.Name, p.Index) }

func partitionDir(topic string, i int32) string { return topic + "-" + strconv.Itoa(int(i)) }

// cluster holds every topic. Readers use the copy-on-write snapshot;
// mutations are serialised by mu and persisted before they are published.
type cluster struct {
	fs  storage.FS
	log *slog.Logger
	// openLog attaches a storage log to a new partition before it is
	// published (nil: partitions get no log, as in control-plane tests).
	openLog func(*Partition) error
	// maxPartitions bounds the partitions of all topics together
	// (Config.MaxPartitions).
	maxPartitions int
	// remote, in cluster mode, makes the mutations below writes to the
	// cluster store instead of the local metadata file
	// (cluster_mode_admin.go); nil on a single node.
	remote clusterWriter

	snap atomic.Pointer[clusterSnap]
	mu   sync.Mutex

	// Leader-epoch raises are group-committed (SetLeaderEpochAtLeast):
	// epochGen counts raises made in memory (under mu); epochPersist
	// lets one raiser at a time write the metadata, covering every raise
	// made before it took mu; epochPersisted is the highest raise a
	// successful write covered (under epochPersist).
	epochGen       uint64
	epochPersist   sync.Mutex
	epochPersisted uint64
}

type clusterSnap struct {
	byName map[string]*Topic
	byID   map[[16]byte]*Topic
}

func (c *cluster) topicCount() int { return len(c.snap.Load().byName) }

// topic returns the named topic or nil.
func (c *cluster) topic(name string) *Topic { return c.snap.Load().byName[name] }

// topicByID returns the topic with that id or nil.
func (c *cluster) topicByID(id [16]byte) *Topic { return c.snap.Load().byID[id] }

// topics returns all topics sorted by name.
func (c *cluster) topics() []*Topic {
	s := c.snap.Load()
	out := make([]*Topic, 0, len(s.byName))
	for _, t := range s.byName {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (c *cluster) cloneSnap() *clusterSnap {
	old := c.snap.Load()
	n := &clusterSnap{byName: make(map[string]*Topic, len(old.byName)+1), byID: make(map[[16]byte]*Topic, len(old.byID)+1)}
	for k, v := range old.byName {
		n.byName[k] = v
	}
	for k, v := range old.byID {
		n.byID[k] = v
	}
	return n
}

// Errors of topic operations; errors.go maps them to Kafka codes.
var (
	errTopicExists       = errors.New("topic already exists")
	errUnknownTopic      = errors.New("unknown topic")
	errInvalidTopic      = errors.New("invalid topic")
	errInvalidPartitions = errors.New("invalid partitions")
	errInvalidReplicas   = errors.New("invalid replication factor")
	errInvalidReplicaAsg = errors.New("invalid replica assignment")
	errInvalidConfig     = errors.New("invalid config")
	errPolicy            = errors.New("policy violation")
	errStorage           = errors.New("storage error")
)

// newTopicID returns a random version-4 UUID that is neither zero nor
// already in use.
func (c *cluster) newTopicID(snap *clusterSnap) ([16]byte, error) {
	return randomTopicID(func(id [16]byte) bool { return snap.byID[id] != nil })
}

// randomTopicID returns a random version-4 UUID that is neither zero nor
// used.
func randomTopicID(used func([16]byte) bool) ([16]byte, error) {
	for {
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			return id, err
		}
		id[6] = id[6]&0x0f | 0x40
		id[8] = id[8]&0x3f | 0x80
		if id != ([16]byte{}) && !used(id) {
			return id, nil
		}
	}
}

// createTopic validates and, unless validateOnly, creates and persists a
// topic. The returned Topic is the new one (or, for validateOnly, an
// unpublished one describing what would be created).
func (c *cluster) createTopic(name string, partitions int32, cfg *TopicConfig, validateOnly bool) (*Topic, error) {
	return c.createTopicWithID(name, partitions, cfg, validateOnly, [16]byte{})
}

// createTopicWithID is createTopic with the topic id chosen by the caller
// (a mirror keeping its source's id, mirror_topic_id.go); a zero id means
// a fresh random one. An id already used by another topic is
// TOPIC_ALREADY_EXISTS.
func (c *cluster) createTopicWithID(name string, partitions int32, cfg *TopicConfig, validateOnly bool, want [16]byte) (*Topic, error) {
	if err := validateTopicName(name); err != nil {
		return nil, err
	}
	if c.remote != nil {
		return c.remote.createTopic(name, partitions, cfg, validateOnly, want, placement{})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.cloneSnap()
	t, err := c.newTopicLocked(n, name, partitions, cfg, want)
	if err != nil || validateOnly {
		return t, err
	}
	n.byName[name] = t
	n.byID[t.ID] = t
	if err := c.persistLocked(n); err != nil {
		return nil, fmt.Errorf("%w: persisting topic metadata: %v", errStorage, err)
	}
	c.openLogs(t.Partitions())
	c.snap.Store(n)
	return t, nil
}

// newTopicLocked checks that topic name can be created in n (the
// broker's topics, and those a batch adds before it) and returns it, not
// yet in n: the id is want, or a fresh one when zero.
// REQUIRES: c.mu is held.
func (c *cluster) newTopicLocked(n *clusterSnap, name string, partitions int32, cfg *TopicConfig, want [16]byte) (*Topic, error) {
	if n.byName[name] != nil {
		return nil, fmt.Errorf("%w: Topic '%s' already exists.", errTopicExists, name)
	}
	if coll := collidingTopic(n, name); coll != "" {
		return nil, fmt.Errorf("%w: Topic '%s' collides with existing topic: %s", errInvalidTopic, name, coll)
	}
	if partitions < 1 {
		return nil, fmt.Errorf("%w: Number of partitions must be larger than 0.", errInvalidPartitions)
	}
	if err := c.checkPartitionLimitLocked(n, int64(partitions)); err != nil {
		return nil, err
	}
	if other := n.byID[want]; want != ([16]byte{}) && other != nil {
		return nil, fmt.Errorf("%w: Topic id %s is already used by topic '%s'.", errTopicExists, formatTopicID(want), other.Name)
	}
	id := want
	if id == ([16]byte{}) {
		var err error
		if id, err = c.newTopicID(n); err != nil {
			return nil, err
		}
	}
	t := &Topic{Name: name, ID: id}
	t.cfg.Store(cfg)
	parts := make([]*Partition, partitions)
	for i := range parts {
		parts[i] = &Partition{Topic: t, Index: int32(i)}
	}
	t.parts.Store(&parts)
	return t, nil
}

// checkPartitionLimitLocked refuses adding n partitions when the broker
// would then hold more than its partition limit (Config.MaxPartitions):
// every partition holds open files and memory, so one request must not be
// able to exhaust them.
// REQUIRES: c.mu is held.
func (c *cluster) checkPartitionLimitLocked(snap *clusterSnap, n int64) error {
	var total int64
	for _, t := range snap.byName {
		total += int64(len(t.Partitions()))
	}
	if total+n > int64(c.maxPartitions) {
		return fmt.Errorf("%w: Adding %d partition(s) would exceed this broker's limit of %d partitions (%d exist; --max-partitions).", errInvalidPartitions, n, c.maxPartitions, total)
	}
	return nil
}

// deleteTopic removes the topic from the metadata (durably) and then its
// partition directories: each is first renamed to "<dir>.<id>-delete" so a
// crash mid-removal leaves a name recovery recognises and finishes.
func (c *cluster) deleteTopic(t *Topic) error {
	if c.remote != nil {
		return c.remote.deleteTopic(t)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snap.Load().byName[t.Name] != t {
		return fmt.Errorf("%w: This server does not host this topic-partition.", errUnknownTopic)
	}
	n := c.cloneSnap()
	delete(n.byName, t.Name)
	delete(n.byID, t.ID)
	if err := c.persistLocked(n); err != nil {
		return fmt.Errorf("%w: persisting topic metadata: %v", errStorage, err)
	}
	c.snap.Store(n)
	t.deleted.Store(true)
	c.removeTopicFiles(t)
	return nil
}

// removeTopicFiles closes the logs of a deleted topic's partitions and
// removes their directories.
func (c *cluster) removeTopicFiles(t *Topic) {
	for _, p := range t.Partitions() {
		if p.Log != nil {
			if err := p.Log.Close(); err != nil {
				c.log.Warn("closing log of deleted partition", "topic", t.Name, "partition", p.Index, "err", err)
			}
		}
		c.removePartitionDir(p, t.ID)
	}
	if err := c.fs.SyncDir("."); err != nil {
		c.log.Warn("syncing data dir after delete", "err", err)
	}
}

// removePartitionDir removes p's directory (its log closed): renamed to a
// "-delete" name first, so a crash midway leaves a name removeDeletedDirs
// finishes.
func (c *cluster) removePartitionDir(p *Partition, id [16]byte) {
	dir := p.Dir()
	if _, err := c.fs.Stat(dir); err != nil {
		return
	}
	tomb := dir + "." + hex.EncodeToString(id[:]) + "-delete"
	if err := c.fs.Rename(dir, tomb); err != nil {
		c.log.Warn("renaming deleted partition dir", "dir", dir, "err", err)
		return
	}
	if err := removeAll(c.fs, tomb); err != nil {
		c.log.Warn("removing deleted partition dir", "dir", tomb, "err", err)
	}
}

// removeDeletedDirs finishes deletions a crash interrupted.
func (c *cluster) removeDeletedDirs() {
	names, err := c.fs.ReadDir(".")
	if err != nil {
		c.log.Warn("listing data dir", "err", err)
		return
	}
	for _, n := range names {
		if strings.HasSuffix(n, "-delete") {
			if err := removeAll(c.fs, n); err != nil {
				c.log.Warn("removing deleted partition dir", "dir", n, "err", err)
			}
		}
	}
}

// addPartitions grows t to count partitions.
func (c *cluster) addPartitions(t *Topic, count int32, validateOnly bool) error {
	if c.remote != nil {
		return c.remote.addPartitions(t, count, validateOnly, nil)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snap.Load().byName[t.Name] != t {
		return fmt.Errorf("%w: This server does not host this topic-partition.", errUnknownTopic)
	}
	old := t.Partitions()
	if count < int32(len(old)) {
		return fmt.Errorf("%w: Topic currently has %d partitions, which is higher than the requested %d.", errInvalidPartitions, len(old), count)
	}
	if count == int32(len(old)) {
		return fmt.Errorf("%w: Topic already has %d partitions.", errInvalidPartitions, len(old))
	}
	if err := c.checkPartitionLimitLocked(c.snap.Load(), int64(count)-int64(len(old))); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	parts := append(append([]*Partition(nil), old...), make([]*Partition, int(count)-len(old))...)
	for i := len(old); i < len(parts); i++ {
		parts[i] = &Partition{Topic: t, Index: int32(i)}
	}
	c.openLogs(parts[len(old):])
	t.parts.Store(&parts)
	if err := c.persistLocked(c.snap.Load()); err != nil {
		t.parts.Store(&old)
		return fmt.Errorf("%w: persisting topic metadata: %v", errStorage, err)
	}
	return nil
}

// setConfig replaces t's config durably.
func (c *cluster) setConfig(t *Topic, cfg *TopicConfig) error {
	if c.remote != nil {
		return c.remote.setConfig(t, cfg)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snap.Load().byName[t.Name] != t {
		return fmt.Errorf("%w: topic %s was deleted", errUnknownTopic, t.Name)
	}
	old := t.cfg.Load()
	t.cfg.Store(cfg)
	if err := c.persistLocked(c.snap.Load()); err != nil {
		t.cfg.Store(old)
		return fmt.Errorf("%w: persisting topic metadata: %v", errStorage, err)
	}
	return nil
}

// SetLeaderEpochAtLeast raises p's leader epoch to at least epoch and
// persists it before returning; the epoch never decreases. The mirror path
// uses it to keep the current epoch ahead of every stored batch epoch.
//
// Raises of many partitions at once (a link's or a pusher's first
// appends to a thousand partitions, each taking KIP-1279's epoch rule) are
// group-committed: each waits for a metadata write that covers its raise,
// and one write covers every raise made while the previous one ran,
// instead of one whole-cluster write per partition.
func (s *Server) SetLeaderEpochAtLeast(p *Partition, epoch int32) error {
	c := s.cluster
	if c.remote != nil {
		return c.remote.raiseLeaderEpochs([]*Partition{p}, []int32{epoch})
	}
	c.mu.Lock()
	old := p.LeaderEpoch()
	if epoch <= old {
		c.mu.Unlock()
		return nil
	}
	p.leaderEpoch.Store(epoch)
	c.epochGen++
	gen := c.epochGen
	c.mu.Unlock()

	c.epochPersist.Lock()
	defer c.epochPersist.Unlock()
	if c.epochPersisted >= gen {
		return nil // a write since our raise covered it
	}
	c.mu.Lock()
	upTo := c.epochGen
	err := c.persistLocked(c.snap.Load())
	if err != nil {
		// Only our own raise is undone (if nothing raised it further):
		// the other raisers this write covered get the error from their
		// own write.
		p.leaderEpoch.CompareAndSwap(epoch, old)
		c.mu.Unlock()
		return fmt.Errorf("%w: persisting leader epoch: %v", errStorage, err)
	}
	c.mu.Unlock()
	c.epochPersisted = upTo
	return nil
}

// setLeaderEpochsAtLeast raises each ps[i]'s leader epoch to epochs[i]
// with one metadata write for all of them (a topic's mirror stop), and
// restores them all if it fails.
func (s *Server) setLeaderEpochsAtLeast(ps []*Partition, epochs []int32) error {
	c := s.cluster
	if c.remote != nil {
		return c.remote.raiseLeaderEpochs(ps, epochs)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := make([]int32, len(ps))
	changed := false
	for i, p := range ps {
		old[i] = p.LeaderEpoch()
		if epochs[i] > old[i] {
			p.leaderEpoch.Store(epochs[i])
			changed = true
		}
	}
	if !changed {
		return nil
	}
	if err := c.persistLocked(c.snap.Load()); err != nil {
		for i, p := range ps {
			p.leaderEpoch.Store(old[i])
		}
		return fmt.Errorf("%w: persisting leader epochs: %v", errStorage, err)
	}
	return nil
}

// Topic returns the named topic or nil (data-plane handlers).
func (s *Server) Topic(name string) *Topic { return s.cluster.topic(name) }

// TopicByID returns the topic with that id or nil.
func (s *Server) TopicByID(id [16]byte) *Topic { return s.cluster.topicByID(id) }

func (c *cluster) close() {
	for _, t := range c.topics() {
		for _, p := range t.Partitions() {
			if p.Log != nil {
				if err := p.Log.Close(); err != nil {
					c.log.Warn("closing partition log", "topic", t.Name, "partition", p.Index, "err", err)
				}
			}
		}
	}
}

// validateTopicName applies Kafka's topic name rules.
func validateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: Topic name is illegal, it can't be empty", errInvalidTopic)
	case name == "." || name == "..":
		return fmt.Errorf("%w: Topic name cannot be \".\" or \"..\"", errInvalidTopic)
	case len(name) > 249:
		return fmt.Errorf("%w: Topic name is illegal, it can't be longer than 249 characters, topic name: %s", errInvalidTopic, name)
	}
	for i := 0; i < len(name); i++ {
		b := name[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '.' || b == '_' || b == '-') {
			return fmt.Errorf("%w: Topic name %q is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'", errInvalidTopic, name)
		}
	}
	return nil
}

// collidingTopic returns an existing topic whose name equals name once '.'
// and '_' are treated alike (Kafka refuses those: metric names collide).
func collidingTopic(snap *clusterSnap, name string) string {
	if !strings.ContainsAny(name, "._") {
		return ""
	}
	norm := strings.ReplaceAll(name, ".", "_")
	for n := range snap.byName {
		if n != name && strings.ReplaceAll(n, ".", "_") == norm {
			return n
		}
	}
	return ""
}
