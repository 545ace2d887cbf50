package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// appendRequestFrame encodes req (at its version) as a full frame with a
// v1/v2 request header.
func appendRequestFrame(dst []byte, req kmsg.Request, corr int32, clientID string) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.Key()))
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.GetVersion()))
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(clientID)))
	dst = append(dst, clientID...)
	if req.IsFlexible() {
		dst = append(dst, 0)
	}
	dst = req.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

type rawConn struct {
	t  *testing.T
	nc net.Conn
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{t: t, nc: nc}
}

func (r *rawConn) write(b []byte) {
	r.t.Helper()
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

// read returns the next response's correlation id and the rest of the
// frame (header tagged fields, if any, still included).
func (r *rawConn) read() (int32, []byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r.nc, size[:]); err != nil {
		return 0, nil, err
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r.nc, frame); err != nil {
		return 0, nil, err
	}
	if len(frame) < 4 {
		return 0, nil, errors.New("short response")
	}
	return int32(binary.BigEndian.Uint32(frame)), frame[4:], nil
}

// readAnswer reads the next response, which must answer the request with
// correlation id corr, and returns the rest of its frame as read does.
func (r *rawConn) readAnswer(corr int32) []byte {
	r.t.Helper()
	got, body, err := r.read()
	if err != nil {
		r.t.Fatalf("response %d: %v", corr, err)
	}
	if got != corr {
		r.t.Fatalf("response %d has correlation id %d", corr, got)
	}
	return body
}

// expectClosed asserts the broker closes the connection without answering.
func (r *rawConn) expectClosed() {
	r.t.Helper()
	_, _, err := r.read()
	if err == nil {
		r.t.Fatal("got a response; want the connection closed")
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		r.t.Fatal("connection stayed open")
	}
}

func apiVersionsFrame(corr int32, version int16) []byte {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = version
	req.ClientSoftwareName, req.ClientSoftwareVersion = "raw", "1"
	return appendRequestFrame(nil, req, corr, "raw-client")
}

