package link

// The Manager: the broker's LinkService. It loads the persisted links at
// Open, runs one runner per link, and answers the link admin requests
// (after the broker's handlers authorized them).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/mirror"
	"github.com/verbatim-kafka/verbatim/props"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// Config configures a Manager.
type Config struct {
	Host  Host
	Log   *slog.Logger
	Clock mirror.Clock
	// SyncInterval is the default period of a link's topic discovery
	// (and continuous sync) when the link sets none (default 30 s).
	SyncInterval time.Duration
	// RetryFor bounds how long a copy retries an unreachable source
	// before the partition goes FAILED (default 2 min).
	RetryFor time.Duration
	// FetchBytes is a copy's fetch size (default 4 MiB).
	FetchBytes int32
	// newSource opens a link's source cluster (nil: package client's,
	// clientSource); the simulation's fake source cluster sets it.
	newSource func(seed string, o client.Options) (sourceCluster, error)
}

// Manager runs the broker's cluster links; it implements
// broker.LinkService.
type Manager struct {
	host         Host
	log          *slog.Logger
	clock        mirror.Clock
	store        store
	syncInterval time.Duration
	retryFor     time.Duration
	fetchBytes   int32
	newSource    func(seed string, o client.Options) (sourceCluster, error)

	// Hooks the other parts of the link fill in (nil: not available).
	//
	// syncHook runs after each discovery round of a link (continuous
	// sync: configs, deletion and re-creation, group offsets).
	syncHook func(ctx context.Context, r *runner)
	// repair turns existing ordinary topics into mirrors of r by
	// truncating them to the point they share with the source
	// (StartMirrorTopics with TruncateToCommon).
	repair func(ctx context.Context, r *runner, req wireext.StartMirrorTopicsRequest) ([]wireext.MirrorTopicResult, error)
	// truncate is TruncateMirrorTopics (`mirror truncate
	// --to-divergence`).
	truncate func(ctx context.Context, req wireext.TruncateMirrorTopicsRequest) ([]wireext.MirrorTopicResult, error)

	// cluster is the broker's cluster side (nil: a single node);
	// stopFollow ends follow (cluster.go), followDone closes when it has.
	cluster    clusterHost
	stopFollow context.CancelFunc
	followDone chan struct{}

	mu     sync.Mutex
	links  map[string]*runner
	closed bool
}

var _ broker.LinkService = (*Manager)(nil)

// Open loads the links persisted in the broker's link meta files and
// starts them.
func Open(cfg Config) (*Manager, error) {
	cluster := clusterOf(cfg.Host)
	m := &Manager{host: cfg.Host, log: cfg.Log, clock: cfg.Clock, store: store{cfg.Host, cluster}, cluster: cluster,
		syncInterval: cfg.SyncInterval, retryFor: cfg.RetryFor, fetchBytes: cfg.FetchBytes, newSource: cfg.newSource, links: map[string]*runner{}}
	if m.newSource == nil {
		m.newSource = func(seed string, o client.Options) (sourceCluster, error) {
			cl, err := client.NewCluster(seed, o)
			if err != nil {
				return nil, err
			}
			return newClientSource(cl), nil
		}
	}
	if m.log == nil {
		m.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if m.clock == nil {
		m.clock = mirror.SystemClock{}
	}
	m.installRepair() // link-repair: mirror truncate, failback
	if m.syncInterval <= 0 {
		m.syncInterval = 30 * time.Second
	}
	if m.retryFor <= 0 {
		m.retryFor = 2 * time.Minute
	}
	if m.fetchBytes <= 0 {
		m.fetchBytes = 4 << 20
	}
	m.syncHook = syncRunner
	names, err := m.store.names()
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		lm, err := m.store.load(n)
		if errors.Is(err, fs.ErrNotExist) {
			m.log.Warn("link named in the index has no file; ignored", "link", n)
			continue
		}
		if err != nil {
			return nil, err
		}
		if changed, err := reencodeStored(m.host, lm); err != nil {
			m.log.Error("re-encoding the link's source credentials with password.encoder.secret", "link", n, "err", err)
		} else if changed {
			err := m.store.save(lm)
			if err != nil && m.cluster != nil {
				// Not registered yet, or another broker re-encoded it
				// first: the next start tries again.
				m.log.Warn("re-encoding the link's source credentials not persisted", "link", n, "err", err)
			} else if err != nil {
				return nil, fmt.Errorf("link %s: persisting its re-encoded credentials: %w", n, err)
			}
			m.log.Info("re-encoded the link's source credentials with the new password.encoder.secret", "link", n)
		}
		r, err := newRunner(m, lm)
		if err != nil {
			return nil, fmt.Errorf("link %s: %w", n, err)
		}
		m.links[n] = r
	}
	for _, r := range m.links {
		r.start()
	}
	if m.cluster != nil {
		ctx, cancel := context.WithCancel(context.Background())
		m.stopFollow, m.followDone = cancel, make(chan struct{})
		go m.follow(ctx)
	}
	m.log.Info("cluster links started", "links", len(m.links), "clustered", m.cluster != nil)
	return m, nil
}

