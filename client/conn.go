package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// Conn is a thin Kafka protocol connection: requests are kmsg structs sent
// exactly as given (no rewriting of acks, isolation or record bytes), and
// several may be in flight at once (Kafka answers one connection's
// requests in order, so responses are matched first-in first-out).
//
// A Conn that sees any I/O or framing error is closed for good; callers
// dial a new one (Cluster does this for them).
type Conn struct {
	addr     string
	nc       net.Conn
	opts     Options
	formater *kmsg.RequestFormatter

	// versions holds the broker's max version per API key, from
	// ApiVersions at dial time; features its supported feature names.
	versions map[int16]int16
	features map[string]int16 // name -> max version

	wmu  sync.Mutex // orders writes and correlation ids
	corr int32
	// wbuf is the encoding buffer of the request being written, reused
	// under wmu: a fresh one per request (a mirror produce is megabytes)
	// cost page faults and zeroing at every request.
	wbuf    []byte
	pending chan *call
	// drained is signalled by the reader whenever it took the last
	// pending call (a re-authentication waits for the pipeline to
	// empty); reauthAt is when the SASL session must be renewed (zero:
	// never), under wmu.
	drained  chan struct{}
	reauthAt time.Time
	closed   chan struct{}
	once     sync.Once
	errMu    sync.Mutex
	err      error
}

type call struct {
	corr int32
	resp kmsg.Response
	done chan error
}

// maxKeptWriteBuffer is the largest request encoding buffer a Conn keeps
// for the next request.
const maxKeptWriteBuffer = 16 << 20

// maxResponseBytes bounds a response frame the client accepts.
const maxResponseBytes = 512 << 20

// Options configure how connections are made. The zero value dials plain
// TCP with no client id. FromProps builds them from Kafka client
// properties.
type Options struct {
	// ClientID is the client id sent in every request header.
	ClientID string
	// SoftwareName and SoftwareVersion are sent in ApiVersions v3+
	// (default "verbatim-mirror" and "1").
	SoftwareName, SoftwareVersion string
	// TLS, when set, wraps every connection in TLS (security.protocol
	// SSL or SASL_SSL); an empty ServerName is the dialled host.
	TLS *tls.Config
	// SASL, when set, authenticates every connection after ApiVersions
	// (SaslHandshake v1 and SaslAuthenticate, driven by the mechanism's
	// session, as franz-go's kgo does), and again on the same
	// connection before the session lifetime the broker answered runs
	// out (KIP-368).
	SASL sasl.Mechanism
	// Now is the clock of SASL session lifetimes (default time.Now).
	Now func() time.Time
	// DialContext, when set, opens the TCP connections instead of a
	// net.Dialer (a proxy, a test's connection counter).
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

func (o Options) software() (string, string) {
	name, vers := o.SoftwareName, o.SoftwareVersion
	if name == "" {
		name = "verbatim-mirror"
	}
	if vers == "" {
		vers = "1"
	}
	return name, vers
}

// Dial connects to addr (in TLS when o.TLS is set), negotiates API
// versions and authenticates when o.SASL is set.
func Dial(ctx context.Context, addr string, o Options) (*Conn, error) {
	dial := o.DialContext
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", addr, err)
	}
	if o.TLS != nil {
		if nc, err = handshakeTLS(ctx, nc, addr, o.TLS); err != nil {
			return nil, err
		}
	}
	c := &Conn{
		addr:     addr,
		nc:       nc,
		opts:     o,
		formater: kmsg.NewRequestFormatter(kmsg.FormatterClientID(o.ClientID)),
		pending:  make(chan *call, 256),
		drained:  make(chan struct{}, 1),
		closed:   make(chan struct{}),
	}
	go c.readLoop()
	if err := c.negotiate(ctx); err != nil {
		c.Close()
		return nil, err
	}
	if o.SASL != nil {
		c.wmu.Lock()
		err := c.authenticateLocked(ctx)
		c.wmu.Unlock()
		if err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Addr is the address the connection was dialed to.
func (c *Conn) Addr() string { return c.addr }

// HasFeature reports whether the broker listed name among its supported
// features in ApiVersions (v3+).
func (c *Conn) HasFeature(name string) bool { _, ok := c.features[name]; return ok }

// FeatureMaxVersion is the max version the broker listed for a supported
// feature, or -1 when it did not list it.
func (c *Conn) FeatureMaxVersion(name string) int16 {
	v, ok := c.features[name]
	if !ok {
		return -1
	}
	return v
}

// MaxVersion is the highest version of key both the broker and kmsg
// support, or -1 when the broker does not serve key.
func (c *Conn) MaxVersion(key int16) int16 {
	v, ok := c.versions[key]
	if !ok {
		return -1
	}
	if req := kmsg.RequestForKey(key); req != nil && req.MaxVersion() < v {
		v = req.MaxVersion()
	}
	return v
}

func (c *Conn) negotiate(ctx context.Context) error {
	for _, v := range []int16{3, 0} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName, req.ClientSoftwareVersion = c.opts.software()
		resp, err := c.roundTrip(ctx, req)
		if err != nil {
			return fmt.Errorf("ApiVersions to %s: %w", c.addr, err)
		}
		r := resp.(*kmsg.ApiVersionsResponse)
		if r.ErrorCode == kerr.UnsupportedVersion.Code && v > 0 {
			continue
		}
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return fmt.Errorf("ApiVersions to %s: %w", c.addr, err)
		}
		c.versions = make(map[int16]int16, len(r.ApiKeys))
		for _, k := range r.ApiKeys {
			c.versions[k.ApiKey] = k.MaxVersion
		}
		c.features = map[string]int16{}
		for _, f := range r.SupportedFeatures {
			c.features[f.Name] = f.MaxVersion
		}
		return nil
	}
	return fmt.Errorf("ApiVersions to %s: no supported version", c.addr)
}

