package broker

// The broker's side of a cluster link's partition copies (package link's
// dataHost, link/host_data.go): the topics with their mirror configs and
// states, pull-mode topics created like the source's, the writer
// registration, the in-process mirror append, the log-start forward and
// the reads a copy resumes from.
//
// A link is the writer of its pull-mode topics (mirror.mode=pull,
// mirror.link=NAME) exactly as a pusher is of a push topic: it registers
// with the same broker-assigned writer epochs (registerMirrorWriters), and
// its appends take the wire mirror produce's path from validation on
// (prepareMirrorAppend: verbatim validation, the append guard's writer
// fencing, expected log end and policies, the partition's queue, the
// KIP-1279 epoch rule), with the fetched bytes appended as they are. Only
// the link named by mirror.link writes a pull topic; wire mirror writes to
// it are refused (00_produce.go, 21_delete_records.go).
//
// Errors are Kafka errors (errors.Is with the kerr code, the broker's
// message in the text), as a wire client would see them.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/hotpath"
	"github.com/verbatim-kafka/verbatim/storage"
)

// LinkTopicInfo is a topic as a link sees it.
type LinkTopicInfo struct {
	Name       string
	ID         [16]byte
	Partitions int32
	// Configs are the topic's overrides.
	Configs map[string]string
	// MirrorMode is mirror.mode ("" for an ordinary topic), MirrorLink
	// mirror.link.
	MirrorMode, MirrorLink string
	// MirrorState is the mirror state (MirrorStateMirroring, ...), also
	// for a former mirror topic once stopped; "" for a topic that never
	// was one.
	MirrorState string
	// Internal is a coordinator topic (__consumer_offsets, ...).
	Internal bool
}

// Mirror states as LinkTopicInfo reports them.
const (
	MirrorStateMirroring = mirrorStateMirroring
	MirrorStateStopping  = mirrorStateStopping
	MirrorStateStopped   = mirrorStateStopped
)