// Close stops every link (their copies end; nothing is persisted that a
// restart would not find).
func (m *Manager) Close() error {
	if m.stopFollow != nil {
		m.stopFollow()
		<-m.followDone
	}
	m.mu.Lock()
	m.closed = true
	rs := make([]*runner, 0, len(m.links))
	for _, r := range m.links {
		rs = append(rs, r)
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Add(1)
		go func() { defer wg.Done(); r.stop() }()
	}
	wg.Wait()
	return nil
}

func (m *Manager) link(name string) *runner {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.links[name]
}

// Links returns the running links by name (for the other parts'
// hooks).
func (m *Manager) Links() []*runner {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Collect(maps.Values(m.links))
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// validateLinkName applies Kafka's topic name rules to a link name.
func validateLinkName(name string) error {
	switch {
	case name == "":
		return kafkaErr(kerr.InvalidRequest, "the link name is empty")
	case name == "." || name == "..":
		return kafkaErr(kerr.InvalidRequest, "link name cannot be %q", name)
	case len(name) > 249:
		return kafkaErr(kerr.InvalidRequest, "link name is longer than 249 characters")
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return kafkaErr(kerr.InvalidRequest, "link name %q is illegal: it may contain only ASCII letters, digits, '.', '_' and '-'", name)
		}
	}
	return nil
}

// CreateLink creates and starts a link, persisted before it answers.
func (m *Manager) CreateLink(ctx context.Context, principal string, cfg wireext.LinkConfig, validateOnly bool) error {
	if err := validateLinkName(cfg.Name); err != nil {
		return err
	}
	if len(props.List(cfg.SourceBootstrap)) == 0 {
		return kafkaErr(kerr.InvalidRequest, "link %s: the source bootstrap address is missing", cfg.Name)
	}
	for _, a := range props.List(cfg.SourceBootstrap) {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return kafkaErr(kerr.InvalidConfig, "link %s: source bootstrap address %q: %v", cfg.Name, a, err)
		}
	}
	for what, re := range map[string]string{"topics": cfg.Topics, "exclude": cfg.Exclude, "groups": cfg.Groups} {
		if _, err := compilePattern(what, re); err != nil {
			return kafkaErr(kerr.InvalidConfig, "link %s: %v", cfg.Name, err)
		}
	}
	if cfg.SyncIntervalMs < 0 || cfg.ThrottleBytesPerSec < 0 {
		return kafkaErr(kerr.InvalidConfig, "link %s: negative sync interval or throttle", cfg.Name)
	}
	o, err := sourceOptions(cfg)
	if err != nil {
		return kafkaErr(kerr.InvalidConfig, "link %s: source config: %v", cfg.Name, err)
	}
	sealed, err := sealConfig(m.host, cfg)
	if err != nil {
		return err
	}
	if m.link(cfg.Name) != nil {
		return kafkaErr(kerr.InvalidRequest, "link %s already exists", cfg.Name)
	}
	if validateOnly {
		return nil
	}
	if err := m.reachable(ctx, cfg.SourceBootstrap, o); err != nil {
		return kafkaErr(kerr.InvalidRequest, "link %s: the source %s cannot be reached: %v", cfg.Name, cfg.SourceBootstrap, err)
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return err
	}
	lm := &linkMeta{Config: sealed, ID: hex.EncodeToString(id[:]), CreatedBy: principal}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return kafkaErr(kerr.InvalidRequest, "the link manager is shutting down")
	}
	if m.links[cfg.Name] != nil {
		return kafkaErr(kerr.InvalidRequest, "link %s already exists", cfg.Name)
	}
	r, err := newRunner(m, lm)
	if err != nil {
		return kafkaErr(kerr.InvalidConfig, "link %s: %v", cfg.Name, err)
	}
	// On a cluster the file is written only if absent: a link of that
	// name created through another broker meanwhile conflicts.
	if err := m.store.save(lm); errors.Is(err, errConflict) {
		r.discard()
		return kafkaErr(kerr.InvalidRequest, "link %s already exists", cfg.Name)
	} else if err != nil {
		r.discard()
		return kafkaErr(kerr.KafkaStorageError, "persisting link %s: %v", cfg.Name, err)
	}
	err = m.store.editNames(func(names []string) ([]string, error) {
		if m.cluster == nil {
			names = m.namesLocked()
		}
		for _, n := range names {
			if n == cfg.Name {
				return names, nil
			}
		}
		return append(names, cfg.Name), nil
	})
	if err != nil {
		r.discard()
		_ = m.store.remove(cfg.Name)
		return kafkaErr(kerr.KafkaStorageError, "persisting link %s: %v", cfg.Name, err)
	}
	m.links[cfg.Name] = r
	r.start()
	m.log.Info("created cluster link", "link", cfg.Name, "source", cfg.SourceBootstrap, "topics", cfg.Topics, "exclude", cfg.Exclude, "principal", principal)
	return nil
}