// Request sends req at the highest version both sides support, capped at
// maxVersion when it is >= 0, and waits for its response.
func (c *Conn) Request(ctx context.Context, req kmsg.Request, maxVersion int16) (kmsg.Response, error) {
	if err := c.setVersion(req, maxVersion); err != nil {
		return nil, err
	}
	return c.roundTrip(ctx, req)
}

// setVersion sets req to the highest version both sides support, capped
// at maxVersion when it is >= 0.
func (c *Conn) setVersion(req kmsg.Request, maxVersion int16) error {
	v := c.MaxVersion(req.Key())
	if v < 0 {
		return fmt.Errorf("%s does not serve %s", c.addr, kmsg.NameForKey(req.Key()))
	}
	if maxVersion >= 0 && v > maxVersion {
		v = maxVersion
	}
	req.SetVersion(v)
	return nil
}

// Pending is a request written to the connection whose response has not
// been read yet.
type Pending struct {
	c  *Conn
	cl *call
}

// Send writes req (at the highest common version, capped at maxVersion
// when >= 0) without waiting for its response: requests sent one after
// another on a connection are answered in that order.
func (c *Conn) Send(ctx context.Context, req kmsg.Request, maxVersion int16) (*Pending, error) {
	if err := c.setVersion(req, maxVersion); err != nil {
		return nil, err
	}
	cl, err := c.send(ctx, req)
	if err != nil {
		return nil, err
	}
	return &Pending{c: c, cl: cl}, nil
}

// Wait waits for the response of a sent request.
func (p *Pending) Wait(ctx context.Context) (kmsg.Response, error) { return p.c.wait(ctx, p.cl) }

func (c *Conn) roundTrip(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	cl, err := c.send(ctx, req)
	if err != nil {
		return nil, err
	}
	return c.wait(ctx, cl)
}

func (c *Conn) send(ctx context.Context, req kmsg.Request) (*call, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !c.reauthAt.IsZero() && !c.opts.now().Before(c.reauthAt) {
		if err := c.reauthenticateLocked(ctx); err != nil {
			c.fail(err)
			return nil, err
		}
	}
	return c.sendLocked(ctx, req)
}

