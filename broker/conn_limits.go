package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/verbatim-kafka/verbatim/budget"
	"github.com/verbatim-kafka/verbatim/hotpath"
)

// Connection limits against hostile or broken peers: connections per peer
// address (Kafka's max.connections.per.ip and its overrides, enforced at
// accept as Kafka's acceptor does: the new connection is closed at once),
// a frame budget per peer address (Config.MaxInFlightBytesPerIP) between
// the connection's own and the broker's, and the refusals that close a
// connection (too many from one address, frame too slow, not complete
// within the request timeout, too large, truncated), each logged once at
// WARN through the server's rate limiter (Server.faults), keyed by reason.

// refusal is why a connection was refused or closed by these limits.
type refusal int

const (
	refusedTooManyConns refusal = iota
	refusedTooSlow
	refusedTimeout
	refusedTooLarge
	refusedTruncated
	// refusedTLSHandshake: the TLS handshake failed, timed out, or the
	// client certificate maps to no principal (tls_conn.go).
	refusedTLSHandshake
	numRefusals
)

// refusalKeys are the rate limiter's keys, one per reason (never a peer's
// address: the number of keys stays fixed).
var refusalKeys = [numRefusals]string{
	"conn-too-many-per-ip", "conn-frame-too-slow", "conn-frame-timeout", "conn-frame-too-large", "conn-frame-truncated",
	"conn-tls-handshake",
}

// connRefusal is the reader's error for a connection closed by a limit.
type connRefusal struct {
	reason refusal
	msg    string
	// head is the beginning of the frame being read (its request header
	// when it had arrived), to name the client.
	head []byte
}

func (e *connRefusal) Error() string { return e.msg }

// peer is one remote address: its connections and their frame budget.
type peer struct {
	addr   netip.Addr
	conns  int
	budget *budget.Budget
}

// peerTable counts connections per remote address. An address's entry
// (and its budget) lives as long as it has connections. A frame that an
// acks=0 produce keeps past its connection's end is released to the budget
// it was charged to, which by then may no longer be the address's: such
// bytes (at most one connection's budget, for as long as the append takes)
// still count against the broker's budget, the bound on memory.
type peerTable struct {
	mu        sync.Mutex
	m         map[netip.Addr]*peer
	max       int
	overrides map[netip.Addr]int
	budget    int64
}

// newPeerTable resolves the overrides' host names (as Kafka does, once, at
// startup) and returns the table.
func newPeerTable(cfg Config) (*peerTable, error) {
	t := &peerTable{m: make(map[netip.Addr]*peer), max: math.MaxInt32, budget: cfg.MaxInFlightBytesPerIP}
	if cfg.MaxConnectionsPerIP != nil {
		t.max = *cfg.MaxConnectionsPerIP
	}
	entries, err := parseConnOverrides(cfg.MaxConnectionsPerIPOverrides)
	if err != nil {
		return nil, err
	}
	t.overrides = make(map[netip.Addr]int)
	for _, e := range entries {
		if a, err := netip.ParseAddr(e.host); err == nil {
			t.overrides[a.Unmap()] = e.count
			continue
		}
		ips, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip", e.host)
		if err != nil {
			return nil, fmt.Errorf("broker: max.connections.per.ip.overrides: cannot resolve %q: %w", e.host, err)
		}
		for _, a := range ips {
			t.overrides[a.Unmap()] = e.count
		}
	}
	return t, nil
}

type connOverride struct {
	host  string
	count int
}

// parseConnOverrides parses Kafka's "host:count,host:count" (the count
// after the last colon, so IPv6 addresses need no brackets; brackets are
// accepted).
func parseConnOverrides(s string) ([]connOverride, error) {
	var out []connOverride
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		i := strings.LastIndexByte(entry, ':')
		if i < 0 {
			return nil, fmt.Errorf("broker: max.connections.per.ip.overrides entry %q is not host:count", entry)
		}
		host := strings.TrimSpace(entry[:i])
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		count, err := strconv.Atoi(strings.TrimSpace(entry[i+1:]))
		if err != nil || count < 0 {
			return nil, fmt.Errorf("broker: max.connections.per.ip.overrides entry %q: the count must be a number >= 0", entry)
		}
		if _, err := netip.ParseAddr(host); err != nil && !validHostName(host) {
			return nil, fmt.Errorf("broker: max.connections.per.ip.overrides entry %q: %q is neither an IP address nor a host name", entry, host)
		}
		out = append(out, connOverride{host: host, count: count})
	}
	return out, nil
}

