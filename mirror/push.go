package mirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// Tag and feature of Verbatim's mirror produce (docs/protocol.md).
const (
	mirrorTag     = wireext.MirrorTag
	mirrorFeature = wireext.FeatureMirrorProduce
)

// Options configure a push.
type Options struct {
	Source string // HOST:PORT of any source broker
	Dest   string // HOST:PORT of the Verbatim destination
	Topics []string
	// CreateTopics creates missing destination topics (and missing
	// partitions) like the source's, as mirror topics.
	CreateTopics bool
	// Follow keeps tailing the source after catching up.
	Follow bool
	// Groups, when set, selects consumer groups whose committed offsets
	// for the mirrored topics are copied (clamped into the destination's
	// range; groups with members on the destination are skipped): after
	// the copy, and on every metadata refresh while following.
	Groups *regexp.Regexp
	// FetchBytes is the per-partition fetch size (default 4 MiB); a
	// larger first batch is fetched whole by growing it.
	FetchBytes int32
	// WriterEpoch and WriterID identify this pusher to the destination
	// (docs/protocol.md "Writer epoch"): the partition's newest writer,
	// by epoch and then by id, fences every other. Zero values pick the
	// start time: the epoch in Unix seconds, the id as the start time in
	// Unix nanoseconds (8 bytes big-endian) followed by 8 random bytes,
	// so a later pusher is newer even within the same second and two
	// started at the same instant still differ (writer.go).
	WriterEpoch int32
	WriterID    [16]byte
	// RetryFor bounds how long connection failures and retriable errors
	// are retried before giving up (default 2 minutes).
	RetryFor time.Duration
	// MetadataEvery is how often --follow looks for new source
	// partitions (default 30s).
	MetadataEvery time.Duration
	Logger        *slog.Logger
	// Progress, when set (a terminal), receives a progress line per
	// partition every ProgressEvery (default 2s).
	Progress      io.Writer
	ProgressEvery time.Duration
}

func (o *Options) defaults() error {
	if o.Source == "" || o.Dest == "" {
		return Usage("--source and --dest are required")
	}
	if len(o.Topics) == 0 {
		return Usage("--topics is required")
	}
	if o.FetchBytes <= 0 {
		o.FetchBytes = 4 << 20
	}
	now := time.Now()
	if o.WriterEpoch == 0 {
		o.WriterEpoch = int32(now.Unix())
	}
	if o.WriterID == ([16]byte{}) {
		o.WriterID = newWriterID(now)
	}
	if o.RetryFor <= 0 {
		o.RetryFor = 2 * time.Minute
	}
	if o.MetadataEvery <= 0 {
		o.MetadataEvery = 30 * time.Second
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}

// PartitionStats is the outcome of one partition's copy.
type PartitionStats struct {
	Topic     string
	Partition int32
	// Start is the destination log end the copy resumed from, End the
	// log end it reached.
	Start, End int64
	Batches    int64
	Bytes      int64
	// Target is the source high watermark read at start (with --follow:
	// the last one seen).
	Target int64
}

// Pusher copies topics from a Kafka source into a Verbatim destination.
type Pusher struct {
	o   Options
	src *Cluster
	dst *Cluster
	log *slog.Logger

	mu      sync.Mutex
	workers map[tp]*worker
	topicID map[string][16]byte

	// pinIDs: the destination honours the CreateTopics topic-id tag
	// (feature verbatim.mirror.topic.id); idWarned: topics whose
	// destination id differs from the source's, already logged.
	pinIDs   bool
	idWarned map[string]bool

	// chunkDone, when set (tests), is called by a partition's produce
	// loop after each chunk is acknowledged, with the updated stats,
	// before the loop sends anything more.
	chunkDone func(PartitionStats)
	// claimed, when set (tests), is called by each partition's worker
	// once its writer registration (claim) was answered, with its error.
	claimed func(topic string, partition int32, err error)
}

type tp struct {
	topic     string
	partition int32
}

// NewPusher checks the options and prepares the cluster handles.
func NewPusher(o Options) (*Pusher, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	src, err := NewCluster(o.Source, "verbatim-mirror-push")
	if err != nil {
		return nil, Usage("--source: %v", err)
	}
	dst, err := NewCluster(o.Dest, "verbatim-mirror-push")
	if err != nil {
		return nil, Usage("--dest: %v", err)
	}
	return &Pusher{o: o, src: src, dst: dst, log: o.Logger, workers: map[tp]*worker{}, topicID: map[string][16]byte{}, idWarned: map[string]bool{}}, nil
}

// Push copies every partition of the topics. Without Follow it returns
// once each partition reached the source high watermark read at its
// start; with Follow it runs until ctx ends (then it returns nil).
func Push(ctx context.Context, o Options) ([]PartitionStats, error) {
	p, err := NewPusher(o)
	if err != nil {
		return nil, err
	}
	defer p.src.Close()
	defer p.dst.Close()
	return p.Run(ctx)
}

// Run is Push on a prepared Pusher.
func (p *Pusher) Run(ctx context.Context) ([]PartitionStats, error) {
	dc, err := p.dst.Any(ctx)
	if err != nil {
		return nil, Usage("destination: %v", err)
	}
	if !dc.HasFeature(mirrorFeature) || dc.MaxVersion(kmsg.Produce.Int16()) < 9 {
		return nil, Usage("destination %s does not support mirror produce (ApiVersions lists no %q feature or no Produce v9+): it must be a Verbatim broker", p.o.Dest, mirrorFeature)
	}
	p.checkDestFeatures(dc)
	if _, err := p.src.Any(ctx); err != nil {
		return nil, Usage("source: %v", err)
	}
	parts, err := p.prepareTopics(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	start := func(t tp) {
		w := &worker{p: p, tp: t}
		p.mu.Lock()
		if p.workers[t] != nil {
			p.mu.Unlock()
			return
		}
		p.workers[t] = w
		p.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				cancel(err)
			}
		}()
	}
	for _, t := range parts {
		start(t)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var tick <-chan time.Time
	if p.o.Progress != nil {
		tk := time.NewTicker(p.o.ProgressEvery)
		defer tk.Stop()
		tick = tk.C
	}
	var meta <-chan time.Time
	if p.o.Follow {
		tk := time.NewTicker(p.o.MetadataEvery)
		defer tk.Stop()
		meta = tk.C
	}
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-tick:
			p.printProgress()
		case <-meta:
			if p.o.Groups != nil {
				if err := p.copyGroups(ctx); err != nil && ctx.Err() == nil {
					if ExitCode(err) == ExitRefused {
						cancel(err)
						continue
					}
					p.log.Warn("group offset sync failed", "err", err)
				}
			}
			for _, name := range p.o.Topics {
				if err := p.syncConfigs(ctx, name); err != nil && ctx.Err() == nil {
					p.log.Warn("config sync failed", "topic", name, "err", err)
				}
			}
			more, err := p.prepareTopics(ctx)
			if err != nil && ctx.Err() == nil {
				if ExitCode(err) == ExitRefused {
					cancel(err)
					continue
				}
				p.log.Warn("metadata refresh failed", "err", err)
			}
			for _, t := range more {
				start(t)
			}
		}
	}
	stats := p.stats()
	if p.o.Progress != nil {
		p.printProgress()
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return stats, err
	}
	if p.o.Groups != nil && ctx.Err() == nil {
		if err := p.copyGroups(ctx); err != nil {
			return stats, err
		}
	}
	return stats, nil
}

