package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/verbatim-kafka/verbatim/authn"
	"github.com/verbatim-kafka/verbatim/authz"
	"github.com/verbatim-kafka/verbatim/budget"
	"github.com/verbatim-kafka/verbatim/groupcoord"
	"github.com/verbatim-kafka/verbatim/hotpath"
	"github.com/verbatim-kafka/verbatim/internal/lograte"
	"github.com/verbatim-kafka/verbatim/metrics"
	"github.com/verbatim-kafka/verbatim/secret"
	"github.com/verbatim-kafka/verbatim/storage"
	"github.com/verbatim-kafka/verbatim/txncoord"
)

// Config is everything a Server needs. Zero values take the defaults named
// on each field (see withDefaults).
type Config struct {
	// DataDir is the directory the broker locks and keeps its metadata
	// in; partition logs live beside the metadata as "<topic>-<n>".
	DataDir string
	// NodeID is this broker's id (default 1 when zero is not wanted:
	// the CLI passes its flag explicitly; 0 is a valid Kafka node id).
	NodeID int32
	// AdvertisedHost/AdvertisedPort are what Metadata and DescribeCluster
	// tell clients; empty/zero means the listener's address.
	AdvertisedHost string
	AdvertisedPort int32
	// Logger receives the broker's logs (default: slog.Default()).
	Logger *slog.Logger
	// MaxFrameBytes bounds a request frame (Kafka's
	// socket.request.max.bytes, default 100 MiB). A larger size prefix
	// closes the connection.
	MaxFrameBytes int32
	// MaxInFlightPerConn bounds requests read but not yet answered on one
	// connection (default 128). The reader stops reading when it is hit.
	MaxInFlightPerConn int
	// MaxInFlightBytes bounds the request bytes held by all connections
	// together (default 256 MiB). A hard bound: readers wait for budget
	// before they take a buffer that would exceed it. Frames are charged
	// as their bytes arrive, by the pooled buffers they hold
	// (hotpath.FrameReader: a first chunk of at most 32 KiB, then growing
	// size classes), so it must hold hotpath.FrameFootprint(MaxFrameBytes),
	// what a largest frame holds while it is read (144 MiB for 100 MiB).
	MaxInFlightBytes int64
	// MaxInFlightBytesPerConn bounds the same per connection (default:
	// hotpath.FrameFootprint(MaxFrameBytes), the least that can read a
	// largest frame).
	MaxInFlightBytesPerConn int64
	// MaxDecodeBytes bounds the working memory of looking inside batches,
	// over all requests together (default 64 MiB): decompression state
	// while normal-mode validation walks a compressed batch, and the
	// batches read (and their decompression) for timestamp lookups. Work
	// over it waits (budget.Budget), it is never refused for memory. It
	// is a budget of its own, not part of MaxInFlightBytes: a handler
	// holding its frame and waiting for decode memory must never wait for
	// the frames of others to be released.
	MaxDecodeBytes int64
	// FetchMaxBytes caps a Fetch response's record bytes whatever the
	// request's MaxBytes asks for (Kafka's fetch.max.bytes, default 55
	// MiB), so a client cannot make the broker build responses of any
	// size it likes. The first batch is still returned whole (KIP-74).
	FetchMaxBytes int32
	// RequestTimeout bounds how long one request may take from decode to
	// response (default 30s). A request that exceeds it closes its
	// connection, since later responses cannot be sent before it.
	RequestTimeout time.Duration
	// IdleTimeout closes connections with no request for this long
	// (Kafka's connections.max.idle.ms, default 10 minutes).
	IdleTimeout time.Duration
	// Flush is the storage durability mode: never, interval or always.
	Flush string
	// AutoCreateTopics lets Metadata create missing topics (Kafka's
	// auto.create.topics.enable; off by default here).
	AutoCreateTopics bool
	// DefaultPartitions is num.partitions for auto-created topics and
	// CreateTopics with -1 partitions (default 1).
	DefaultPartitions int32
	// MaxPartitions bounds the partitions of all topics together
	// (default 10000): each holds open files and memory, so creating
	// topics or partitions beyond it is refused with INVALID_PARTITIONS.
	MaxPartitions int
	// PolicyDir holds user mirror policy modules as NAME.wasm
	// (docs/policies.md); empty: built-in policies only.
	PolicyDir string
	// Limits against hostile or broken peers (conn_limits.go).
	//
	// MaxConnectionsPerIP is Kafka's max.connections.per.ip: a connection
	// from an address that already has this many is closed as soon as it
	// is accepted. Nil: unlimited (Kafka's default, 2147483647); 0 only
	// with overrides (then only the addresses listed there may connect).
	MaxConnectionsPerIP *int
	// MaxConnectionsPerIPOverrides is Kafka's
	// max.connections.per.ip.overrides, "host:count,host:count"; a host
	// is an IP address or a name resolved when the broker opens.
	MaxConnectionsPerIPOverrides string
	// MaxInFlightBytesPerIP bounds the frame bytes held by the
	// connections of one remote address together (default: a quarter of
	// MaxInFlightBytes, at least hotpath.FrameFootprint(MaxFrameBytes)).
	// It is acquired after the connection's budget and before the
	// broker's, so an address over it waits on its own budget and holds
	// none of the broker's meanwhile.
	MaxInFlightBytesPerIP int64
	// FrameMinRate and FrameGrace: once a frame's size is read its body
	// must arrive at FrameMinRate bytes/s on average after FrameGrace (at
	// every moment, received >= (elapsed - grace) x rate, time waiting
	// for budget not counted), else the connection is closed; the whole
	// body is also bounded by RequestTimeout. Defaults 1 MiB/s and 5 s;
	// a negative rate turns the rate check off.
	FrameMinRate int64
	FrameGrace   time.Duration
	// GroupInitialRebalanceDelay is Kafka's
	// group.initial.rebalance.delay.ms: how long the first JoinGroup of an
	// empty group waits for more members. Nil: Kafka's default, 3 s.
	GroupInitialRebalanceDelay *time.Duration

	// Authorization.
	//
	// Authorizer turns ACLs on (Kafka's authorizer.class.name set to its
	// StandardAuthorizer): every API checks what Kafka's checks
	// (authorize.go), the ACL APIs manage the persisted ACL set. Off:
	// nothing is checked and the ACL APIs answer SECURITY_DISABLED.
	Authorizer bool
	// SuperUsers are Kafka's super.users principals ("User:admin"),
	// allowed everything.
	SuperUsers []string
	// AllowEveryoneIfNoACLFound is Kafka's allow.everyone.if.no.acl.found:
	// a resource no ACL matches is allowed to everyone (never the mirror
	// permission).
	AllowEveryoneIfNoACLFound bool
	// testPrincipals maps a client IP to the principal its connections
	// get (tests only, until connections authenticate).
	testPrincipals map[string]string
	// aclSeed are ACLs created at Open (tests only).
	aclSeed []authz.Binding

	// The log cleaner (Kafka's settings of the same names, log_cleaner.go):
	// LogCleanerThreads goroutines clean compacted logs (0: Kafka's
	// default, 1; negative: none); LogCleanerDedupeBufferSize is the
	// offset maps' memory shared by the threads (default 128 MiB);
	// LogCleanerIOMaxBytesPerSecond bounds their I/O, shared too (0:
	// unlimited). OffsetsTopicSegmentBytes is offsets.topic.segment.bytes,
	// the segment size __consumer_offsets is created with (default 100
	// MiB).
	LogCleanerThreads             int
	LogCleanerDedupeBufferSize    int64
	LogCleanerIOMaxBytesPerSecond float64
	OffsetsTopicSegmentBytes      int32
	// LogCleanerBackoff is log.cleaner.backoff.ms: how long an idle
	// cleaner thread waits before it looks again (0: Kafka's 15 s).
	LogCleanerBackoff time.Duration

	// TLS and listeners.
	//
	// Listeners are the listeners to bind (Kafka's listeners, with
	// listener.security.protocol.map and advertised.listeners; TLS set
	// for SSL and SASL_SSL), each served with ServeListener by whoever
	// binds them (the command). Empty: the caller's one PLAINTEXT
	// listener (Serve). The broker itself only reads them in Open, to
	// check them.
	Listeners []*Listener
	// TopicDefaults are the broker's defaults of topic configs, by topic
	// config name ("retention.ms", "segment.bytes": server.properties'
	// log.retention.*, log.segment.bytes), for every topic not overriding
	// them; nil: Kafka's defaults.
	TopicDefaults map[string]string

	// SASL.
	//
	// SASL configures the SASL_PLAINTEXT and SASL_SSL listeners by
	// listener name (sasl_config.go); the "" entry applies to every
	// listener where its own entry leaves a field unset, as Kafka's plain
	// names do under their listener.name.<l>. prefixes.
	SASL map[string]*SASLListenerConfig
	// SASLMaxReceiveSize is Kafka's sasl.server.max.receive.size: the
	// largest frame a SASL connection may send before it has
	// authenticated (default 512 KiB); a larger size prefix closes the
	// connection before its body is read.
	SASLMaxReceiveSize int32
	// FailedAuthenticationDelay is Kafka's
	// connection.failed.authentication.delay.ms: how long a connection
	// whose authentication failed stays open after the failure was
	// answered (nil: 100 ms; 0: closed at once).
	FailedAuthenticationDelay *time.Duration
	// saslClock drives session expiry and the failed-authentication
	// delay; tests drive it. Nil: the wall clock.
	saslClock saslClock

	// Metrics.
	//
	// MetricsListen is the HOST:PORT the serve command binds for
	// /metrics, /healthz and /readyz (MetricsHandler); "": none. The
	// broker itself does not bind it.
	MetricsListen string
	// MetricsPartitionSeries bounds how many partitions get the
	// per-partition log series (kafka_log_log_logendoffset, ...) of a
	// scrape: 0 is the default (metrics.MaxPartitionSeries), negative
	// none.
	MetricsPartitionSeries int

	// FS is the filesystem under the data dir: metadata files and
	// partition logs (default storage.OSFS{}; the data dir lock always
	// uses the OS). Tests wrap it to inject I/O errors.
	FS storage.FS
	// faultClock is the clock of the failure-line limiter (faultlog.go);
	// tests drive it. Nil: time.Now.
	faultClock func() time.Time

	// Audit.
	//
	// AuditLog receives the audit log of admin mutations (audit.go) as
	// JSON lines; nil: the records go to Logger at INFO.
	AuditLog io.Writer

	// Cluster link secrets.
	//
	// LinkSecrets is password.encoder.*: the secret (and the old one while
	// rotating) and algorithms with which the link manager stores its
	// links' source credentials at rest (package secret, Kafka's
	// encoding; link_sync.go). No Secret: a link whose source config holds
	// a secret is refused.
	LinkSecrets secret.Config

	// Cluster turns cluster mode on (cluster_config.go); nil: a single
	// node with its metadata on local disk.
	Cluster *ClusterConfig
}

