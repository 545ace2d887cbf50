package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
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
	"github.com/verbatim-kafka/verbatim/internal/lograte"
	"github.com/verbatim-kafka/verbatim/metrics"
	"github.com/verbatim-kafka/verbatim/secret"
	"github.com/verbatim-kafka/verbatim/storage"
	"github.com/verbatim-kafka/verbatim/txncoord"
)

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

// hostPort formats an advertised address.
func hostPort(host string, port int32) string {
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}
