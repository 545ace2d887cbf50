package broker

// The broker's configuration: Config's fields with their defaults, and
// the checks Open runs on them before it opens anything.

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/verbatim-kafka/verbatim/authz"
	"github.com/verbatim-kafka/verbatim/hotpath"
	"github.com/verbatim-kafka/verbatim/secret"
	"github.com/verbatim-kafka/verbatim/storage"
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