func (c Config) withDefaults() (Config, error) {
	if c.DataDir == "" {
		return c, errors.New("broker: Config.DataDir is required")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.FS == nil {
		c.FS = storage.OSFS{}
	}
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = 100 << 20
	}
	if c.MaxFrameBytes < 64 {
		return c, fmt.Errorf("broker: max frame bytes %d is too small", c.MaxFrameBytes)
	}
	if c.MaxInFlightPerConn == 0 {
		c.MaxInFlightPerConn = 128
	}
	if c.MaxInFlightPerConn < 1 {
		return c, fmt.Errorf("broker: max in-flight requests per connection must be >= 1, got %d", c.MaxInFlightPerConn)
	}
	if c.MaxInFlightBytes == 0 {
		c.MaxInFlightBytes = 256 << 20
	}
	if c.MaxFrameBytes > maxFrameLimit {
		return c, fmt.Errorf("broker: max frame bytes %d is above %d, the largest frame buffer", c.MaxFrameBytes, maxFrameLimit)
	}
	footprint := hotpath.FrameFootprint(int(c.MaxFrameBytes))
	if c.MaxInFlightBytes < footprint {
		return c, fmt.Errorf("broker: max in-flight bytes %d is below %d, what a %d-byte frame holds while it is read; a largest frame could never be read", c.MaxInFlightBytes, footprint, c.MaxFrameBytes)
	}
	if c.MaxInFlightBytesPerConn == 0 {
		c.MaxInFlightBytesPerConn = footprint
	}
	if c.MaxInFlightBytesPerConn < footprint {
		return c, fmt.Errorf("broker: max in-flight bytes per connection %d is below %d, what a %d-byte frame holds while it is read", c.MaxInFlightBytesPerConn, footprint, c.MaxFrameBytes)
	}
	if err := c.connLimitDefaults(footprint); err != nil {
		return c, err
	}
	if c.FetchMaxBytes == 0 {
		c.FetchMaxBytes = 55 << 20
	}
	if c.FetchMaxBytes < 1024 {
		return c, fmt.Errorf("broker: fetch max bytes %d is below 1024", c.FetchMaxBytes)
	}
	if c.MaxDecodeBytes == 0 {
		c.MaxDecodeBytes = 64 << 20
	}
	if c.MaxDecodeBytes < 1<<20 {
		return c, fmt.Errorf("broker: max decode bytes %d is below 1 MiB", c.MaxDecodeBytes)
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 30 * time.Second
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 10 * time.Minute
	}
	switch c.Flush {
	case "":
		c.Flush = "never"
	case "never", "interval", "always":
	default:
		return c, fmt.Errorf("broker: flush must be never, interval or always, got %q", c.Flush)
	}
	for _, l := range c.Listeners {
		if err := checkListener(l); err != nil {
			return c, err
		}
	}
	if err := checkTopicDefaults(c.TopicDefaults); err != nil {
		return c, err
	}
	if c.DefaultPartitions == 0 {
		c.DefaultPartitions = 1
	}
	if c.MaxPartitions == 0 {
		c.MaxPartitions = 10000
	}
	if c.MaxPartitions < 1 {
		return c, fmt.Errorf("broker: max partitions must be >= 1, got %d", c.MaxPartitions)
	}
	if c.DefaultPartitions < 1 {
		return c, fmt.Errorf("broker: default partitions must be >= 1, got %d", c.DefaultPartitions)
	}
	if err := c.saslDefaults(); err != nil {
		return c, err
	}
	return c, nil
}

