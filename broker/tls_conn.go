package broker

// TLS listeners and the addresses each listener advertises.
//
// A connection on an SSL or SASL_SSL listener is a *tls.Conn; its
// handshake runs first on the connection's own goroutine, bounded by the
// request timeout (a client that never finishes it is closed then), and a
// failed handshake closes only that connection. A verified client
// certificate gives the connection its principal (Listener.Principal).
// Everything that names this broker to a client (Metadata,
// FindCoordinator, DescribeCluster) answers the advertised address of the
// listener the request came in on, as Kafka does.

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// handshake runs the TLS handshake of a new connection and sets its
// principal. It reports whether the connection may be served; when not,
// the connection is closed and the reason logged (rate-limited, as the
// other refusals).
func (c *conn) handshake(tc *tls.Conn) bool {
	// Deadlines rather than a context: an expired deadline leaves the
	// connection open until the refusal is counted, and stopReading
	// (shutdown) ends the handshake by moving the read deadline.
	deadline := time.Now().Add(c.s.cfg.RequestTimeout)
	_ = c.nc.SetWriteDeadline(deadline)
	var err error
	if c.armAt(deadline) {
		err = tc.Handshake()
	} else {
		err = net.ErrClosed
	}
	_ = c.nc.SetWriteDeadline(time.Time{})
	if err == nil && c.listener.Principal != nil {
		p, ok, perr := c.listener.Principal(tc.ConnectionState())
		switch {
		case perr != nil:
			err = fmt.Errorf("SSL authentication failed: %w", perr)
		case ok:
			c.principal = p
		}
	}
	if err == nil {
		return true
	}
	// Counted and logged before the close, so whoever sees the close
	// sees the count.
	c.cancelRead()
	switch {
	case c.isStopped():
	case errors.Is(err, io.EOF):
		// Closed before a byte of the handshake: a port probe (health
		// checks, a load balancer's TCP check), not worth a WARN line.
		c.log.Debug("connection closed before its TLS handshake")
	default:
		msg := "TLS handshake failed: " + err.Error()
		if isTimeout(err) {
			msg = fmt.Sprintf("TLS handshake not finished within the request timeout (%s)", c.s.cfg.RequestTimeout)
		}
		c.s.refusals[refusedTLSHandshake].Add(1)
		c.logRefusal(&connRefusal{reason: refusedTLSHandshake, msg: msg})
	}
	c.nc.Close()
	return false
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// listenerSet is the listeners being served and their bound addresses.
type listenerSet struct {
	mu    sync.Mutex
	order []*Listener
	bound map[*Listener]*net.TCPAddr
}

func (ls *listenerSet) add(l *Listener, a net.Addr) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.bound == nil {
		ls.bound = map[*Listener]*net.TCPAddr{}
	}
	if _, ok := ls.bound[l]; !ok {
		ls.order = append(ls.order, l)
	}
	ta, _ := a.(*net.TCPAddr)
	ls.bound[l] = ta
}

func (ls *listenerSet) boundAddr(l *Listener) (*net.TCPAddr, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	a, ok := ls.bound[l]
	return a, ok
}

func (ls *listenerSet) all() []*Listener {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return append([]*Listener(nil), ls.order...)
}

// checkListener refuses a listener that cannot be served.
func checkListener(l *Listener) error {
	if l == nil {
		return errors.New("broker: nil listener")
	}
	if !l.Protocol.Valid() {
		return fmt.Errorf("broker: listener %s: unknown security protocol %q", l.Name, l.Protocol)
	}
	if l.Protocol.UsesTLS() != (l.TLS != nil) {
		if l.TLS == nil {
			return fmt.Errorf("broker: listener %s (%s) has no TLS configuration", l.Name, l.Protocol)
		}
		return fmt.Errorf("broker: listener %s (%s) has a TLS configuration but its protocol does not use TLS", l.Name, l.Protocol)
	}
	return nil
}

// advertised returns the host and port a client of listener l is told to
// connect to: l's Advertised when set, else its bound address with
// Config.AdvertisedHost/AdvertisedPort overriding (an unspecified bound
// IP is advertised as localhost). A nil l is the listener Serve was given
// last.
func (s *Server) advertised(l *Listener) (string, int32) {
	if l != nil && l.Advertised != "" {
		if h, p, err := net.SplitHostPort(l.Advertised); err == nil {
			// An empty host or port 0: the bound one.
			bh, bp := s.boundAdvertised(l, "", 0)
			if h == "" {
				h = bh
			}
			if n, err := strconv.ParseUint(p, 10, 16); err == nil && n > 0 {
				return h, int32(n)
			}
			return h, bp
		}
	}
	return s.boundAdvertised(l, s.cfg.AdvertisedHost, s.cfg.AdvertisedPort)
}

func (s *Server) boundAdvertised(l *Listener, host string, port int32) (string, int32) {
	a := s.addr.Load()
	if l != nil {
		if b, ok := s.listeners.boundAddr(l); ok {
			a = b
		}
	}
	if a != nil {
		if host == "" {
			host = a.IP.String()
			if a.IP.IsUnspecified() {
				host = "localhost"
			}
		}
		if port == 0 {
			port = int32(a.Port)
		}
	}
	return host, port
}

// advertisedListeners is Kafka's advertised.listeners of the listeners
// being served, NAME://host:port separated by commas.
func (s *Server) advertisedListeners() string {
	ls := s.listeners.all()
	if len(ls) == 0 {
		h, p := s.advertised(nil)
		return string(ProtocolPlaintext) + "://" + hostPort(h, p)
	}
	parts := make([]string, 0, len(ls))
	for _, l := range ls {
		h, p := s.advertised(l)
		parts = append(parts, l.Name+"://"+hostPort(h, p))
	}
	return strings.Join(parts, ",")
}

// boundListeners is Kafka's listeners of the listeners being served:
// NAME://bound address.
func (s *Server) boundListeners() string {
	var parts []string
	for _, l := range s.listeners.all() {
		if a, ok := s.listeners.boundAddr(l); ok && a != nil {
			parts = append(parts, l.Name+"://"+a.String())
		}
	}
	return strings.Join(parts, ",")
}

// protocolMap is Kafka's listener.security.protocol.map of the listeners
// being served.
func (s *Server) protocolMap() string {
	var parts []string
	for _, l := range s.listeners.all() {
		parts = append(parts, l.Name+":"+string(l.Protocol))
	}
	return strings.Join(parts, ",")
}