func (p *Pusher) stats() []PartitionStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]PartitionStats, 0, len(p.workers))
	for _, w := range p.workers {
		out = append(out, w.snapshot())
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

func (p *Pusher) printProgress() {
	for _, s := range p.stats() {
		lag := s.Target - s.End
		if lag < 0 {
			lag = 0
		}
		fmt.Fprintf(p.o.Progress, "%s/%d: log end %d, %d batches, %d bytes copied, lag %d\n", s.Topic, s.Partition, s.End, s.Batches, s.Bytes, lag)
	}
}

// prepareTopics reads the source topics, creates what is missing on the
// destination (with CreateTopics) and returns the partitions that have no
// worker yet.
func (p *Pusher) prepareTopics(ctx context.Context) ([]tp, error) {
	smd, err := p.src.Metadata(ctx, p.o.Topics)
	if err != nil {
		return nil, Usage("source metadata: %v", err)
	}
	dmd, err := p.dst.Metadata(ctx, p.o.Topics)
	if err != nil {
		return nil, Usage("destination metadata: %v", err)
	}
	var out []tp
	for _, name := range p.o.Topics {
		st := smd[name]
		if st == nil || st.Err != nil {
			if st != nil && errors.Is(st.Err, ErrTopicMissing) {
				p.mu.Lock()
				_, known := p.topicID[name]
				p.mu.Unlock()
				if known {
					return nil, Refusal("source topic %s was deleted while mirroring; stopping", name)
				}
				return nil, Usage("source topic %s does not exist on %s", name, p.o.Source)
			}
			return nil, Usage("source topic %s: %v", name, errOr(st))
		}
		p.mu.Lock()
		old, known := p.topicID[name]
		if !known {
			p.topicID[name] = st.ID
		}
		p.mu.Unlock()
		if known && old != st.ID {
			return nil, Refusal("source topic %s was deleted and recreated (topic id changed) while mirroring; stopping: the new topic's offsets are unrelated to the mirrored ones", name)
		}
		dt := dmd[name]
		dn := 0
		if dt != nil && dt.Err == nil {
			dn = len(dt.Partitions)
		}
		switch {
		case dt == nil || errors.Is(dt.Err, ErrTopicMissing):
			if !p.o.CreateTopics {
				return nil, Usage("destination topic %s does not exist on %s (pass --create-topics to create it as a mirror)", name, p.o.Dest)
			}
			if err := p.createTopic(ctx, name, int32(len(st.Partitions)), st.ID); err != nil {
				return nil, err
			}
		case dt.Err != nil:
			return nil, Usage("destination topic %s: %v", name, dt.Err)
		case dn < len(st.Partitions):
			if !p.o.CreateTopics {
				return nil, Refusal("destination topic %s has %d partitions, the source %d (pass --create-topics to add the missing ones)", name, dn, len(st.Partitions))
			}
			if err := p.createPartitions(ctx, name, int32(len(st.Partitions))); err != nil {
				return nil, err
			}
		case dn > len(st.Partitions):
			return nil, Refusal("destination topic %s has %d partitions, more than the source's %d: not a mirror of it", name, dn, len(st.Partitions))
		default:
			p.checkTopicID(name, st.ID, dt.ID)
		}
		for i := range st.Partitions {
			t := tp{name, int32(i)}
			p.mu.Lock()
			_, running := p.workers[t]
			p.mu.Unlock()
			if !running {
				out = append(out, t)
			}
		}
	}
	return out, nil
}

func errOr(t *TopicMeta) error {
	if t == nil {
		return ErrTopicMissing
	}
	return t.Err
}

// sourceConfigs returns the topic configs set explicitly on the source.
func (p *Pusher) sourceConfigs(ctx context.Context, topic string) (map[string]string, error) {
	return topicConfigs(ctx, p.src, topic)
}

// topicConfigs returns a topic's configs set explicitly (dynamic topic
// configs) on a cluster.
func topicConfigs(ctx context.Context, cl *Cluster, topic string) (map[string]string, error) {
	cn, err := cl.Any(ctx)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	req.Resources = append(req.Resources, rr)
	resp, err := cn.Request(ctx, req, 4)
	if err != nil {
		return nil, err
	}
	r := resp.(*kmsg.DescribeConfigsResponse)
	if len(r.Resources) != 1 {
		return nil, fmt.Errorf("DescribeConfigs %s: malformed answer", topic)
	}
	res := r.Resources[0]
	if err := kerr.ErrorForCode(res.ErrorCode); err != nil {
		return nil, fmt.Errorf("DescribeConfigs %s on %s: %w", topic, cl.Seed(), err)
	}
	out := map[string]string{}
	for _, c := range res.Configs {
		if c.Source == kmsg.ConfigSourceDynamicTopicConfig && !c.IsSensitive && c.Value != nil {
			out[c.Name] = *c.Value
		}
	}
	return out, nil
}

func (p *Pusher) createTopic(ctx context.Context, name string, partitions int32, id [16]byte) error {
	cfgs, err := p.sourceConfigs(ctx, name)
	if err != nil {
		return Usage("reading source configs of %s: %v", name, err)
	}
	clusterID := p.src.ClusterID()
	if clusterID == "" {
		return Usage("the source did not report a cluster id (Metadata v2+), needed for mirror.source.cluster.id")
	}
	cfgs["mirror.mode"] = "push"
	cfgs["mirror.source.cluster.id"] = clusterID
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, -1
	keys := make([]string, 0, len(cfgs))
	for k := range cfgs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(cfgs[k])
		rt.Configs = append(rt.Configs, c)
	}
	pin := p.pinIDs && id != ([16]byte{})
	if pin {
		rt.UnknownTags.Set(mirrorTag, topicIDTag(id))
	}
	req.Topics = append(req.Topics, rt)
	cn, err := p.dst.Any(ctx)
	if err != nil {
		return Usage("destination: %v", err)
	}
	resp, err := cn.Request(ctx, req, 7)
	if err != nil {
		return Usage("creating %s on the destination: %v", name, err)
	}
	if pin && req.Version < 5 {
		return Usage("destination %s negotiated CreateTopics v%d: the topic id needs v5+", cn.Addr(), req.Version)
	}
	r := resp.(*kmsg.CreateTopicsResponse)
	if len(r.Topics) != 1 {
		return Usage("CreateTopics %s: malformed answer", name)
	}
	t := r.Topics[0]
	msg := ""
	if t.ErrorMessage != nil {
		msg = ": " + *t.ErrorMessage
	}
	err = kerr.ErrorForCode(t.ErrorCode)
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists) && pin && strings.Contains(msg, "already used by topic"):
		return Refusal("creating mirror topic %s on the destination with the source's topic id %s: %v%s", name, FormatTopicID(id), err, msg)
	case errors.Is(err, kerr.TopicAlreadyExists):
		// Created meanwhile (another pusher): checked like any existing
		// destination topic by the next metadata round.
		return nil
	case err != nil:
		return Refusal("creating mirror topic %s on the destination (configs %v): %v%s", name, keys, err, msg)
	case pin && req.Version >= 7 && t.TopicID != id:
		return Refusal("destination %s created mirror topic %s with topic id %s instead of the source's %s although it lists %q", cn.Addr(), name, FormatTopicID(t.TopicID), FormatTopicID(id), topicIDFeature)
	}
	p.log.Info("created mirror topic", "topic", name, "partitions", partitions, "configs", cfgs, "topic_id", FormatTopicID(t.TopicID))
	return nil
}