// Server is one Verbatim broker: the data dir it holds, the cluster
// metadata and the connections it serves.
type Server struct {
	cfg  Config
	log  *slog.Logger
	lock *dirLock
	fs   storage.FS

	clusterID string
	cluster   *cluster
	pids      *producerIDs
	// cm is cluster mode's state (cluster_mode.go); nil on a single node.
	cm *clusterMode
	// fetchSessions are the incremental fetch sessions (fetch_sessions.go).
	fetchSessions fetchSessionCache
	// groups and txns are the coordinators (coordinators.go).
	groups *groupcoord.Coordinator
	txns   *txncoord.Coordinator
	// coord is the coordinators' cluster-mode state: partition loads,
	// connections to other brokers (coordinators_cluster.go).
	coord coordCluster
	// policy runs the topics' mirror policies (policies.go).
	policy *policyState
	// mirror holds the mirror topics' persisted state: writer epochs and
	// stops (mirror_state.go, mirror_stop.go).
	mirror mirrorRegistry
	// acl is the authorizer, nil when authorization is off
	// (authorize.go).
	acl *authz.Authorizer
	// scram holds the SCRAM credentials (sasl_config.go).
	scram *authn.Store

	// budget bounds request bytes in flight over all connections.
	budget *budget.Budget
	// peers counts connections and frame bytes per remote address;
	// refusals counts connections refused or closed by a limit, by reason
	// (conn_limits.go; their WARN lines go through faults).
	peers    *peerTable
	refusals [numRefusals]atomic.Uint64
	// decode bounds the working memory of looking inside batches
	// (Config.MaxDecodeBytes): validation of compressed batches and
	// timestamp lookups.
	decode *budget.Budget

	// faults rate-limits the lines of refused inputs, refused connections
	// and storage errors (faultlog.go, conn_limits.go): the server's one
	// limiter.
	faults *lograte.Limiter

	// baseCtx is cancelled when shutdown gives up waiting, which aborts
	// handlers still running (long polls, waits on storage).
	baseCtx    context.Context
	cancelBase context.CancelFunc
	cleaner    *logCleaner // nil when LogCleanerThreads < 0

	mu struct {
		sync.Mutex
		listeners map[net.Listener]struct{}
		conns     map[*conn]struct{}
		closing   bool
	}
	connWG  sync.WaitGroup
	connSeq atomic.Uint64
	addr    atomic.Pointer[net.TCPAddr]

	// TLS and listeners: the listeners served and their bound addresses
	// (tls_conn.go).
	listeners listenerSet

	// Metrics (metrics.go): the registry and the per-API handles.
	metrics    *metrics.Registry
	apiMetrics [kmsg.MaxKey + 1]*metrics.API
	// fetchFollowerMetrics counts followers' fetches (FetchFollower).
	fetchFollowerMetrics *metrics.API

	// Audit: the audit log's own logger (nil: log), audit.go.
	audit *slog.Logger

	// Cluster link: the link manager, when serve runs one (links.go).
	links linkService
	// linkSecrets encodes the links' source credentials (nil: no
	// password.encoder.secret), link_sync.go.
	linkSecrets *secret.Encoder

	// repl is cluster mode's replication state (replica_role.go).
	repl replServer
	// dyn is the single node's dynamic broker configs
	// (broker_dynconfig.go).
	dyn brokerDyn
	// throttle is the replication throttles' meters
	// (replica_throttle.go).
	throttle throttles
}

