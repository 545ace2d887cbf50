package mirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/client"
)

// Options configure a push.
type Options struct {
	Source string // HOST:PORT of any source broker
	Dest   string // HOST:PORT of the Verbatim destination
	// SourceClient and DestClient secure and authenticate the
	// connections to each side (--source-config, --dest-config: TLS,
	// SASL); a zero ClientID is "verbatim-mirror-push".
	SourceClient, DestClient client.Options
	Topics                   []string
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
	// WriterID identifies this pusher to the destination, which binds
	// the writer epochs it assigns at registration to it
	// (docs/protocol.md "Writer epoch"). The zero value picks the start
	// time in Unix nanoseconds (8 bytes big-endian) followed by 8 random
	// bytes (writer.go).
	WriterID [16]byte
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
	// NoStartEpoch leaves the source's leader epoch at its log start out
	// of the log-start forwards (CopyConfig.NoStartEpoch): for tests that
	// need the destination a pusher before feature version 3 left.
	NoStartEpoch bool
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
	if o.WriterID == ([16]byte{}) {
		o.WriterID = newWriterID(time.Now())
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
		o.Logger = discardLogger
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
	o     Options
	src   *client.Cluster
	dst   *client.Cluster
	log   *slog.Logger
	clock Clock

	mu      sync.Mutex
	workers map[tp]*PartitionCopy
	topicID map[string][16]byte
	// epochs holds the writer epochs the destination assigned to the
	// partitions registered together at the start (register).
	epochs map[tp]int32

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
	// once its writer registration (claim) was answered, with its error;
	// registered once the start's registration of all partitions was.
	claimed    func(topic string, partition int32, err error)
	registered func(epochs map[tp]int32, err error)
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
	for _, co := range []*client.Options{&o.SourceClient, &o.DestClient} {
		if co.ClientID == "" {
			co.ClientID = "verbatim-mirror-push"
		}
	}
	src, err := client.NewCluster(o.Source, o.SourceClient)
	if err != nil {
		return nil, Usage("--source: %v", err)
	}
	dst, err := client.NewCluster(o.Dest, o.DestClient)
	if err != nil {
		return nil, Usage("--dest: %v", err)
	}
	return &Pusher{o: o, src: src, dst: dst, log: o.Logger, clock: SystemClock{}, workers: map[tp]*PartitionCopy{}, topicID: map[string][16]byte{}, epochs: map[tp]int32{}, idWarned: map[string]bool{}}, nil
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

// newCopy prepares the copy of one partition.
func (p *Pusher) newCopy(t tp) *PartitionCopy {
	w := Writer{Epoch: RegisterEpoch, ID: p.o.WriterID}
	p.mu.Lock()
	if e, ok := p.epochs[t]; ok {
		w.Epoch = e
	}
	p.mu.Unlock()
	cfg := CopyConfig{Topic: t.topic, Partition: t.partition,
		Source: ClusterSource{Cluster: p.src, Topic: t.topic, Partition: t.partition},
		Dest:   ClusterDest{Cluster: p.dst, Topic: t.topic, Partition: t.partition},
		Clock:  p.clock, Log: p.log, FetchBytes: p.o.FetchBytes, RetryFor: p.o.RetryFor, Follow: p.o.Follow, Writer: w,
		ChunkDone: p.chunkDone, NoStartEpoch: p.o.NoStartEpoch}
	if p.claimed != nil {
		cfg.Claimed = func(err error) { p.claimed(t.topic, t.partition, err) }
	}
	return NewPartitionCopy(cfg)
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
	if err := p.checkDestFeatures(dc); err != nil {
		return nil, err
	}
	if _, err := p.src.Any(ctx); err != nil {
		return nil, Usage("source: %v", err)
	}
	parts, err := p.prepareTopics(ctx)
	if err != nil {
		return nil, err
	}
	if err := p.register(ctx, parts); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	start := func(t tp) {
		w := p.newCopy(t)
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
			if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
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
		out = append(out, w.Snapshot())
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
