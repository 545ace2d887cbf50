package link

// One link at work: its source cluster, topic discovery every sync
// interval by the link's patterns (and the topics named by `mirror create
// --link`), pull-mode topics created like the source's, and one partition
// copy per mirrored partition (partition.go).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/mirror"
	"github.com/verbatim-kafka/verbatim/props"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// Link states (LinkDescription.State).
const (
	linkActive      = "ACTIVE"
	linkUnavailable = "UNAVAILABLE"
)

// Reasons of skipped topics.
const (
	reasonOrdinary = "an existing ordinary topic is never converted into a mirror (only `mirror create --truncate-to-common` does, explicitly)"
	reasonInternal = "internal topics (__*) are never mirrored"
)

// runner runs one link.
type runner struct {
	m    *Manager
	name string
	id   [16]byte
	log  *slog.Logger
	src  sourceCluster
	// fetch serves every copy's Source over shared fetch sessions
	// (source.go): one or two connections per source broker.
	fetch *sourceFetchers
	// secretErr: the stored source credentials could not be decoded
	// (secrets.go); the link stays UNAVAILABLE with it as the reason.
	secretErr error
	// include and exclude are the link's patterns (nil: none).
	include, exclude *regexp.Regexp

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	wake   chan struct{}
	// rounds counts completed sync rounds.
	rounds atomic.Int64

	mu sync.Mutex
	// meta is the persisted state; replaced (never mutated) once
	// persisted, see update.
	meta *linkMeta
	// state and reason are the link's own (ACTIVE, UNAVAILABLE).
	state, reason string
	srcClusterID  string
	// parts are the partitions with a copy or a state, by topic.
	parts map[string][]*partRun
	// skipped are matching topics the link does not mirror, with why.
	skipped map[string]string
	// stopped are the link's topics that were stopped (failed over).
	stopped map[string]bool
	// warned are the keys continuous sync logged a warning for (sync.go).
	warned map[string]bool
}

// sourceOptions are the client options of a link's source. cfg must be
// clear: a stored definition (runner.meta.Config) is sealed and must be
// opened first (openConfig, secrets.go).
func sourceOptions(cfg wireext.LinkConfig) (client.Options, error) {
	p := props.New()
	keys := make([]string, 0, len(cfg.SourceConfig))
	for k := range cfg.SourceConfig {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p.Set(k, cfg.SourceConfig[k])
	}
	o, err := client.FromProps(p)
	if err != nil {
		return o, err
	}
	if o.ClientID == "" {
		o.ClientID = "verbatim-link-" + cfg.Name
	}
	return o, nil
}

// pickSeed is the address of a bootstrap list the source cluster is first
// reached through: the first that accepts a connection (briefly tried,
// in order), else the first. Once the cluster's metadata is known, its
// client falls back to any of its brokers.
func pickSeed(list string, o client.Options) string {
	addrs := props.List(list)
	if len(addrs) == 0 {
		return list
	}
	if len(addrs) == 1 {
		return addrs[0]
	}
	for _, a := range addrs {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		cn, err := client.Dial(ctx, a, o)
		cancel()
		if err == nil {
			cn.Close()
			return a
		}
	}
	return addrs[0]
}

// compilePattern compiles a link pattern matched against whole names.
func compilePattern(what, re string) (*regexp.Regexp, error) {
	if re == "" {
		return nil, nil
	}
	c, err := regexp.Compile("^(?:" + re + ")$")
	if err != nil {
		return nil, fmt.Errorf("%s pattern %q: %v", what, re, err)
	}
	return c, nil
}

