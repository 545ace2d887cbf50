package broker

// A request as handlers see it, and its decoding from a frame: the
// request header (API key, version, correlation id, client id, header
// tags), the API and version check, the body's decode with kmsg (or none,
// for raw-body handlers), and the call of the handler. The connection's
// read, handle and write loops are conn.go's.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/hotpath"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// Request is one decoded request as a handler sees it.
type Request struct {
	Key           int16
	Version       int16
	CorrelationID int32
	// ClientID is the header's client id; ClientIDNull is true for a
	// null client id.
	ClientID     string
	ClientIDNull bool
	// Body is the request body after the header. For raw-body handlers
	// it aliases the connection's pooled frame buffer, which is recycled
	// once the response has been written (for a deferred reply: after
	// Await returned and the bytes were sent); a raw-body handler that
	// needs the bytes longer (an acks=0 produce whose append completes
	// later) calls KeepFrame. For kmsg-decoded requests Body (and
	// everything Msg aliases) is a copy owned by the request.
	Body []byte
	// Msg is the body decoded by kmsg, or nil for raw-body handlers.
	Msg kmsg.Request
	// ConnID and Remote identify the connection, for logs.
	ConnID uint64
	Remote net.Addr
	// Listener is the listener the connection arrived on (listener.go).
	Listener *Listener
	// Principal is the connection's authenticated principal in Kafka's
	// "Type:name" form (AnonymousPrincipal until it authenticates), and
	// Host the client's IP address, as the authorizer matches them.
	Principal string
	Host      string
	// Received is when the connection began handling the request (zero
	// for requests made inside the broker): handlers that need the time
	// take it from here rather than read the clock again.
	Received time.Time

	frame *hotpath.Frame
	kept  bool
	// sasl is the connection's SASL state on a SASL listener (nil
	// otherwise), for the SASL handlers.
	sasl *saslConn
}

// KeepFrame hands the frame buffer behind Body to the caller: the
// connection will not recycle it, and the caller must call the returned
// function exactly once when nothing references Body any more (it returns
// the buffer to its pool and the bytes to the in-flight budgets). Only the
// handler's own goroutine may call KeepFrame, before the handler returns.
func (r *Request) KeepFrame() (release func()) {
	if r.frame == nil || r.kept {
		return func() {}
	}
	r.kept = true
	f := *r.frame
	var once sync.Once
	return func() { once.Do(f.Release) }
}

// decodeFrame parses the header, checks the API and version and decodes
// the body. It returns either a pending with its reply already set (an
// ApiVersions request of an unknown version) or the entry and request to
// run; an error closes the connection.
func decodeFrame(frame []byte) (*pending, *apiEntry, *Request, error) {
	return decodeFrameCached(frame, nil)
}

// decodeFrameCached is decodeFrame reusing the connection's last client
// id string when the bytes are the same (clients send one client id per
// connection; this saves an allocation per request). cache may be nil.
func decodeFrameCached(frame []byte, cache *string) (*pending, *apiEntry, *Request, error) {
	h, err := parseRequestHeader(frame, cache)
	if err != nil {
		return nil, nil, nil, err
	}
	e := lookupAPI(h.key)
	if e == nil {
		return nil, nil, nil, closeErr("unknown or unsupported API key %d (correlation id %d)", h.key, h.correlationID)
	}
	p := &pending{key: h.key, correlationID: h.correlationID}
	req := &p.req
	if !e.serves(h.version) {
		if h.key == kmsg.ApiVersions.Int16() && h.version > e.maxVersion {
			// As Kafka: answer with a v0 body carrying
			// UNSUPPORTED_VERSION and our ranges, so the client can
			// retry with a version we speak.
			p.reply = unsupportedApiVersionsReply()
			return p, nil, nil, nil
		}
		if h.version >= e.minVersion && h.version < e.servedFrom {
			return nil, nil, nil, closeErr("%s v%d is advertised for compatibility but refused (served from v%d)", apiName(h.key), h.version, e.servedFrom)
		}
		return nil, nil, nil, closeErr("unsupported version %d of %s (supported %d-%d)", h.version, apiName(h.key), e.servedFrom, e.maxVersion)
	}
	*req = Request{
		Key: h.key, Version: h.version, CorrelationID: h.correlationID,
		ClientID: h.clientID, ClientIDNull: h.clientIDNull,
	}
	// The header's flexibility follows the request version; only then do
	// we know where the body starts.
	flexible := e.flexible(h.version)
	body, err := h.skipHeaderTags(flexible)
	if err != nil {
		return nil, nil, nil, err
	}
	p.headerV1 = flexible && h.key != kmsg.ApiVersions.Int16()
	if !e.rawBody {
		// kmsg's decoded byte fields alias its input, and handlers keep
		// some of them past the response (the group coordinator keeps
		// member metadata and assignments), while the frame buffer is
		// recycled once the response is written. So kmsg decodes a copy
		// owned by the request; only raw-body handlers (Produce) work
		// on the pooled frame itself.
		body = bytes.Clone(body)
	}
	req.Body = body
	if !e.rawBody {
		kreq := kmsg.RequestForKey(h.key)
		kreq.SetVersion(h.version)
		if err := kreq.ReadFrom(body); err != nil {
			return nil, nil, nil, closeErr("malformed %s v%d request (correlation id %d): %v", apiName(h.key), h.version, h.correlationID, err)
		}
		req.Msg = kreq
	}
	return p, e, req, nil
}