// sendLocked writes req. REQUIRES: c.wmu.
func (c *Conn) sendLocked(ctx context.Context, req kmsg.Request) (*call, error) {
	cl := &call{resp: req.ResponseKind(), done: make(chan error, 1)}
	cl.resp.SetVersion(req.GetVersion())
	select {
	case <-c.closed:
		return nil, c.closeErr()
	default:
	}
	c.corr++
	cl.corr = c.corr
	c.wbuf = c.formater.AppendRequest(c.wbuf[:0], req, cl.corr)
	buf := c.wbuf
	if dl, ok := ctx.Deadline(); ok {
		_ = c.nc.SetWriteDeadline(dl)
	} else {
		_ = c.nc.SetWriteDeadline(time.Time{})
	}
	select {
	case c.pending <- cl:
	case <-c.closed:
		return nil, c.closeErr()
	}
	_, err := c.nc.Write(buf)
	if cap(c.wbuf) > maxKeptWriteBuffer {
		c.wbuf = nil // one huge request does not pin its buffer
	}
	if err != nil {
		c.fail(fmt.Errorf("writing to %s: %w", c.addr, err))
	}
	return cl, nil
}

func (c *Conn) wait(ctx context.Context, cl *call) (kmsg.Response, error) {
	select {
	case err := <-cl.done:
		if err != nil {
			return nil, err
		}
		return cl.resp, nil
	case <-c.closed:
		select {
		case err := <-cl.done:
			if err != nil {
				return nil, err
			}
			return cl.resp, nil
		default:
			return nil, c.closeErr()
		}
	case <-ctx.Done():
		// The response can no longer be paired reliably with a waiter
		// that gave up; the connection is dropped.
		c.fail(fmt.Errorf("request to %s abandoned: %w", c.addr, ctx.Err()))
		return nil, ctx.Err()
	}
}

func (c *Conn) readLoop() {
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var size [4]byte
	for {
		if _, err := io.ReadFull(br, size[:]); err != nil {
			c.fail(fmt.Errorf("reading from %s: %w", c.addr, err))
			return
		}
		n := int32(binary.BigEndian.Uint32(size[:]))
		if n < 4 || n > maxResponseBytes {
			c.fail(fmt.Errorf("response from %s has invalid size %d", c.addr, n))
			return
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(br, body); err != nil {
			c.fail(fmt.Errorf("reading from %s: %w", c.addr, err))
			return
		}
		var cl *call
		select {
		case cl = <-c.pending:
		default:
			c.fail(fmt.Errorf("unsolicited response from %s", c.addr))
			return
		}
		if len(c.pending) == 0 {
			select {
			case c.drained <- struct{}{}:
			default:
			}
		}
		corr := int32(binary.BigEndian.Uint32(body))
		if corr != cl.corr {
			err := fmt.Errorf("response from %s has correlation id %d, want %d", c.addr, corr, cl.corr)
			cl.done <- err
			c.fail(err)
			return
		}
		body = body[4:]
		if cl.resp.IsFlexible() && cl.resp.Key() != kmsg.ApiVersions.Int16() {
			var err error
			if body, err = skipTags(body); err != nil {
				cl.done <- err
				c.fail(err)
				return
			}
		}
		if err := cl.resp.ReadFrom(body); err != nil {
			err = fmt.Errorf("decoding %s v%d response from %s: %w", kmsg.NameForKey(cl.resp.Key()), cl.resp.GetVersion(), c.addr, err)
			cl.done <- err
			c.fail(err)
			return
		}
		cl.done <- nil
	}
}

// skipTags skips a response header's tagged fields.
func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, errors.New("malformed response header tags")
	}
	b = b[k:]
	for ; n > 0; n-- {
		if _, k = binary.Uvarint(b); k <= 0 {
			return nil, errors.New("malformed response header tags")
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return nil, errors.New("malformed response header tags")
		}
		b = b[k+int(size):]
	}
	return b, nil
}

func (c *Conn) fail(err error) {
	c.once.Do(func() {
		c.errMu.Lock()
		c.err = err
		c.errMu.Unlock()
		close(c.closed)
		c.nc.Close()
		for {
			select {
			case cl := <-c.pending:
				cl.done <- err
			default:
				return
			}
		}
	})
}

func (c *Conn) closeErr() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	if c.err == nil {
		return errors.New("connection closed")
	}
	return c.err
}

// Broken reports whether the connection has failed or been closed.
func (c *Conn) Broken() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// Close closes the connection; pending requests fail.
func (c *Conn) Close() { c.fail(fmt.Errorf("connection to %s closed", c.addr)) }