func (m *Manager) namesLocked() []string {
	out := make([]string, 0, len(m.links))
	for n := range m.links {
		out = append(out, n)
	}
	return out
}

// reachable checks that the source answers Metadata through one of the
// bootstrap list's addresses.
func (m *Manager) reachable(ctx context.Context, bootstrap string, o client.Options) error {
	err := fmt.Errorf("no address in %q", bootstrap)
	for _, a := range props.List(bootstrap) {
		var cl sourceCluster
		if cl, err = m.newSource(a, o); err != nil {
			return err
		}
		actx, cancel := context.WithTimeout(ctx, 15*time.Second)
		_, err = cl.Metadata(actx, []string{})
		cancel()
		cl.Close()
		if err == nil {
			return nil
		}
	}
	return err
}

// DeleteLink deletes a link: refused while it has mirror partitions that
// are not STOPPED, unless force, which leaves them FAILED ("link
// deleted") until they are stopped.
func (m *Manager) DeleteLink(ctx context.Context, principal, name string, force bool) error {
	r := m.link(name)
	if r == nil {
		return kafkaErr(kerr.ResourceNotFound, "link %s does not exist", name)
	}
	if !force {
		var active []string
		for _, st := range m.linkStatuses(r, nil) {
			if st.State != wireext.StateStopped {
				active = append(active, fmt.Sprintf("%s/%d (%s)", st.Topic, st.Partition, st.State))
			}
		}
		if len(active) > 0 {
			return kafkaErr(kerr.InvalidRequest, "link %s still mirrors partitions that are not STOPPED: %s; stop them (mirror stop) or delete with force", name, strings.Join(active, ", "))
		}
	}
	m.mu.Lock()
	if m.links[name] != r {
		m.mu.Unlock()
		return kafkaErr(kerr.ResourceNotFound, "link %s does not exist", name)
	}
	delete(m.links, name)
	err := m.store.editNames(func(names []string) ([]string, error) {
		if m.cluster == nil {
			return m.namesLocked(), nil
		}
		out := names[:0:0]
		for _, n := range names {
			if n != name {
				out = append(out, n)
			}
		}
		return out, nil
	})
	m.mu.Unlock()
	if err != nil {
		m.mu.Lock()
		m.links[name] = r
		m.mu.Unlock()
		return kafkaErr(kerr.KafkaStorageError, "persisting the deletion of link %s: %v", name, err)
	}
	r.stop()
	if err := m.store.remove(name); err != nil {
		m.log.Warn("removing a deleted link's file", "link", name, "err", err)
	}
	m.log.Info("deleted cluster link", "link", name, "force", force, "principal", principal)
	return nil
}

// TruncateMirrorTopics is link-repair's (`mirror truncate
// --to-divergence`).
func (m *Manager) TruncateMirrorTopics(ctx context.Context, principal string, req wireext.TruncateMirrorTopicsRequest) ([]wireext.MirrorTopicResult, error) {
	if m.truncate == nil {
		return nil, kafkaErr(kerr.InvalidRequest, "mirror truncate is not available on this broker")
	}
	return m.truncate(ctx, req)
}