// Open takes the data dir (lock, format version, cluster id), recovers the
// topic metadata and returns a Server ready to Serve. Close releases it.
func Open(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, lock: lock, fs: dirFS(cfg.FS, cfg.DataDir), faults: lograte.New(faultInterval, faultBurst, cfg.faultClock)}
	if cfg.AuditLog != nil {
		s.audit = slog.New(slog.NewJSONHandler(cfg.AuditLog, nil))
	}
	fail := func(err error) (*Server, error) {
		lock.release()
		return nil, err
	}
	if s.peers, err = newPeerTable(cfg); err != nil {
		return fail(err)
	}
	if s.linkSecrets, err = openLinkSecrets(cfg.LinkSecrets); err != nil {
		return fail(err)
	}
	if err := checkFormat(s.fs, cfg.DataDir); err != nil {
		return fail(err)
	}
	if cfg.Cluster != nil {
		// Cluster mode: the topics come from the cluster store.
		if err := s.openClusterState(); err != nil {
			return fail(err)
		}
	} else {
		mp, err := loadOrCreateMetaProps(s.fs, cfg.NodeID)
		if err != nil {
			return fail(err)
		}
		s.clusterID = mp.clusterID
		if s.cluster, err = loadCluster(s.fs, s.log); err != nil {
			return fail(err)
		}
	}
	s.cluster.maxPartitions = cfg.MaxPartitions
	if err := s.cluster.applyTopicDefaults(cfg.TopicDefaults); err != nil {
		return fail(err)
	}
	if s.acl, err = s.openAuthorizer(); err != nil {
		return fail(err)
	}
	if s.cm != nil {
		s.pids = &producerIDs{fromStore: s.cm.allocateProducerIDs}
	} else if s.pids, err = openProducerIDs(s.fs); err != nil {
		return fail(err)
	}
	if s.cm != nil {
		s.scram, err = s.cm.openSCRAM() // the cluster store's (cluster_security.go)
	} else {
		s.scram, err = openSCRAMStore(s.fs)
	}
	if err != nil {
		return fail(err)
	}
	s.cluster.openLog = s.openPartitionLog
	s.budget = budget.New(cfg.MaxInFlightBytes)
	s.decode = budget.New(cfg.MaxDecodeBytes) // before the logs: their lookups charge it
	s.openMetrics()
	s.openAllLogs()
	s.recoverMirrorStops()
	s.baseCtx, s.cancelBase = context.WithCancel(context.Background())
	go s.retentionLoop(s.baseCtx)
	s.startReplication(s.baseCtx) // cluster mode only
	s.startCleaners(s.baseCtx)
	if s.policy, err = openPolicies(s.baseCtx, cfg, s.log, s.metrics); err != nil {
		s.cancelBase()
		s.stopCleaners()
		s.cluster.close()
		return fail(err)
	}
	if err := s.startCoordinators(); err != nil {
		s.cancelBase()
		s.policy.close()
		s.stopCleaners()
		s.cluster.close()
		return fail(err)
	}
	s.mu.listeners = make(map[net.Listener]struct{})
	s.mu.conns = make(map[*conn]struct{})
	s.log.Info("data dir opened", "data_dir", cfg.DataDir, "cluster_id", s.clusterID, "node_id", cfg.NodeID,
		"topics", s.cluster.topicCount(), "flush", cfg.Flush)
	return s, nil
}

