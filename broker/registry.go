package broker

import (
	"context"
	"net"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Reply is what a handler answers with. Every kmsg.Response satisfies it;
// data-plane handlers may return their own types (see VectoredReply).
type Reply interface {
	// AppendTo appends the response body (no size, no header).
	AppendTo(dst []byte) []byte
	// IsFlexible reports whether the response uses header v1 (tagged
	// fields after the correlation id).
	IsFlexible() bool
}

// VectoredReply is a Reply whose body is handed to the connection writer as
// several byte slices (for example stored batches read from storage) and
// written with one vectored write, without copying them into one buffer.
// The writer calls Release once the bytes have been written or dropped.
type VectoredReply interface {
	Reply
	// BodyBuffers returns the body as slices; their total length is the
	// body size. AppendTo is not called when a reply implements this.
	BodyBuffers() net.Buffers
	Release()
}

// DeferredReply lets a handler submit work in request order (so appends
// from one connection keep their order) and answer later: the reader goes
// on decoding the next request while the writer waits for this one. Await
// must return once ctx is done.
type DeferredReply interface {
	Await(ctx context.Context) (Reply, error)
}

// Releaser is a reply holding pooled state. The connection writer calls
// Release once the reply's bytes have been written or dropped: for a
// deferred reply (which is then released as well as the Reply its Await
// returned, so Await must not return the deferred value itself), after
// Await's answer; Release must cope with an Await that was never called
// or cut short.
type Releaser interface {
	Release()
}

// frameHolder is a deferred reply whose work may still read the request
// frame (appends still queued) when its Await was cut short or never ran
// (a broken connection): the writer then hands it the frame's release
// instead of recycling the frame under that work.
type frameHolder interface {
	// Settled reports whether nothing of the request's work references
	// the frame any more.
	Settled() bool
	// ReleaseWhenSettled calls release once nothing does.
	ReleaseWhenSettled(release func())
}

// deferredAdapter lets a DeferredReply travel where a Reply is expected.
type deferredAdapter struct{ DeferredReply }

func (deferredAdapter) AppendTo(dst []byte) []byte { return dst }
func (deferredAdapter) IsFlexible() bool           { return false }

// Defer wraps d as a Reply; the connection writer resolves it in order.
// A Reply that implements DeferredReply itself is resolved the same way
// without the wrapper (which costs an allocation per request).
func Defer(d DeferredReply) Reply { return deferredAdapter{d} }

// Handler answers one request. A nil Reply with a nil error sends no
// response (Produce with acks=0); the pipeline order of the connection is
// kept either way. A non-nil error means the request could not be answered
// at all (malformed beyond what a Kafka error code expresses); the
// connection is then closed, as Kafka closes it.
type Handler func(ctx context.Context, s *Server, r *Request) (Reply, error)

// apiEntry is one registered API key.
type apiEntry struct {
	key int16
	// minVersion..maxVersion is the range advertised in ApiVersions.
	minVersion, maxVersion int16
	// Versions below servedFrom are advertised but refused (the
	// connection is closed as for any unsupported version). Kafka 4.x
	// does this for Produce v0-v2 (KAFKA-18659): librdkafka only enables
	// compression if it sees Produce v0 advertised.
	servedFrom int16
	// rawBody handlers decode the body themselves (Request.Body); the
	// registry does not run kmsg's decoder for them.
	rawBody bool
	// flexibleFrom is the first flexible (KIP-482) version, or -1: it
	// decides the request and response header versions without
	// allocating a kmsg request per frame.
	flexibleFrom int16
	handler      Handler
}

// apiOption adjusts a registration.
type apiOption func(*apiEntry)

// advertisedButRefusedBelow marks versions [min, v) as advertised but
// refused.
func advertisedButRefusedBelow(v int16) apiOption {
	return func(e *apiEntry) { e.servedFrom = v }
}

// rawBody makes the server hand the undecoded body to the handler.
func rawBody() apiOption { return func(e *apiEntry) { e.rawBody = true } }

var registry [kmsg.MaxKey + 1]*apiEntry

// register declares that key is served in versions minVersion..maxVersion
// by h. It is called from init() in the handler's own file, so the versions
// advertised by ApiVersions are exactly those implemented next to them.
func register(key, minVersion, maxVersion int16, h Handler, opts ...apiOption) {
	if key < 0 || int(key) >= len(registry) {
		panic("broker: register: key out of range")
	}
	if registry[key] != nil {
		panic("broker: register: key " + kmsg.NameForKey(key) + " registered twice")
	}
	registry[key] = newAPIEntry(key, minVersion, maxVersion, h, opts...)
}

// newAPIEntry builds a registry entry (register, and tests that install
// their own handlers).
func newAPIEntry(key, minVersion, maxVersion int16, h Handler, opts ...apiOption) *apiEntry {
	if minVersion < 0 || maxVersion < minVersion {
		panic("broker: register: bad version range for " + kmsg.NameForKey(key))
	}
	req := kmsg.RequestForKey(key)
	if req == nil {
		panic("broker: register: kmsg does not know key " + kmsg.NameForKey(key))
	}
	if maxVersion > req.MaxVersion() {
		panic("broker: register: " + kmsg.NameForKey(key) + " max version above what kmsg can decode")
	}
	e := &apiEntry{key: key, minVersion: minVersion, maxVersion: maxVersion, servedFrom: minVersion, flexibleFrom: -1, handler: h}
	for v := int16(0); v <= req.MaxVersion(); v++ {
		req.SetVersion(v)
		if req.IsFlexible() {
			e.flexibleFrom = v
			break
		}
	}
	for _, o := range opts {
		o(e)
	}
	return e
}

// lookupAPI returns the entry for key, or nil if the key is not served.
func lookupAPI(key int16) *apiEntry {
	if key < 0 {
		return nil
	}
	if int(key) >= len(registry) {
		return extRegistry[key]
	}
	return registry[key]
}

// flexible reports whether version v uses flexible (tagged-field) headers.
func (e *apiEntry) flexible(v int16) bool { return e.flexibleFrom >= 0 && v >= e.flexibleFrom }

// serves reports whether version v of the entry is answered.
func (e *apiEntry) serves(v int16) bool {
	return v >= e.servedFrom && v <= e.maxVersion
}

// advertisedAPIs lists the advertised keys in key order.
func advertisedAPIs() []kmsg.ApiVersionsResponseApiKey {
	var out []kmsg.ApiVersionsResponseApiKey
	for _, e := range registry {
		if e == nil {
			continue
		}
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = e.key, e.minVersion, e.maxVersion
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ApiKey < out[j].ApiKey })
	return out
}