func (p *Pusher) createPartitions(ctx context.Context, name string, count int32) error {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = name, count
	req.Topics = append(req.Topics, rt)
	cn, err := p.dst.Any(ctx)
	if err != nil {
		return Usage("destination: %v", err)
	}
	resp, err := cn.Request(ctx, req, 3)
	if err != nil {
		return Usage("adding partitions to %s: %v", name, err)
	}
	r := resp.(*kmsg.CreatePartitionsResponse)
	if len(r.Topics) != 1 {
		return Usage("CreatePartitions %s: malformed answer", name)
	}
	if err := kerr.ErrorForCode(r.Topics[0].ErrorCode); err != nil {
		return Refusal("adding partitions to mirror topic %s (to %d): %v", name, count, err)
	}
	p.log.Info("added partitions to mirror topic", "topic", name, "count", count)
	return nil
}

// chunk is a run of whole source batches fetched together.
type chunk struct {
	set      []byte // contiguous batches
	first    int64  // base offset of the first batch
	end      int64  // last offset of the last batch + 1
	batches  int
	epoch    int32 // leader epoch of the last batch
	logStart int64 // the source's log start when fetched
}

// worker copies one partition: a fetch loop feeding a produce loop, so a
// partition's next fetch overlaps its current produce, and partitions run
// concurrently.
type worker struct {
	p  *Pusher
	tp tp

	start, target   atomic.Int64
	end             atomic.Int64
	batches, nbytes atomic.Int64
}