// ClusterID is the persisted cluster id.
func (s *Server) ClusterID() string { return s.clusterID }

// Addr is the address of the last listener Serve was given, or nil.
func (s *Server) Addr() *net.TCPAddr { return s.addr.Load() }

// Serve accepts connections on ln until Shutdown as the default PLAINTEXT
// listener; it returns nil after a shutdown and the accept error otherwise.
func (s *Server) Serve(ln net.Listener) error { return s.ServeListener(ln, defaultListener()) }

// ServeListener is Serve for the listener l: its connections carry l's
// name and security protocol, and on SSL and SASL_SSL listeners start
// with a TLS handshake (l.TLS).
func (s *Server) ServeListener(ln net.Listener, l *Listener) error {
	if err := checkListener(l); err != nil {
		ln.Close()
		return err
	}
	if err := s.checkSASLListener(l); err != nil {
		ln.Close()
		return err
	}
	s.mu.Lock()
	if s.mu.closing {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.mu.listeners[ln] = struct{}{}
	s.mu.Unlock()
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		s.addr.Store(a)
	}
	s.listeners.add(l, ln.Addr())
	host, port := s.advertised(l)
	s.log.Info("listening", "listener", l.Name, "protocol", string(l.Protocol), "addr", ln.Addr().String(), "advertised", hostPort(host, port))
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.mu.closing
			s.mu.Unlock()
			if closing {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, errTooManyFiles) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", "err", err, "backoff", backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		p, ok := s.admitConn(nc)
		if !ok {
			continue
		}
		if l.TLS != nil {
			// The handshake runs on the connection's goroutine (serve).
			nc = tls.Server(nc, l.TLS)
		}
		c, err := newConn(s, nc, p, l)
		if err != nil {
			// Config validation makes this unreachable; refuse the
			// connection rather than the broker.
			s.log.Error("cannot serve connection", "err", err)
			s.peers.leave(p)
			nc.Close()
			continue
		}
		s.mu.Lock()
		if s.mu.closing {
			s.mu.Unlock()
			s.peers.leave(p)
			nc.Close()
			return nil
		}
		s.mu.conns[c] = struct{}{}
		s.connWG.Add(1)
		s.mu.Unlock()
		c.lm.Opened()
		go c.serve()
	}
}