// callHandler runs h and turns a panic into an error that closes only this
// connection: one bad request must not take the broker down.
func callHandler(ctx context.Context, s *Server, e *apiEntry, req *Request) (reply Reply, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("handler panicked", "api", apiName(e.key), "version", req.Version, "panic", fmt.Sprint(r))
			reply, err = nil, fmt.Errorf("internal error in handler: %v", r)
		}
	}()
	return e.handler(ctx, s, req)
}

// requestHeader is a parsed request header v1/v2 (v0, without client id,
// was only used by ControlledShutdown v0, which is not served).
type requestHeader struct {
	key           int16
	version       int16
	correlationID int32
	clientID      string
	clientIDNull  bool
	// rest is the frame after the client id: header tagged fields (v2)
	// and the body.
	rest []byte
}

func parseRequestHeader(frame []byte, cache *string) (requestHeader, error) {
	var h requestHeader
	if len(frame) < 10 {
		return h, closeErr("request of %d bytes is shorter than a request header", len(frame))
	}
	h.key = int16(binary.BigEndian.Uint16(frame[0:]))
	h.version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.correlationID = int32(binary.BigEndian.Uint32(frame[4:]))
	n := int16(binary.BigEndian.Uint16(frame[8:]))
	rest := frame[10:]
	switch {
	case n == -1:
		h.clientIDNull = true
	case n < -1:
		return h, closeErr("bad client id length %d", n)
	default:
		if int(n) > len(rest) {
			return h, closeErr("client id length %d exceeds the frame", n)
		}
		switch {
		case cache == nil:
			h.clientID = string(rest[:n])
		case *cache == string(rest[:n]): // compared without a copy
			h.clientID = *cache
		default:
			h.clientID = string(rest[:n])
			*cache = h.clientID
		}
		rest = rest[n:]
	}
	h.rest = rest
	return h, nil
}

// skipHeaderTags returns the body: for a flexible request the header's
// tagged fields are skipped (none are defined for requests we serve; unknown
// tags are ignored as the protocol requires).
func (h requestHeader) skipHeaderTags(flexible bool) ([]byte, error) {
	if !flexible {
		return h.rest, nil
	}
	t := wireext.ReadTags(h.rest)
	if t.Err() != nil {
		return nil, closeErr("malformed header tagged fields")
	}
	if n := len(t.Rest()); t.Left() > n { // before the walk: the bytes after the count
		return nil, closeErr("header claims %d tagged fields in %d bytes", t.Left(), n)
	}
	for t.Next() {
	}
	switch t.Err() {
	case nil:
		return t.Rest(), nil
	case wireext.ErrTag:
		return nil, closeErr("malformed header tag")
	}
	return nil, closeErr("malformed header tag size")
}

// unsupportedApiVersionsReply is the v0 body Kafka sends to an ApiVersions
// request of a version it does not know.
func unsupportedApiVersionsReply() Reply {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = advertisedAPIs()
	return resp
}