func newRunner(m *Manager, lm *linkMeta) (*runner, error) {
	id, err := lm.id()
	if err != nil {
		return nil, err
	}
	// The stored definition is sealed (secrets.go): opened here for the
	// client only. A link whose credentials cannot be decoded stays
	// UNAVAILABLE (secretErr) and never connects.
	var o client.Options
	clear, secretErr := openConfig(m.host, lm.Config)
	if secretErr == nil {
		if o, err = sourceOptions(clear); err != nil {
			return nil, err
		}
	}
	src, err := m.newSource(pickSeed(lm.Config.SourceBootstrap, o), o)
	if err != nil {
		return nil, err
	}
	inc, err := compilePattern("topics", lm.Config.Topics)
	if err != nil {
		return nil, err
	}
	exc, err := compilePattern("exclude", lm.Config.Exclude)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &runner{m: m, name: lm.Config.Name, id: id, log: m.log.With("link", lm.Config.Name), src: src, include: inc, exclude: exc,
		ctx: ctx, cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1),
		meta: lm, state: linkActive, secretErr: secretErr, parts: map[string][]*partRun{}, skipped: map[string]string{}, stopped: map[string]bool{}}
	r.fetch = newSourceFetchers(sourceConfig{Cluster: src.Client(), source: src, Clock: m.clock, Log: r.log, ThrottleBytesPerSec: lm.Config.ThrottleBytesPerSec, FetchConns: linkFetchConns})
	if secretErr != nil {
		r.state, r.reason = linkUnavailable, secretErr.Error()
	}
	return r, nil
}

func (r *runner) start() { go r.loop() }

// stop ends the runner and every copy, and waits for them.
func (r *runner) stop() {
	r.cancel()
	<-r.done
	r.mu.Lock()
	var all []*partRun
	for _, ps := range r.parts {
		all = append(all, ps...)
	}
	r.mu.Unlock()
	for _, pr := range all {
		pr.halt()
	}
	r.fetch.Close()
	r.src.Close()
}

// discard releases a runner that never started (its creation refused).
func (r *runner) discard() {
	r.cancel()
	r.fetch.Close()
	r.src.Close()
}

// poke asks for a sync round now.
func (r *runner) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *runner) interval() time.Duration {
	r.mu.Lock()
	ms := r.meta.Config.SyncIntervalMs
	r.mu.Unlock()
	if ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return r.m.syncInterval
}

// loop runs a sync round every interval, or when poked.
func (r *runner) loop() {
	defer close(r.done)
	for {
		r.syncRound(r.ctx)
		wctx, cancel := context.WithCancel(r.ctx)
		go func() {
			select {
			case <-r.wake:
				cancel()
			case <-wctx.Done():
			}
		}()
		err := r.m.clock.Sleep(wctx, r.interval())
		cancel()
		if r.ctx.Err() != nil {
			return
		}
		_ = err
	}
}

// syncRound discovers the source's topics and brings the mirror in line:
// topics created, partitions added, copies started, stopped topics
// noted. Then the sync hook (link-sync's continuous sync) runs.
func (r *runner) syncRound(ctx context.Context) {
	if r.secretErr != nil {
		return // UNAVAILABLE from the start (newRunner)
	}
	md, err := r.src.Metadata(ctx, nil)
	if err != nil {
		if ctx.Err() == nil {
			r.setLinkState(linkUnavailable, fmt.Sprintf("source %s: %v", r.src.Seed(), err))
			r.log.Warn("link source unavailable", "err", err)
		}
		return
	}
	r.setLinkState(linkActive, "")
	r.mu.Lock()
	r.srcClusterID = r.src.ClusterID()
	r.mu.Unlock()
	names := make([]string, 0, len(md))
	for n := range md {
		names = append(names, n)
	}
	sort.Strings(names)
	// On a cluster only the link coordinator creates and grows topics
	// (cluster.go); every broker starts the copies it leads.
	coord := r.m.coordinator()
	if coord {
		r.createTopics(ctx, md, names)
	}
	var start []*partRun
	for _, n := range names {
		if !r.wants(n) {
			continue
		}
		tm := md[n]
		if tm.Err != nil {
			continue
		}
		start = append(start, r.ensureTopic(ctx, n, tm, coord)...)
	}
	r.startCopies(ctx, md, start)
	r.refreshIdle(ctx)
	if h := r.m.syncHook; h != nil {
		h(ctx, r)
	}
	r.rounds.Add(1)
}

// wants reports whether the link mirrors source topic name: named by
// StartMirrorTopics, or matching Topics and not Exclude.
func (r *runner) wants(name string) bool {
	r.mu.Lock()
	tm := r.meta.Topics[name]
	r.mu.Unlock()
	if tm != nil && (tm.Added || tm.Mirrored) {
		return true
	}
	return r.include != nil && r.include.MatchString(name) && (r.exclude == nil || !r.exclude.MatchString(name))
}

func (r *runner) setLinkState(state, reason string) {
	r.mu.Lock()
	r.state, r.reason = state, reason
	r.mu.Unlock()
}