// Shutdown stops accepting, lets every connection finish the requests it
// has already read (new ones are not read), and waits until they are
// answered or ctx is done; then it aborts what is left, closes the
// metadata and releases the data dir lock.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.mu.closing {
		s.mu.Unlock()
		return errors.New("broker: already shut down")
	}
	s.mu.closing = true
	for ln := range s.mu.listeners {
		ln.Close()
	}
	for c := range s.mu.conns {
		c.stopReading()
	}
	s.mu.Unlock()
	s.stopCoordinators()

	done := make(chan struct{})
	go func() { s.connWG.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("broker: shutdown deadline passed with requests in flight: %w", ctx.Err())
		s.cancelBase()
		s.mu.Lock()
		for c := range s.mu.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		<-done
	}
	s.cancelBase()
	// The policy host is closed without waiting: its Close waits for a
	// module compile in progress (the background compile of the default
	// mirror policies takes seconds on a fresh data dir, much longer
	// under -race), and nothing needs that compile any more. No request
	// is in flight, so no binding is in use; the compile ends on its own
	// (its cache write is a temp file renamed into place) or with the
	// process.
	go s.policy.close()
	s.stopCleaners()
	s.leaveCluster(ctx)
	s.shutdownReplication() // cluster mode: the last high-watermark checkpoint
	s.cluster.close()
	s.lock.release()
	s.log.Info("broker stopped")
	return err
}

func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	delete(s.mu.conns, c)
	s.mu.Unlock()
	c.lm.Closed()
	s.peers.leave(c.peer)
	s.connWG.Done()
}

// maxFrameLimit is the largest MaxFrameBytes: frames are read into pooled
// buffers of at most 128 MiB.
const maxFrameLimit = 128 << 20

// connLimitDefaults fills in and checks the limits against hostile peers
// (conn_limits.go); footprint is what a largest frame holds.
func (c *Config) connLimitDefaults(footprint int64) error {
	if c.MaxInFlightBytesPerIP == 0 {
		c.MaxInFlightBytesPerIP = max(c.MaxInFlightBytes/4, footprint)
	}
	if c.MaxInFlightBytesPerIP < footprint {
		return fmt.Errorf("broker: max in-flight bytes per IP %d is below %d, what a %d-byte frame holds while it is read", c.MaxInFlightBytesPerIP, footprint, c.MaxFrameBytes)
	}
	if c.FrameMinRate == 0 {
		c.FrameMinRate = 1 << 20
	}
	if c.FrameGrace == 0 {
		c.FrameGrace = 5 * time.Second
	}
	if c.FrameGrace < 0 {
		return fmt.Errorf("broker: frame grace %s is negative", c.FrameGrace)
	}
	if m := c.MaxConnectionsPerIP; m != nil && *m < 0 {
		return fmt.Errorf("broker: max.connections.per.ip %d is negative", *m)
	}
	overrides, err := parseConnOverrides(c.MaxConnectionsPerIPOverrides)
	if err != nil {
		return err
	}
	if m := c.MaxConnectionsPerIP; m != nil && *m == 0 && len(overrides) == 0 {
		return errors.New("broker: max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides is set")
	}
	return nil
}

// hostPort formats an advertised address.
func hostPort(host string, port int32) string {
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}