// assertHealthy checks that a new connection is served.
func assertHealthy(t *testing.T, b *testBroker) {
	t.Helper()
	c := dialRaw(t, b.addr)
	c.write(apiVersionsFrame(7, 3))
	corr, body, err := c.read()
	if err != nil || corr != 7 {
		t.Fatalf("broker not healthy: corr %d err %v", corr, err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Fatalf("ApiVersions after bad input: %v code %d", err, resp.ErrorCode)
	}
}

func waitInflightZero(t *testing.T, s *Server) {
	t.Helper()
	for i := 0; s.budget.InUse() != 0; i++ {
		if i > 2000 {
			t.Fatalf("in-flight bytes stuck at %d", s.budget.InUse())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestBadFramesCloseConnectionOnly(t *testing.T) {
	b := startBroker(t, t.TempDir(), func(c *Config) { c.MaxFrameBytes = 4096 })
	metadataV99 := func() []byte {
		f := appendRequestFrame(nil, kmsg.NewPtrMetadataRequest(), 1, "x")
		binary.BigEndian.PutUint16(f[6:], 99)
		return f
	}
	unknownKey := func(key int16) []byte {
		f := apiVersionsFrame(1, 0)
		binary.BigEndian.PutUint16(f[4:], uint16(key))
		return f
	}
	malformed := func() []byte {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		f := appendRequestFrame(nil, req, 1, "x")
		// Claim a topic array of 100 entries that is not there.
		f[len(f)-4] = 101
		return f
	}
	cases := map[string][]byte{
		"oversized":        binary.BigEndian.AppendUint32(nil, 5000),
		"negative size":    binary.BigEndian.AppendUint32(nil, 0xffffffff),
		"tiny frame":       append(binary.BigEndian.AppendUint32(nil, 3), 1, 2, 3),
		"unknown key":      unknownKey(1000),
		"unserved key":     unknownKey(kmsg.JoinGroup.Int16()),
		"negative key":     unknownKey(-1),
		"unsupported ver":  metadataV99(),
		"malformed body":   malformed(),
		"bad client id":    append(binary.BigEndian.AppendUint32(nil, 10), 0, 18, 0, 0, 0, 0, 0, 1, 0x7f, 0x00),
		"negative version": func() []byte { f := apiVersionsFrame(1, 0); binary.BigEndian.PutUint16(f[6:], 0xffff); return f }(),
	}
	for name, frame := range cases {
		t.Run(name, func(t *testing.T) {
			c := dialRaw(t, b.addr)
			c.write(frame)
			c.expectClosed()
			assertHealthy(t, b)
		})
	}
	t.Run("truncated", func(t *testing.T) {
		c := dialRaw(t, b.addr)
		f := apiVersionsFrame(1, 3)
		c.write(f[:len(f)-5])
		c.nc.(*net.TCPConn).CloseWrite()
		c.expectClosed()
		assertHealthy(t, b)
	})
	waitInflightZero(t, b.srv)
}

func TestApiVersionsUnsupportedVersion(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	c := dialRaw(t, b.addr)
	// A future version, flexible header included: the body is not parsed.
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 4
	f := appendRequestFrame(nil, req, 42, "future")
	binary.BigEndian.PutUint16(f[6:], 77)
	c.write(f)
	corr, body, err := c.read()
	if err != nil || corr != 42 {
		t.Fatalf("corr %d err %v", corr, err)
	}
	// Response header v0, body v0.
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("code %d", resp.ErrorCode)
	}
	found := false
	for _, k := range resp.ApiKeys {
		if k.ApiKey == 18 && k.MinVersion == 0 && k.MaxVersion == 4 {
			found = true
		}
	}
	if !found {
		t.Fatalf("supported ranges missing: %+v", resp.ApiKeys)
	}
	// The connection stays usable.
	c.write(apiVersionsFrame(43, 3))
	if corr, _, err := c.read(); err != nil || corr != 43 {
		t.Fatalf("after unsupported version: corr %d err %v", corr, err)
	}
}

func TestApiVersionsInvalidSoftwareName(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	c := dialRaw(t, b.addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "-bad name", "1"
	c.write(appendRequestFrame(nil, req, 1, "x"))
	body := c.readAnswer(1)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("err %v code %d", err, resp.ErrorCode)
	}
}

func TestPipelinedRequestsAnsweredInOrder(t *testing.T) {
	b := startBroker(t, t.TempDir(), func(c *Config) { c.MaxInFlightPerConn = 4 })
	if r, _ := b.admin().CreateTopic(ctxT(t), 2, 1, nil, "pipe"); r.Err != nil {
		t.Fatal(r.Err)
	}
	c := dialRaw(t, b.addr)
	var buf []byte
	const n = 200
	for i := range n {
		if i%2 == 0 {
			buf = append(buf, apiVersionsFrame(int32(i), int16(i%5))...)
		} else {
			req := kmsg.NewPtrMetadataRequest()
			req.Version = int16(i % 14)
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = sp("pipe")
			req.Topics = append(req.Topics, rt)
			buf = appendRequestFrame(buf, req, int32(i), "pipeline")
		}
	}
	c.write(buf)
	for i := range n {
		body := c.readAnswer(int32(i))
		if i%2 == 1 {
			v := int16(i % 14)
			resp := kmsg.NewPtrMetadataResponse()
			resp.Version = v
			if v >= 9 {
				body = body[1:] // response header v1: empty tagged fields
			}
			if err := resp.ReadFrom(body); err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
				t.Fatalf("metadata v%d response %d: %v", v, i, err)
			}
		}
	}
}

func TestIdleConnectionClosed(t *testing.T) {
	b := startBroker(t, t.TempDir(), func(c *Config) { c.IdleTimeout = 50 * time.Millisecond })
	c := dialRaw(t, b.addr)
	c.expectClosed()
}

// swapAPI installs e for the test and restores the previous entry after
// the broker has stopped (call it before startBroker).
func swapAPI(t *testing.T, e *apiEntry) {
	old := registry[e.key]
	registry[e.key] = e
	t.Cleanup(func() { registry[e.key] = old })
}

func TestAdvertisedButRefusedVersions(t *testing.T) {
	var calls sync.Map
	swapAPI(t, newAPIEntry(kmsg.Produce.Int16(), 0, 13, func(_ context.Context, _ *Server, r *Request) (Reply, error) {
		calls.Store(r.Version, true)
		resp := r.Msg.ResponseKind().(*kmsg.ProduceResponse)
		return resp, nil
	}, advertisedButRefusedBelow(3)))
	b := startBroker(t, t.TempDir(), nil)

	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctxT(t), b.client())
	if err != nil {
		t.Fatal(err)
	}
	advertised := false
	for _, k := range resp.ApiKeys {
		if k.ApiKey == 0 && k.MinVersion == 0 && k.MaxVersion == 13 {
			advertised = true
		}
	}
	if !advertised {
		t.Fatal("Produce v0-13 not advertised")
	}
	produce := func(v int16) []byte {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = v, 1, 1000
		return appendRequestFrame(nil, req, 5, "p")
	}
	c := dialRaw(t, b.addr)
	c.write(produce(2))
	c.expectClosed()
	c = dialRaw(t, b.addr)
	c.write(produce(3))
	if corr, _, err := c.read(); err != nil || corr != 5 {
		t.Fatalf("v3: corr %d err %v", corr, err)
	}
	if _, ok := calls.Load(int16(2)); ok {
		t.Fatal("handler ran for a refused version")
	}
}

type blockingReply struct {
	release chan struct{}
	resp    Reply
}

func (d blockingReply) Await(ctx context.Context) (Reply, error) {
	select {
	case <-d.release:
		return d.resp, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func TestShutdownFinishesInFlightRequests(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	swapAPI(t, newAPIEntry(kmsg.Produce.Int16(), 3, 13, func(_ context.Context, _ *Server, r *Request) (Reply, error) {
		started <- struct{}{}
		return Defer(blockingReply{release: release, resp: r.Msg.ResponseKind().(*kmsg.ProduceResponse)}), nil
	}))
	b := startBroker(t, t.TempDir(), nil)
	c := dialRaw(t, b.addr)
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 1000
	c.write(appendRequestFrame(nil, req, 77, "p"))
	<-started

	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		shut <- b.srv.Shutdown(ctx)
	}()
	// The listener closes first: new connections are refused.
	for i := 0; ; i++ {
		nc, err := net.Dial("tcp", b.addr)
		if err != nil {
			break
		}
		nc.Close()
		if i > 1000 {
			t.Fatal("listener still accepting during shutdown")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case err := <-shut:
		t.Fatalf("shutdown returned before the in-flight request finished: %v", err)
	default:
	}
	close(release)
	corr, _, err := c.read()
	if err != nil || corr != 77 {
		t.Fatalf("in-flight request not answered: corr %d err %v", corr, err)
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	c.expectClosed()
	if err := <-b.done; err != nil {
		t.Fatal(err)
	}
	b.srv = nil
}

func TestShutdownDeadlineAbortsStuckRequests(t *testing.T) {
	handled := make(chan struct{})
	swapAPI(t, newAPIEntry(kmsg.Produce.Int16(), 3, 13, func(_ context.Context, _ *Server, r *Request) (Reply, error) {
		close(handled)
		return Defer(blockingReply{release: make(chan struct{})}), nil
	}))
	b := startBroker(t, t.TempDir(), nil)
	c := dialRaw(t, b.addr)
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	c.write(appendRequestFrame(nil, req, 1, "p"))
	// Shut down only once the request is in flight: on a loaded machine the
	// connection may not have read it yet, and Shutdown would then have
	// nothing to wait for.
	select {
	case <-handled:
	case <-time.After(30 * time.Second):
		t.Fatal("the produce request never reached its handler")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := b.srv.Shutdown(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v, want deadline exceeded", err)
	}
	c.expectClosed()
	<-b.done
	b.srv = nil
}

func TestHandlerPanicClosesOnlyItsConnection(t *testing.T) {
	swapAPI(t, newAPIEntry(kmsg.Produce.Int16(), 3, 13, func(context.Context, *Server, *Request) (Reply, error) { panic("boom") }))
	b := startBroker(t, t.TempDir(), nil)
	c := dialRaw(t, b.addr)
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	c.write(appendRequestFrame(nil, req, 1, "p"))
	c.expectClosed()
	assertHealthy(t, b)
}

func TestRequestTimeoutClosesConnection(t *testing.T) {
	swapAPI(t, newAPIEntry(kmsg.Produce.Int16(), 3, 13, func(_ context.Context, _ *Server, r *Request) (Reply, error) {
		return Defer(blockingReply{release: make(chan struct{})}), nil
	}))
	b := startBroker(t, t.TempDir(), func(c *Config) { c.RequestTimeout = 50 * time.Millisecond })
	c := dialRaw(t, b.addr)
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	var buf []byte
	buf = appendRequestFrame(buf, req, 1, "p")
	buf = append(buf, apiVersionsFrame(2, 3)...)
	c.write(buf)
	// The stuck request cannot be answered, and the one behind it cannot
	// overtake it: the connection is closed.
	c.expectClosed()
	assertHealthy(t, b)
	waitInflightZero(t, b.srv)
}

func TestTinyBudgetsStillServePipelines(t *testing.T) {
	// One 4 KiB frame buffer per connection: every request waits for the
	// previous one's response to be written. Back-pressure, no deadlock.
	b := startBroker(t, t.TempDir(), func(c *Config) {
		c.MaxFrameBytes, c.MaxInFlightBytesPerConn, c.MaxInFlightBytes = 4096, 4096, 8192
	})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dialRaw(t, b.addr)
			var buf []byte
			for i := range 100 {
				buf = append(buf, apiVersionsFrame(int32(i), 3)...)
			}
			c.write(buf)
			for i := range 100 {
				corr, _, err := c.read()
				if err != nil || corr != int32(i) {
					t.Errorf("response %d: corr %d err %v", i, corr, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	waitInflightZero(t, b.srv)
}

func TestStalledFrameClosedAfterRequestTimeout(t *testing.T) {
	b := startBroker(t, t.TempDir(), func(c *Config) { c.RequestTimeout = 50 * time.Millisecond })
	c := dialRaw(t, b.addr)
	f := apiVersionsFrame(1, 3)
	c.write(f[:len(f)-3]) // and then nothing, connection left open
	c.expectClosed()
	assertHealthy(t, b)
	waitInflightZero(t, b.srv)
}

func TestKeepFrameTransfersOwnership(t *testing.T) {
	kept := make(chan func(), 1)
	swapAPI(t, newAPIEntry(kmsg.Produce.Int16(), 3, 13, func(_ context.Context, _ *Server, r *Request) (Reply, error) {
		kept <- r.KeepFrame()
		return nil, nil // as acks=0: no response
	}, rawBody()))
	b := startBroker(t, t.TempDir(), nil)
	c := dialRaw(t, b.addr)
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks = 9, 0
	c.write(appendRequestFrame(nil, req, 1, "p"))
	release := <-kept
	// The response-less request is finished, but the frame is still held.
	assertHealthy(t, b)
	if b.srv.budget.InUse() == 0 {
		t.Fatal("kept frame was released by the connection")
	}
	release()
	release() // idempotent
	waitInflightZero(t, b.srv)
}

func TestKmsgDecodedRequestsDoNotAliasTheFrame(t *testing.T) {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 9
	req.Group, req.ProtocolType = "g", "consumer"
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("member-metadata")}}
	frame := appendRequestFrame(nil, req, 3, "c")[4:]
	if e := lookupAPI(kmsg.JoinGroup.Int16()); e == nil || e.rawBody {
		t.Fatal("JoinGroup is not a kmsg-decoded API any more; pick another one")
	}
	_, _, r, err := decodeFrame(frame)
	if err != nil {
		t.Fatal(err)
	}
	clear(frame) // the pooled buffer is reused for the next frame
	got := r.Msg.(*kmsg.JoinGroupRequest).Protocols[0].Metadata
	if string(got) != "member-metadata" {
		t.Fatalf("decoded metadata changed with the frame buffer: %q", got)
	}
}