// ensureTopic makes the destination topic of source topic name a
// pull-mode mirror of this link like the source's, or records why it is
// skipped, and returns the partitions whose copy should start.
//
// Only the coordinator (coord) records what it finds about the source
// topic (its id, its growth); the others adopt what the store holds.
func (r *runner) ensureTopic(ctx context.Context, name string, sm *client.TopicMeta, coord bool) []*partRun {
	if strings.HasPrefix(name, "__") {
		r.skip(name, reasonInternal)
		return nil
	}
	h := r.m.host
	info, ok := h.LinkTopic(name)
	switch {
	case !ok:
		return nil // createTopics could not create it (it said why)
	case info.MirrorMode == "pull" && info.MirrorLink == r.name:
		if coord && r.sourceReplaced(name, sm.ID) {
			return nil // FAILED, never re-mirrored (sync.go)
		}
		if n := int32(len(sm.Partitions)); coord && info.Partitions < n {
			if err := h.AddPullPartitions(r.name, name, n); err != nil {
				r.log.Warn("adding partitions", "topic", name, "err", err)
			} else {
				info.Partitions = n
			}
		}
	case info.MirrorMode == "" && info.MirrorState != "" && r.mirrored(name):
		r.markStopped(name)
		return nil
	case info.MirrorMode == "":
		r.skip(name, reasonOrdinary)
		return nil
	default:
		r.skip(name, fmt.Sprintf("a mirror topic of another writer (mirror.mode=%s, mirror.link=%s)", info.MirrorMode, info.MirrorLink))
		return nil
	}
	return r.adopt(name, info, coord)
}

// createTopics creates the destination topics of the wanted source
// topics in md that do not exist yet like the source's, all in one batch
// (one topic metadata write for a link's whole discovery: a thousand
// partitions start at once), and records them as the link's in one link
// meta write; ensureTopic then adopts them.
func (r *runner) createTopics(ctx context.Context, md map[string]*client.TopicMeta, names []string) {
	h := r.m.host
	var pts []broker.PullTopic
	for _, name := range names {
		sm := md[name]
		if sm.Err != nil || strings.HasPrefix(name, "__") || !r.wants(name) {
			continue
		}
		if _, ok := h.LinkTopic(name); ok {
			continue
		}
		cfgs, err := r.src.TopicConfigs(ctx, name)
		if err != nil {
			r.log.Warn("reading the source topic's configs", "topic", name, "err", err)
			continue
		}
		for k := range cfgs {
			if !SyncedTopicConfig(k) {
				delete(cfgs, k) // the destination's own (sync.go)
			}
		}
		pts = append(pts, broker.PullTopic{Name: name, Partitions: int32(len(sm.Partitions)), ID: sm.ID, SourceConfigs: cfgs})
	}
	if len(pts) == 0 {
		return
	}
	clusterID := r.src.ClusterID()
	if clusterID == "" {
		// The mirror stop's barrier names it: wait for a source that
		// reports one (Metadata v2+).
		r.log.Warn("the source reports no cluster id; not creating the mirror topics", "topics", len(pts))
		return
	}
	res := h.CreatePullTopics(r.name, clusterID, pts)
	var created []broker.PullTopic
	for i, pt := range pts {
		if res[i].Err != nil {
			r.log.Warn("creating the pull-mode topic", "topic", pt.Name, "err", res[i].Err)
			continue
		}
		created = append(created, pt)
	}
	if len(created) > 0 {
		r.createdTopics(created)
	}
}

func (r *runner) mirrored(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	tm := r.meta.Topics[name]
	return tm != nil && tm.Mirrored
}

func (r *runner) skip(name, reason string) {
	r.mu.Lock()
	r.skipped[name] = reason
	r.mu.Unlock()
}

// markStopped notes a topic of the link that was stopped: its copies end
// and its partitions are STOPPED.
func (r *runner) markStopped(name string) {
	r.mu.Lock()
	ps := r.parts[name]
	r.stopped[name] = true
	r.mu.Unlock()
	for _, pr := range ps {
		pr.halt()
	}
}