// LinkTopics lists every topic, by name.
func (s *Server) LinkTopics() []LinkTopicInfo {
	ts := s.cluster.topics()
	out := make([]LinkTopicInfo, 0, len(ts))
	for _, t := range ts {
		out = append(out, s.linkTopicInfo(t))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LinkTopic describes one topic (false when it does not exist).
func (s *Server) LinkTopic(name string) (LinkTopicInfo, bool) {
	t := s.cluster.topic(name)
	if t == nil {
		return LinkTopicInfo{}, false
	}
	return s.linkTopicInfo(t), true
}

func (s *Server) linkTopicInfo(t *Topic) LinkTopicInfo {
	cfg := t.Config()
	info := LinkTopicInfo{Name: t.Name, ID: t.ID, Partitions: int32(len(t.Partitions())), Configs: cfg.Overrides(),
		MirrorMode: mirrorModeOf(cfg), MirrorLink: cfg.MirrorLink, Internal: isInternalTopic(t.Name)}
	if cfg.Mirror {
		if st, err := s.mirrorStateOf(t); err == nil {
			info.MirrorState = st.State
		}
	} else {
		info.MirrorState = s.formerMirrorState(t)
	}
	return info
}

// formerMirrorState is the state an ordinary topic's mirror state file
// records ("" when it has none: it never was a mirror), without creating
// one. In cluster mode it is the store's record: the cached state of a
// broker that did not finish the stop says "stopping" (its stop runner
// ends with the config without mirror.*, before the record says
// "stopped").
func (s *Server) formerMirrorState(t *Topic) string {
	r := &s.mirror
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.cm != nil {
		st, err := s.clusterMirrorStateLocked(t)
		if err != nil || st == nil {
			return ""
		}
		return st.State
	}
	if st := r.topics[t.ID]; st != nil {
		return st.State
	}
	if _, err := s.fs.Stat(mirrorStateDir + "/" + mirrorStateName(t.ID)); errors.Is(err, fs.ErrNotExist) || err != nil {
		return ""
	}
	st, err := s.loadMirrorStateLocked(t)
	if err != nil {
		return ""
	}
	return st.State
}

// CreatePullTopic creates topic name as a pull-mode mirror of link: the
// source's partition count, its topic id (kept unless zero), its explicit
// configs (mirror.* and configs Verbatim does not know are left out and
// returned in skipped) plus mirror.mode=pull, mirror.link=link and
// mirror.source.cluster.id=sourceClusterID.
func (s *Server) CreatePullTopic(link, name string, partitions int32, id [16]byte, sourceConfigs map[string]string, sourceClusterID string) (skipped []string, err error) {
	res := s.CreatePullTopics(link, sourceClusterID, []PullTopic{{Name: name, Partitions: partitions, ID: id, SourceConfigs: sourceConfigs}})
	return res[0].Skipped, res[0].Err
}

// PullTopic is one topic CreatePullTopics creates: its name, the source's
// partition count, topic id (zero: a fresh one) and explicit configs.
type PullTopic struct {
	Name          string
	Partitions    int32
	ID            [16]byte
	SourceConfigs map[string]string
}

// PullTopicResult is CreatePullTopics' outcome for one topic: the source
// configs left out, and its refusal (nil: created).
type PullTopicResult struct {
	Skipped []string
	Err     error
}

// CreatePullTopics creates topics as pull-mode mirrors of link, each as
// CreatePullTopic does, with one topic metadata write for all of them (a
// link discovering a source's topics creates them in one batch: on a
// single node one topics.json write and the new logs opened a few at a
// time; in cluster mode each topic is its own cluster store write).
func (s *Server) CreatePullTopics(link, sourceClusterID string, topics []PullTopic) []PullTopicResult {
	res := make([]PullTopicResult, len(topics))
	if link == "" || sourceClusterID == "" {
		for i := range res {
			res[i].Err = kafkaErr(kerr.InvalidRequest, "a pull-mode topic needs its link and the source cluster id")
		}
		return res
	}
	var cs []topicCreate
	var idx []int
	for i, pt := range topics {
		cfg, skipped, err := s.pullTopicConfig(link, pt.Name, pt.SourceConfigs, sourceClusterID)
		res[i].Skipped = skipped
		if err != nil {
			res[i].Err = linkErr(err)
			continue
		}
		cs, idx = append(cs, topicCreate{name: pt.Name, partitions: pt.Partitions, cfg: cfg, id: pt.ID}), append(idx, i)
	}
	if len(cs) == 0 {
		return res
	}
	ts, errs := s.createMirrorTopicsWithIDs(cs)
	for j, i := range idx {
		if errs[j] != nil {
			res[i].Err = linkErr(errs[j])
			continue
		}
		pt := topics[i]
		s.log.Info("created pull-mode mirror topic", "topic", pt.Name, "link", link, "partitions", len(ts[j].Partitions()), "topic_id", formatTopicID(ts[j].ID), "skipped_configs", res[i].Skipped)
	}
	return res
}

// pullTopicConfig is the config of link's pull-mode topic name made from
// the source's explicit configs (mirror.* and unknown ones left out, in
// skipped), checked against the topic policies.
func (s *Server) pullTopicConfig(link, name string, sourceConfigs map[string]string, sourceClusterID string) (cfg *TopicConfig, skipped []string, err error) {
	if err := validateTopicName(name); err != nil {
		return nil, nil, err
	}
	overrides := make(map[string]string, len(sourceConfigs)+3)
	for k, v := range sourceConfigs {
		if strings.HasPrefix(k, "mirror.") || topicConfigByName[k] == nil {
			skipped = append(skipped, k)
			continue
		}
		overrides[k] = v
	}
	sort.Strings(skipped)
	overrides[cfgMirrorMode], overrides[cfgMirrorLink], overrides[cfgMirrorSourceClusterID] = "pull", link, sourceClusterID
	if cfg, err = s.topicConfig(overrides); err != nil {
		return nil, skipped, err
	}
	if err := s.checkTopicPolicies(cfg); err != nil {
		return nil, skipped, err
	}
	return cfg, skipped, nil
}

// AddPullPartitions grows link's pull-mode topic name to count
// partitions (the source's count).
func (s *Server) AddPullPartitions(link, name string, count int32) error {
	t, err := s.pullTopic(link, name)
	if err != nil {
		return err
	}
	if err := s.cluster.addPartitions(t, count, false); err != nil {
		return linkErr(err)
	}
	s.log.Info("added partitions to pull-mode mirror topic", "topic", name, "link", link, "partitions", count)
	return nil
}

// pullTopic returns link's pull-mode topic name, or the refusal a write
// by link to it gets.
func (s *Server) pullTopic(link, name string) (*Topic, error) {
	t := s.cluster.topic(name)
	if t == nil {
		return nil, kafkaErr(kerr.UnknownTopicOrPartition, "topic "+name+" does not exist")
	}
	cfg := t.Config()
	if !cfg.MirrorPull || cfg.MirrorLink != link {
		if !cfg.Mirror {
			if st := s.formerMirrorState(t); st == mirrorStateStopped {
				return nil, kafkaErr(kerr.PolicyViolation, fmt.Sprintf("topic %s is no longer a mirror (mirror stop: stopped): mirror writes are refused", name))
			}
		}
		return nil, kafkaErr(kerr.PolicyViolation, fmt.Sprintf("topic %s is not a pull-mode mirror topic of link %s (mirror.mode=%s, mirror.link=%s)", name, link, mirrorModeOf(cfg), cfg.MirrorLink))
	}
	return t, nil
}

// pullPartition is pullTopic's partition with its log.
func (s *Server) pullPartition(link, topic string, partition int32) (*Partition, *logHandle, error) {
	t, err := s.pullTopic(link, topic)
	if err != nil {
		return nil, nil, err
	}
	p := t.Partition(partition)
	if p == nil {
		return nil, nil, kafkaErr(kerr.UnknownTopicOrPartition, fmt.Sprintf("topic %s has no partition %d", topic, partition))
	}
	// Cluster mode: only a partition's leader writes it (a link's append
	// on a follower would be a second writer of its replica). Links are
	// not created in cluster mode (mirror_cluster.go); this holds
	// whatever runs.
	if _, err := s.leaderCheck(p, -1); err != nil {
		return nil, nil, err
	}
	h, err := partitionHandle(p)
	if err != nil {
		return nil, nil, linkErr(err)
	}
	return p, h, nil
}

// LinkPartition names one partition of a link's topic.
type LinkPartition struct {
	Topic     string
	Partition int32
}

// LinkWriter is a link's writer identity on its partitions: the epoch the
// broker assigned its registration and its id (the link id).
type LinkWriter struct {
	Epoch int32
	ID    [16]byte
}

func (w LinkWriter) mirrorWriter() mirrorWriter { return mirrorWriter{Epoch: w.Epoch, ID: w.ID} }

// RegisterLinkWriter registers link's id as the writer of parts (of its
// pull-mode topics) in one assignment, as a pusher's registration does
// (mirror_writer.go): the epoch assigned, and per partition its refusal
// (nil: registered).
func (s *Server) RegisterLinkWriter(link string, id [16]byte, parts []LinkPartition) (int32, []error) {
	errs := make([]error, len(parts))
	var ps []*Partition
	var idx []int
	for i, lp := range parts {
		p, _, err := s.pullPartition(link, lp.Topic, lp.Partition)
		if err != nil {
			errs[i] = err
			continue
		}
		ps, idx = append(ps, p), append(idx, i)
	}
	if len(ps) == 0 {
		return -1, errs
	}
	epoch, rerrs := s.registerMirrorWriters(ps, writerID(id))
	for j, err := range rerrs {
		if err != nil {
			errs[idx[j]] = linkErr(err)
		}
	}
	return epoch, errs
}

// RaiseLinkEpochs raises the leader epochs of link's pull-mode
// partitions parts, before their copies start, to what their first
// appends would raise them to (storage.MirrorLeaderEpoch, KIP-1279's
// rule) for batches of the source's current leader epochs (sourceEpochs[i];
// negative: unknown, left alone), with one metadata write for all: a
// link starting a thousand copies would otherwise raise each on its
// first append, hundreds of whole-metadata writes even group-committed.
// A batch of a later source epoch still raises its partition on append.
func (s *Server) RaiseLinkEpochs(link string, parts []LinkPartition, sourceEpochs []int32) error {
	var ps []*Partition
	var want []int32
	for i, lp := range parts {
		if sourceEpochs[i] < 0 {
			continue
		}
		p, _, err := s.pullPartition(link, lp.Topic, lp.Partition)
		if err != nil {
			continue // its registration says why
		}
		if cur, w := p.LeaderEpoch(), storage.MirrorLeaderEpoch(p.LeaderEpoch(), sourceEpochs[i]); w > cur {
			ps, want = append(ps, p), append(want, w)
		}
	}
	if len(ps) == 0 {
		return nil
	}
	return linkErr(s.setLeaderEpochsAtLeast(ps, want))
}

// LinkAppend is a link's mirror append in a partition's queue.
type LinkAppend struct {
	s       *Server
	a       hotpath.Append
	g       hotpath.Group
	guard   produceGuard
	records int64
	err     error // refused before it was queued
}

// AppendWaiter is a queued link append (LinkMirrorAppend).
type AppendWaiter interface {
	// Wait returns the append's first offset once it completed, or the
	// refusal a wire mirror produce would have been answered.
	Wait(ctx context.Context) (int64, error)
}

// LinkMirrorAppend queues the mirror append of set (whole batches as the
// source holds them) to link's pull-mode partition as writer w, stating
// the log end it expects (and the source high watermark it was fetched
// under, 0 unknown, for the partition's lag), through the wire mirror produce's path
// (prepareMirrorAppend). It blocks while the partition's queue is full
// (back-pressure) or until ctx ends; the outcome is Wait's.
func (s *Server) LinkMirrorAppend(ctx context.Context, link, topic string, partition int32, w LinkWriter, set []byte, expect, sourceHW int64) AppendWaiter {
	la := &LinkAppend{s: s}
	p, h, err := s.pullPartition(link, topic, partition)
	if err != nil {
		la.err = err
		return la
	}
	vr, err := prepareMirrorAppend(s, p, h.log, set, w.mirrorWriter(), expect, sourceHW, time.Now().UnixMilli(),
		s.flushPolicy() == storage.FlushAlways, &la.a, &la.guard)
	if err != nil {
		la.err = linkErr(err)
		return la
	}
	if rs := p.repl.Load(); rs != nil && rs.leader {
		la.guard.lead = rs.lead // written only while the leadership holds
	}
	la.records = vr.Records
	la.g.Reset()
	la.g.Add(1)
	if err := h.queue.Submit(ctx, &la.g, &la.a); err != nil {
		if ctx.Err() == nil {
			err = linkErr(fmt.Errorf("%w: %v", storage.ErrClosed, err))
		}
		la.err = err
	}
	return la
}

// Wait is AppendWaiter's.
func (la *LinkAppend) Wait(ctx context.Context) (int64, error) {
	if la.err != nil {
		return -1, la.err
	}
	if err := awaitReady(ctx, la.g.Done()); err != nil {
		return -1, err
	}
	if err := la.guard.settleMirror(la.a.Err); err != nil {
		la.s.logDataFailure("link append", la.guard.p.Topic.Name, la.guard.p.Index, codeOf(err), err, clientInfo{}, "expected", la.guard.expected)
		return -1, linkErr(err)
	}
	if ar := &la.a.Result; !ar.Duplicate && !ar.AlreadyPresent {
		la.guard.p.notifyAppend()
		m := la.s.topicMetrics(la.guard.p.Topic)
		m.BytesIn.Add(float64(len(la.a.Set)))
		m.MessagesIn.Add(float64(la.records))
		// Kafka counts a follower's fetched bytes as ReplicationBytesIn:
		// the link is a remote follower.
		m.ReplicationBytesIn.Add(float64(len(la.a.Set)))
	}
	return la.a.Result.FirstOffset, nil
}

// NoteMirrorDivergence counts a link partition that went FAILED because
// its source diverged (verbatim_mirror_divergences_total).
func (s *Server) NoteMirrorDivergence(topic string) {
	s.MirrorTopicMetrics(topic).MirrorDivergences.Inc()
}

// LinkForwardLogStart moves the log start of link's partition to offset
// as writer w, as a pusher's mirror DeleteRecords does (offset 0 moves
// nothing: the writer check alone), with startEpoch >= 0 also recording
// the source's leader epoch there (mirror_start_epoch.go; -1: none); it
// returns the new log start.
func (s *Server) LinkForwardLogStart(link, topic string, partition int32, w LinkWriter, offset int64, startEpoch int32) (int64, error) {
	p, _, err := s.pullPartition(link, topic, partition)
	if err != nil {
		return -1, err
	}
	if err := s.admitMirrorDelete(p, w.mirrorWriter()); err != nil {
		return -1, linkErr(err)
	}
	requested, low, err := deleteRecordsTo(p, offset, true, startEpoch, link)
	if err == nil && startEpoch >= 0 {
		err = s.recordSourceStart(p, requested, startEpoch) // cluster mode: for every replica
	}
	if err != nil {
		return -1, linkErr(err)
	}
	return low, nil
}

// MirrorLogRange is a partition's log start and log end (the offset the
// next mirror append states).
func (s *Server) MirrorLogRange(topic string, partition int32) (logStart, logEnd int64, err error) {
	l, err := s.linkLog(topic, partition)
	if err != nil {
		return -1, -1, err
	}
	return l.LogStartOffset(), l.LogEndOffset(), nil
}

// ReadMirrorLog returns the whole batches stored from the one holding
// offset, up to about maxBytes (the first batch whole).
func (s *Server) ReadMirrorLog(topic string, partition int32, offset int64, maxBytes int) ([]byte, error) {
	l, err := s.linkLog(topic, partition)
	if err != nil {
		return nil, err
	}
	sl, err := l.Read(offset, maxBytes)
	if err != nil {
		return nil, linkErr(err)
	}
	b, err := sl.Bytes(nil)
	if err != nil {
		return nil, linkErr(err)
	}
	return b, nil
}

// LastBatchEpoch is the leader epoch of a partition's last stored batch
// as its epoch cache records it (-1: none).
func (s *Server) LastBatchEpoch(topic string, partition int32) (int32, error) {
	l, err := s.linkLog(topic, partition)
	if err != nil {
		return -1, err
	}
	if e, ok := l.EpochCache().LatestEpoch(); ok {
		return e, nil
	}
	return -1, nil
}

func (s *Server) linkLog(topic string, partition int32) (*storage.Log, error) {
	t := s.cluster.topic(topic)
	if t == nil {
		return nil, kafkaErr(kerr.UnknownTopicOrPartition, "topic "+topic+" does not exist")
	}
	p := t.Partition(partition)
	if p == nil {
		return nil, kafkaErr(kerr.UnknownTopicOrPartition, fmt.Sprintf("topic %s has no partition %d", topic, partition))
	}
	l, err := partitionLog(p)
	if err != nil {
		return nil, linkErr(err)
	}
	return l, nil
}

// linkErr is err as the Kafka error a wire client would get: errors.Is
// with its kerr code, the broker's message as text.
func linkErr(err error) error {
	if err == nil {
		return nil
	}
	var ke *kafkaError
	if errors.As(err, &ke) {
		return err
	}
	code, msg := dataErrorToKafka(err)
	var kc *kerr.Error
	if !errors.As(kerr.ErrorForCode(code), &kc) {
		kc = kerr.UnknownServerError
	}
	return kafkaErr(kc, msg)
}

func codeOf(err error) int16 {
	code, _ := dataErrorToKafka(err)
	return code
}