// validHostName accepts DNS names: labels of letters, digits and hyphens.
func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
				return false
			}
		}
	}
	return true
}

// admit counts a new connection from addr, or reports the limit it is at.
func (t *peerTable) admit(addr netip.Addr) (p *peer, limit int, ok bool) {
	limit = t.max
	if n, found := t.overrides[addr]; found {
		limit = n
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p = t.m[addr]
	if p == nil {
		if limit <= 0 {
			return nil, limit, false
		}
		p = &peer{addr: addr, budget: budget.New(t.budget)}
		t.m[addr] = p
	}
	if p.conns >= limit {
		return nil, limit, false
	}
	p.conns++
	return p, limit, true
}

// leave drops a connection of p (nil: a connection without a peer entry).
func (t *peerTable) leave(p *peer) {
	if p == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p.conns--
	if p.conns == 0 {
		delete(t.m, p.addr)
	}
}

// lookup returns addr's entry (tests read its budget).
func (t *peerTable) lookup(addr netip.Addr) *peer {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[addr]
}

// peerAddr is the IP address of a remote TCP address; ok is false for
// other kinds of connection, which get no per-address limits.
func peerAddr(a net.Addr) (netip.Addr, bool) {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	ip := ta.AddrPort().Addr().Unmap()
	return ip, ip.IsValid()
}

// admitConn applies max.connections.per.ip to a connection just accepted:
// it returns the connection's peer entry (nil for a non-IP peer), or
// closes the connection, logs the refusal and returns false.
func (s *Server) admitConn(nc net.Conn) (*peer, bool) {
	addr, ok := peerAddr(nc.RemoteAddr())
	if !ok {
		return nil, true
	}
	p, limit, ok := s.peers.admit(addr)
	if ok {
		return p, true
	}
	// Counted before the close, so whoever sees the connection closed
	// also sees it counted.
	s.refusals[refusedTooManyConns].Add(1)
	nc.Close()
	s.faults.Log(s.log, slog.LevelWarn, refusalKeys[refusedTooManyConns], "connection refused",
		"remote", nc.RemoteAddr().String(),
		"reason", fmt.Sprintf("address already has the configured maximum of %d connections (max.connections.per.ip)", limit))
	return nil, false
}

// frameRefusal names a frame that could not be read; nil when the failure
// is not one of the limits (a reset connection, say).
func (c *conn) frameRefusal(fe *hotpath.FrameError) error {
	cfg := &c.s.cfg
	r := &connRefusal{head: fe.Head}
	switch {
	case errors.Is(fe, hotpath.ErrFrameTooLarge):
		r.reason, r.msg = refusedTooLarge, fmt.Sprintf("frame size exceeds the maximum %d (max frame bytes): %v", cfg.MaxFrameBytes, fe)
	case errors.Is(fe, hotpath.ErrFrameTooSlow):
		r.reason, r.msg = refusedTooSlow, fmt.Sprintf("frame body arriving below %d bytes/s after a %s grace: %v", cfg.FrameMinRate, cfg.FrameGrace, fe)
	case errors.Is(fe, hotpath.ErrFrameTimeout):
		r.reason, r.msg = refusedTimeout, fmt.Sprintf("frame body not received within the request timeout %s: %v", cfg.RequestTimeout, fe)
	case errors.Is(fe, io.ErrUnexpectedEOF):
		r.reason, r.msg = refusedTruncated, fmt.Sprintf("truncated frame: connection ended inside a frame: %v", fe)
	default:
		return fe
	}
	return r
}

// logRefusal writes the one WARN line of a connection closed by a limit,
// naming the client as far as it is known: the header of the frame being
// read when it had arrived, else the connection's last client id. Called
// once the connection's handler goroutine has exited.
// The refusal is counted by the caller, before the connection closes.
func (c *conn) logRefusal(r *connRefusal) {
	args := []any{"reason", r.msg}
	clientID := c.clientID
	if h, err := parseRequestHeader(r.head, nil); err == nil {
		clientID = h.clientID
		args = append(args, "api", kmsg.NameForKey(h.key))
	}
	if clientID != "" {
		args = append(args, "client_id", clientID)
	}
	c.s.faults.Log(c.log, slog.LevelWarn, refusalKeys[r.reason], "connection closed", args...)
}