// adopt records info (the link's pull-mode topic) as mirrored, persisted,
// and returns its partitions whose copy should start: not running, not
// paused, not failed (unless the failure is retried).
//
// On a cluster only the coordinator (coord) persists the adoption, and
// only the partitions this broker leads are returned.
func (r *runner) adopt(name string, info broker.LinkTopicInfo, coord bool) []*partRun {
	if coord && !r.mirrored(name) {
		if err := r.update(func(lm *linkMeta) { lm.topic(name).Mirrored = true }); err != nil {
			r.log.Warn("persisting the link's topic", "topic", name, "err", err)
			return nil
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.skipped, name)
	if info.MirrorState == broker.MirrorStateStopping || info.MirrorState == broker.MirrorStateStopped {
		return nil
	}
	ps := r.parts[name]
	for i := int32(len(ps)); i < info.Partitions; i++ {
		ps = append(ps, newPartRun(r, name, i))
	}
	r.parts[name] = ps
	tm := r.meta.Topics[name]
	if tm != nil && tm.Paused {
		return nil
	}
	var out []*partRun
	for _, pr := range ps {
		f, failed := failureOf(tm, pr.partition)
		pr.led = r.m.leads(name, pr.partition)
		if pr.running() || failed && !f.Retry || !pr.led {
			continue
		}
		out = append(out, pr)
	}
	return out
}

// startCopies registers the link as the writer of ps, all in one
// registration, raises their leader epochs for the source's current ones
// (md) in one write, and starts their copies.
func (r *runner) startCopies(ctx context.Context, md map[string]*client.TopicMeta, ps []*partRun) {
	if len(ps) == 0 || ctx.Err() != nil {
		return
	}
	parts := make([]broker.LinkPartition, len(ps))
	for i, pr := range ps {
		parts[i] = broker.LinkPartition{Topic: pr.topic, Partition: pr.partition}
	}
	epoch, errs := r.m.host.RegisterLinkWriter(r.name, r.id, parts)
	var begin []broker.LinkPartition
	for i := range ps {
		if errs[i] == nil {
			begin = append(begin, parts[i])
		}
	}
	// The restarts' failures go in one write (begin's own finds none).
	if err := r.clearFailures(begin); err != nil {
		r.log.Warn("persisting the partitions' restart", "partitions", len(begin), "err", err)
	}
	// The first appends' epoch raises, done once for all (else each
	// partition's first append rewrites the topic metadata).
	epochs := make([]int32, len(begin))
	for i, lp := range begin {
		epochs[i] = -1
		if tm := md[lp.Topic]; tm != nil && int(lp.Partition) < len(tm.Partitions) {
			epochs[i] = tm.Partitions[lp.Partition].LeaderEpoch
		}
	}
	if err := r.m.host.RaiseLinkEpochs(r.name, begin, epochs); err != nil {
		r.log.Warn("raising the partitions' leader epochs (their first appends will)", "partitions", len(begin), "err", err)
	}
	for i, pr := range ps {
		if errs[i] != nil {
			pr.ended(errs[i])
			continue
		}
		pr.begin(mirror.Writer{Epoch: epoch, ID: r.id})
	}
}

// refreshIdle reads the source high watermark of the partitions no copy
// runs for, except stopped topics'.
func (r *runner) refreshIdle(ctx context.Context) {
	r.mu.Lock()
	var idle []*partRun
	for t, ps := range r.parts {
		if r.stopped[t] {
			continue
		}
		for _, pr := range ps {
			if r.m.leads(t, pr.partition) { // on a cluster, the leader's to report
				idle = append(idle, pr)
			}
		}
	}
	r.mu.Unlock()
	for _, pr := range idle {
		pr.refreshIdle(ctx)
	}
}

// sourceFor is the source of one partition's copy, charging led.
func (r *runner) sourceFor(topic string, partition int32, led *ledger) mirror.Source {
	return r.fetch.sourceWith(topic, partition, led)
}

// Topics returns the names of the link's mirrored topics (for the sync
// hook), sorted.
func (r *runner) Topics() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for n, tm := range r.meta.Topics {
		if tm.Mirrored {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Name is the link's name; Source its source cluster (for the sync
// hook); Config its definition.
func (r *runner) Name() string            { return r.name }
func (r *runner) Source() *client.Cluster { return r.src.Client() }
func (r *runner) Config() wireext.LinkConfig {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.meta.Config
}

// errNotMirrored refuses an operation on a topic the link does not
// mirror.
var errNotMirrored = errors.New("not a mirror topic of this link")