func (w *worker) snapshot() PartitionStats {
	return PartitionStats{Topic: w.tp.topic, Partition: w.tp.partition, Start: w.start.Load(), End: w.end.Load(),
		Batches: w.batches.Load(), Bytes: w.nbytes.Load(), Target: w.target.Load()}
}

func (w *worker) name() string { return fmt.Sprintf("%s/%d", w.tp.topic, w.tp.partition) }

// retry runs fn until it succeeds, fails with a non-transient error, or
// transient failures have lasted RetryFor.
func (w *worker) retry(ctx context.Context, what string, fn func() error) error {
	deadline := time.Now().Add(w.p.o.RetryFor)
	backoff := 100 * time.Millisecond
	for {
		err := fn()
		if err == nil || !transient(err) {
			return err
		}
		if time.Now().After(deadline) {
			return Usage("%s %s: giving up after %v: %v", w.name(), what, w.p.o.RetryFor, err)
		}
		w.p.log.Debug("retrying", "partition", w.name(), "what", what, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// destLeader returns the destination leader connection and its epoch.
func (w *worker) destLeader(ctx context.Context) (*Conn, int32, error) {
	return w.p.dst.Leader(ctx, w.tp.topic, w.tp.partition)
}

func (w *worker) run(ctx context.Context) error {
	var (
		dleo, dstart int64
		lastEpoch    int32 = -1
	)
	if err := w.claim(ctx); err != nil {
		return err
	}
	// Where the destination is: its log end, log start and the epoch of
	// its last batch.
	err := w.retry(ctx, "reading the destination log end", func() error {
		cn, _, err := w.destLeader(ctx)
		if err != nil {
			return err
		}
		a, err := ListOffset(ctx, cn, w.tp.topic, w.tp.partition, Latest, ReadUncommitted)
		if err != nil {
			return err
		}
		b, err := ListOffset(ctx, cn, w.tp.topic, w.tp.partition, Earliest, ReadUncommitted)
		if err != nil {
			return err
		}
		dleo, dstart = a.Offset, b.Offset
		if dleo > dstart {
			res, err := FetchPartition(ctx, cn, FetchArgs{Topic: w.tp.topic, Partition: w.tp.partition, Offset: dleo - 1,
				MaxBytes: w.p.o.FetchBytes, CurrentEpoch: -1, LastFetchedEpoch: -1})
			if err != nil {
				return err
			}
			if res.Err != nil {
				return res.Err
			}
			bs, _, _, err := Split(res.Records, dleo-1)
			if err != nil {
				return Refusal("%s: the destination holds unreadable data: %v", w.name(), err)
			}
			if len(bs) == 0 {
				return Refusal("%s: the destination's last batch (below log end %d) could not be read", w.name(), dleo)
			}
			lastEpoch = kbatch.LeaderEpoch(bs[0])
		}
		return nil
	})
	if err != nil {
		return err
	}
	w.start.Store(dleo)
	w.end.Store(dleo)

	// The source must still extend what the destination holds.
	var srcConn *Conn
	err = w.retry(ctx, "checking the source", func() error {
		var err error
		srcConn, _, err = w.p.src.Leader(ctx, w.tp.topic, w.tp.partition)
		if err != nil {
			return err
		}
		if !w.p.o.Follow {
			hw, err := ListOffset(ctx, srcConn, w.tp.topic, w.tp.partition, Latest, ReadUncommitted)
			if err != nil {
				return err
			}
			w.target.Store(hw.Offset)
		}
		if lastEpoch < 0 {
			return nil
		}
		ee, err := OffsetForLeaderEpoch(ctx, srcConn, w.tp.topic, w.tp.partition, lastEpoch)
		if err != nil {
			return err
		}
		if ee.LeaderEpoch < 0 || ee.EndOffset < 0 {
			// The source no longer knows the epoch (its log start moved
			// past it); the fetch below meets OFFSET_OUT_OF_RANGE or
			// continues from the log start.
			return nil
		}
		if ee.LeaderEpoch != lastEpoch || ee.EndOffset < dleo {
			return w.divergence(lastEpoch, dleo, ee)
		}
		return nil
	})
	if err != nil {
		return err
	}
	w.p.log.Info("partition start", "partition", w.name(), "dest_log_end", dleo, "dest_log_start", dstart, "last_epoch", lastEpoch, "target", w.target.Load(), "follow", w.p.o.Follow)
	if !w.p.o.Follow && dleo >= w.target.Load() {
		return nil
	}

	chunks := make(chan chunk, 4)
	fctx, fcancel := context.WithCancel(ctx)
	defer fcancel()
	ferr := make(chan error, 1)
	go func() {
		defer close(chunks)
		ferr <- w.fetchLoop(fctx, chunks, dleo, lastEpoch)
	}()
	perr := w.produceLoop(ctx, chunks, dleo, dstart)
	fcancel()
	for range chunks {
	}
	fe := <-ferr
	if perr != nil {
		return perr
	}
	if fe != nil && !errors.Is(fe, context.Canceled) {
		return fe
	}
	w.p.log.Info("partition done", "partition", w.name(), "log_end", w.end.Load(), "batches", w.batches.Load(), "bytes", w.nbytes.Load())
	return nil
}

func (w *worker) divergence(epoch int32, leo int64, ee EpochEnd) error {
	return &Error{Code: ExitRefused, Err: fmt.Errorf("%w: %s: the destination holds offsets up to %d with last leader epoch %d, but the source's log ends that epoch at offset %d (source answered epoch %d): the source truncated its log (unclean leader election?); the copied data beyond %d is no longer on the source — refusing to continue",
		ErrDivergence, w.name(), leo, epoch, ee.EndOffset, ee.LeaderEpoch, ee.EndOffset)}
}

// fetchLoop reads the source from next on, whole batches only, and hands
// them to the produce loop.
func (w *worker) fetchLoop(ctx context.Context, out chan<- chunk, next int64, lastEpoch int32) error {
	maxBytes := w.p.o.FetchBytes
	destEnd := next // where the destination's log will end once the chunks sent are written
	wait := int32(100)
	if w.p.o.Follow {
		wait = 500
	}
	deadline := time.Now().Add(w.p.o.RetryFor)
	backoff := 100 * time.Millisecond
	sleep := func() error {
		if time.Now().After(deadline) {
			return Usage("%s: the source has not answered usefully for %v", w.name(), w.p.o.RetryFor)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
		return nil
	}
	// Each partition fetches on its own connection: Kafka serves one
	// request per connection at a time, so long polls of idle partitions
	// would otherwise delay busy ones.
	var (
		own, cn *Conn
		epoch   int32
	)
	defer func() {
		if own != nil {
			own.Close()
		}
	}()
	refresh := func() error {
		addr, e, err := w.p.src.LeaderAddr(ctx, w.tp.topic, w.tp.partition)
		if err != nil {
			return err
		}
		if own != nil {
			own.Close()
		}
		if own, err = Dial(ctx, addr, "verbatim-mirror-push"); err != nil {
			own = nil
			return err
		}
		cn, epoch = own, e
		return nil
	}
	for {
		if !w.p.o.Follow && next >= w.target.Load() {
			return nil
		}
		if cn == nil || cn.Broken() {
			if err := refresh(); err != nil {
				if !transient(err) {
					return err
				}
				if err := sleep(); err != nil {
					return err
				}
				continue
			}
		}
		res, err := FetchPartition(ctx, cn, FetchArgs{Topic: w.tp.topic, Partition: w.tp.partition, Offset: next,
			MaxBytes: maxBytes, Isolation: ReadUncommitted, MaxWaitMs: wait, CurrentEpoch: epoch, LastFetchedEpoch: lastEpoch})
		if err == nil {
			err = res.Err
		}
		switch {
		case err == nil:
		case errors.Is(err, kerr.OffsetOutOfRange):
			jump, err := w.outOfRange(ctx, cn, next)
			if err != nil {
				if transient(err) {
					if err := sleep(); err != nil {
						return err
					}
					continue
				}
				return err
			}
			next = jump
			continue
		case errors.Is(err, context.Canceled) || ctx.Err() != nil:
			return ctx.Err()
		case transient(err):
			w.p.log.Debug("source fetch failed, refreshing the leader", "partition", w.name(), "err", err)
			cn = nil
			if err := sleep(); err != nil {
				return err
			}
			continue
		default:
			return Usage("%s: fetching from the source at %d: %v", w.name(), next, err)
		}
		deadline, backoff = time.Now().Add(w.p.o.RetryFor), 100*time.Millisecond
		if w.p.o.Follow {
			w.target.Store(res.HighWatermark) // for the lag in progress lines
		}
		if res.DivergingEpoch.LeaderEpoch >= 0 {
			return w.divergence(lastEpoch, next, res.DivergingEpoch)
		}
		bs, set, partial, err := Split(res.Records, next)
		if err != nil {
			return Refusal("%s: %w", w.name(), err)
		}
		if len(bs) == 0 {
			if partial {
				// The first batch is larger than the fetch size and the
				// source cut it: ask for more.
				if maxBytes >= 1<<30 {
					return Refusal("%s: the batch at offset %d is larger than 1 GiB", w.name(), next)
				}
				maxBytes *= 2
				w.p.log.Info("growing fetch size for a large batch", "partition", w.name(), "offset", next, "bytes", maxBytes)
				continue
			}
			if !w.p.o.Follow && res.HighWatermark <= next {
				// The source's high watermark fell below the target
				// read at start (truncation): the divergence check on
				// the next fetch or resume reports it.
				if res.HighWatermark < w.target.Load() {
					return &Error{Code: ExitRefused, Err: fmt.Errorf("%w: %s: the source high watermark went down from %d to %d while copying", ErrDivergence, w.name(), w.target.Load(), res.HighWatermark)}
				}
				return nil
			}
			continue
		}
		// A first batch starting below the fetch position is expected
		// right after the source's log start moved into the middle of it
		// (Kafka serves the whole batch); below what the destination
		// already holds, batch boundaries disagree.
		if b := kbatch.BaseOffset(bs[0]); b < destEnd {
			return &Error{Code: ExitRefused, Err: fmt.Errorf("%w: %s: the source batch %d-%d straddles the destination log end %d: source and destination batch boundaries differ, so the source log changed under the copy", ErrDivergence, w.name(), b, LastOffset(bs[0]), destEnd)}
		}
		first := bs[0]
		last := bs[len(bs)-1]
		c := chunk{set: set, first: kbatch.BaseOffset(first), end: LastOffset(last) + 1, batches: len(bs),
			epoch: kbatch.LeaderEpoch(last), logStart: res.LogStart}
		for _, b := range bs {
			if e := kbatch.LeaderEpoch(b); e < lastEpoch {
				return Refusal("%s: source batch at offset %d has leader epoch %d, below the previous batch's %d", w.name(), kbatch.BaseOffset(b), e, lastEpoch)
			} else {
				lastEpoch = e
			}
		}
		next, destEnd = c.end, c.end
		maxBytes = w.p.o.FetchBytes
		select {
		case out <- c:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// outOfRange handles OFFSET_OUT_OF_RANGE for a fetch at next: when the
// source's log start moved past next (retention, DeleteRecords), the copy
// continues from the new log start, which the produce loop forwards to the
// destination. When next is beyond the source's log end, the source lost
// data the destination holds: divergence.
func (w *worker) outOfRange(ctx context.Context, cn *Conn, next int64) (int64, error) {
	start, err := ListOffset(ctx, cn, w.tp.topic, w.tp.partition, Earliest, ReadUncommitted)
	if err != nil {
		return 0, err
	}
	end, err := ListOffset(ctx, cn, w.tp.topic, w.tp.partition, Latest, ReadUncommitted)
	if err != nil {
		return 0, err
	}
	switch {
	case next < start.Offset:
		w.p.log.Info("source log start moved past the copy position; continuing from it", "partition", w.name(), "position", next, "source_log_start", start.Offset)
		return start.Offset, nil
	case next > end.Offset:
		return 0, &Error{Code: ExitRefused, Err: fmt.Errorf("%w: %s: the destination holds offsets up to %d but the source's log ends at %d: the source truncated its log; refusing to continue", ErrDivergence, w.name(), next, end.Offset)}
	}
	return next, nil
}

// produceWindow is how many mirror produces of one partition may be in
// flight on the destination connection. Verbatim reads a connection's
// requests in order, so each states the log end the previous one leaves;
// if one fails, the later ones fail too (their expected log end is not
// reached) and are sent again one by one.
const produceWindow = 4

// flight is one sent mirror produce.
type flight struct {
	c       chunk
	expect  int64
	cn      *Conn
	req     *kmsg.ProduceRequest
	p       *Pending
	sendErr error
}

// produceLoop writes chunks to the destination in order, each stating the
// log end it expects.
func (w *worker) produceLoop(ctx context.Context, in <-chan chunk, expect, dstart int64) error {
	var cn *Conn
	var epoch int32
	warnedLogStart := false
	sendExpect := expect
	done := func(c chunk) error {
		expect = c.end
		w.end.Store(c.end)
		w.batches.Add(int64(c.batches))
		w.nbytes.Add(int64(len(c.set)))
		if c.logStart > dstart && c.logStart <= expect {
			if err := w.deleteRecords(ctx, c.logStart); errors.Is(err, kerr.ProducerFenced) {
				return w.fenced("")
			} else if err != nil {
				if !warnedLogStart {
					w.p.log.Warn("could not forward the source log start to the destination", "partition", w.name(), "log_start", c.logStart, "err", err)
					warnedLogStart = true
				}
			} else {
				dstart = c.logStart
			}
		}
		if w.p.chunkDone != nil {
			w.p.chunkDone(w.snapshot())
		}
		return nil
	}
	launch := func(c chunk) flight {
		f := flight{c: c, expect: sendExpect}
		if c.first > sendExpect {
			w.p.log.Info("gap in the source", "partition", w.name(), "from", sendExpect, "to", c.first)
		}
		sendExpect = c.end
		if cn == nil || cn.Broken() {
			if cn, epoch, f.sendErr = w.destLeader(ctx); f.sendErr != nil {
				cn = nil
				return f
			}
		}
		f.cn = cn
		f.req = w.produceRequest(c.set, f.expect, epoch)
		f.p, f.sendErr = cn.Send(ctx, f.req, 12)
		return f
	}
	var q []flight
	closed := false
	for {
		// Once cancelled, send nothing more: a write to a healthy
		// connection does not observe ctx, so chunks already fetched
		// would otherwise still reach the destination.
		if err := ctx.Err(); err != nil {
			return err
		}
		if !closed && len(q) < produceWindow {
			var c chunk
			var ok, got bool
			if len(q) == 0 {
				c, ok = <-in
				got = true
			} else {
				select {
				case c, ok = <-in:
					got = true
				default:
				}
			}
			if got && !ok {
				closed = true
			} else if got {
				q = append(q, launch(c))
				continue
			}
		}
		if len(q) == 0 {
			if closed {
				return nil
			}
			continue
		}
		f := q[0]
		q = q[1:]
		err := f.sendErr
		if err == nil {
			var resp kmsg.Response
			if resp, err = f.p.Wait(ctx); err == nil {
				err = w.produceResult(f.cn, f.req, resp, f.expect)
			}
		}
		if err == nil {
			if err := done(f.c); err != nil {
				return err
			}
			continue
		}
		if !transient(err) && !isEpochErr(err) {
			return err
		}
		// Send this chunk and every later one again, one at a time.
		cn = nil
		for _, g := range append([]flight{f}, q...) {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := w.produceSync(ctx, &cn, &epoch, g.c, g.expect); err != nil {
				return err
			}
			if err := done(g.c); err != nil {
				return err
			}
		}
		q = nil
	}
}

func isEpochErr(err error) bool {
	return errors.Is(err, kerr.FencedLeaderEpoch) || errors.Is(err, kerr.UnknownLeaderEpoch) || errors.Is(err, kerr.NotLeaderForPartition)
}

// produceSync sends one chunk and waits, retrying transient failures
// (an identical retry is acknowledged at its original offsets).
func (w *worker) produceSync(ctx context.Context, cn **Conn, epoch *int32, c chunk, expect int64) error {
	return w.retry(ctx, "mirror produce", func() error {
		if *cn == nil || (*cn).Broken() {
			var err error
			if *cn, *epoch, err = w.destLeader(ctx); err != nil {
				*cn = nil
				return err
			}
		}
		err := w.produce(ctx, *cn, c.set, expect, *epoch)
		if isEpochErr(err) {
			*cn = nil // the destination epoch moved (mirror epoch bump): refresh
			return fmt.Errorf("%w (refreshing destination metadata)", kerr.NotLeaderForPartition)
		}
		if err != nil && transient(err) {
			*cn = nil
		}
		return err
	})
}

func (w *worker) produceRequest(set []byte, expect int64, epoch int32) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 30000
	req.UnknownTags.Set(mirrorTag, w.requestTag())
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = w.tp.topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = w.tp.partition, set
	rp.UnknownTags.Set(mirrorTag, partitionTag(expect, epoch))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// produce sends one mirror produce and maps its answer.
func (w *worker) produce(ctx context.Context, cn *Conn, set []byte, expect int64, epoch int32) error {
	req := w.produceRequest(set, expect, epoch)
	resp, err := cn.Request(ctx, req, 12)
	if err != nil {
		return err
	}
	return w.produceResult(cn, req, resp, expect)
}

// produceResult maps a mirror produce answer to nil, a transient error or
// a refusal.
func (w *worker) produceResult(cn *Conn, req *kmsg.ProduceRequest, resp kmsg.Response, expect int64) error {
	if req.Version < 9 {
		return Usage("destination %s negotiated Produce v%d: mirror produce needs v9+", cn.Addr(), req.Version)
	}
	r := resp.(*kmsg.ProduceResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return fmt.Errorf("mirror produce %s: malformed answer", w.name())
	}
	pr := r.Topics[0].Partitions[0]
	perr := kerr.ErrorForCode(pr.ErrorCode)
	if perr == nil {
		return nil
	}
	msg := ""
	if pr.ErrorMessage != nil {
		msg = *pr.ErrorMessage
	}
	switch {
	case perr == kerr.ProducerFenced:
		return w.fenced(msg)
	case perr == kerr.OffsetOutOfRange:
		return Refusal("%s: the destination refused the batches at %d: %s (another pusher is writing this partition, or the destination lost acknowledged data); restart the push to resume from the destination's log end", w.name(), expect, msg)
	case isEpochErr(perr):
		return perr
	case isRetriable(perr):
		return fmt.Errorf("%w: %s", perr, msg)
	}
	return Refusal("%s: the destination refused the mirror produce at %d: %v: %s", w.name(), expect, perr, msg)
}

func (w *worker) requestTag() []byte { return writerTag(w.p.o.WriterEpoch, w.p.o.WriterID) }

func partitionTag(expect int64, epoch int32) []byte {
	return (&wireext.MirrorPartition{ExpectedLogEndOffset: expect, CurrentLeaderEpoch: epoch}).AppendTo(nil)
}

// deleteRecords forwards the source's log start: a DeleteRecords carrying
// the mirror tag (docs/mirroring.md), which Verbatim accepts on mirror
// topics only from a pusher.
func (w *worker) deleteRecords(ctx context.Context, offset int64) error {
	cn, _, err := w.destLeader(ctx)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 30000
	req.UnknownTags.Set(mirrorTag, w.requestTag())
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = w.tp.topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = w.tp.partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := cn.Request(ctx, req, 2)
	if err != nil {
		return err
	}
	if req.Version < 2 {
		return fmt.Errorf("destination negotiated DeleteRecords v%d, the mirror tag needs v2", req.Version)
	}
	r := resp.(*kmsg.DeleteRecordsResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return fmt.Errorf("DeleteRecords %s: malformed answer", w.name())
	}
	return kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode)
}

func isRetriable(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke) && ke.Retriable
}

// syncConfigs makes the destination topic's explicitly set configs equal
// the source's (mirror.* excepted), so producers behave the same after a
// failover.
func (p *Pusher) syncConfigs(ctx context.Context, topic string) error {
	sc, err := topicConfigs(ctx, p.src, topic)
	if err != nil {
		return err
	}
	dc, err := topicConfigs(ctx, p.dst, topic)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	var changed []string
	for k, v := range sc {
		if strings.HasPrefix(k, "mirror.") {
			continue
		}
		if dv, ok := dc[k]; !ok || dv != v {
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Op, c.Value = k, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(v)
			rr.Configs = append(rr.Configs, c)
			changed = append(changed, k)
		}
	}
	for k := range dc {
		if _, ok := sc[k]; !ok && !strings.HasPrefix(k, "mirror.") {
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Op = k, kmsg.IncrementalAlterConfigOpDelete
			rr.Configs = append(rr.Configs, c)
			changed = append(changed, k)
		}
	}
	if len(rr.Configs) == 0 {
		return nil
	}
	sort.Strings(changed)
	req.Resources = append(req.Resources, rr)
	cn, err := p.dst.Any(ctx)
	if err != nil {
		return err
	}
	resp, err := cn.Request(ctx, req, 1)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.IncrementalAlterConfigsResponse)
	if len(r.Resources) != 1 {
		return fmt.Errorf("IncrementalAlterConfigs %s: malformed answer", topic)
	}
	if err := kerr.ErrorForCode(r.Resources[0].ErrorCode); err != nil {
		msg := ""
		if m := r.Resources[0].ErrorMessage; m != nil {
			msg = ": " + *m
		}
		return fmt.Errorf("syncing configs %v: %w%s", changed, err, msg)
	}
	p.log.Info("synced topic configs from the source", "topic", topic, "configs", changed)
	return nil
}
