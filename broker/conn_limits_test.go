package broker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/hotpath"
	"github.com/verbatim-kafka/verbatim/internal/testkit/logbuf"
)

// dialFrom connects to addr from the loopback address local (127.0.0.2:
// another peer address on the same machine).
func dialFrom(t *testing.T, local, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 10 * time.Second}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", local, err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// waitUntil polls cond (the broker's own accounting) until it holds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i > 3000 {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *Server) peerConns(addr string) int {
	p := s.peers.lookup(netip.MustParseAddr(addr))
	if p == nil {
		return 0
	}
	s.peers.mu.Lock()
	defer s.peers.mu.Unlock()
	return p.conns
}

// slowProduceHead is the start of a Produce frame announcing size bytes:
// the size and the first 64 bytes (request header with a client id).
func slowProduceHead(size int, clientID string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(size))
	b = binary.BigEndian.AppendUint16(b, uint16(kmsg.Produce.Int16()))
	b = binary.BigEndian.AppendUint16(b, 9)
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	for len(b) < 4+64 {
		b = append(b, 0)
	}
	return b
}

// Hole 1: 200 connections from one address each announce a 90 MiB Produce
// frame and trickle 64 bytes every 500 ms. They hold a 32 KiB chunk each,
// honest clients on another address produce and fetch without ever
// waiting for budget, and every slow connection is closed by its rate
// deadline (grace shortened to 1 s), logged at WARN under one rate-limited
// key.
func TestSlowConnectionsDoNotStallHonestClients(t *testing.T) {
	logs := &logbuf.Buffer{}
	b := startBroker(t, t.TempDir(), func(c *Config) {
		c.FrameGrace = time.Second
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	createTopic(t, b, "honest", 1, nil)
	s := b.srv

	const slow = 200
	conns := make([]net.Conn, slow)
	closed := make(chan int, slow)
	for i := range conns {
		nc := dialFrom(t, "127.0.0.2", b.addr)
		conns[i] = nc
		if _, err := nc.Write(slowProduceHead(90<<20, "slow-client")); err != nil {
			t.Fatal(err)
		}
		go func() {
			_, err := io.Copy(io.Discard, nc) // ends when the broker closes it
			_ = err
			closed <- i
		}()
	}
	stopTrickle := make(chan struct{})
	trickled := make(chan struct{})
	go func() {
		defer close(trickled)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		chunk := make([]byte, 64)
		for {
			select {
			case <-stopTrickle:
				return
			case <-tick.C:
			}
			for _, nc := range conns {
				_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
				_, _ = nc.Write(chunk) // fails once the broker closed it
			}
		}
	}()
	defer func() { close(stopTrickle); <-trickled }()

	slowPeer := func() int64 {
		if p := s.peers.lookup(netip.MustParseAddr("127.0.0.2")); p != nil {
			return p.budget.InUse()
		}
		return 0
	}
	// Every slow frame has been started (each holds a first chunk) or,
	// on a very slow machine, already closed.
	waitUntil(t, "200 slow frames started", func() bool {
		return slowPeer()/hotpath.FirstChunk+int64(s.refusals[refusedTooSlow].Load()) == slow
	})
	var maxSlow, maxBroker int64
	var sampling sync.WaitGroup
	stopSampling := make(chan struct{})
	sampling.Add(1)
	go func() {
		defer sampling.Done()
		for {
			maxSlow, maxBroker = max(maxSlow, slowPeer()), max(maxBroker, s.budget.InUse())
			select {
			case <-stopSampling:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()

	// Honest clients produce (batches above the first chunk: promoted
	// frames) and fetch while the slow connections hold their chunks.
	cl := b.client(kgo.DefaultProduceTopic("honest"), kgo.ProducerLinger(0))
	value := bytes.Repeat([]byte("v"), 100<<10)
	var recs []*kgo.Record
	for range 20 {
		recs = append(recs, &kgo.Record{Value: value})
	}
	if err := cl.ProduceSync(ctxT(t), recs...).FirstErr(); err != nil {
		t.Fatalf("honest produce during the attack: %v", err)
	}
	if got := consumeN(t, b, "honest", 1, len(recs)); len(got) != len(recs) {
		t.Fatalf("honest fetch: %d records", len(got))
	}
	t.Logf("honest produce and fetch done with %d slow frames still held", slowPeer()/hotpath.FirstChunk)
	honest := s.peers.lookup(netip.MustParseAddr("127.0.0.1"))
	if honest == nil {
		t.Fatal("no honest peer entry")
	}
	if w := honest.budget.Waits(); w != 0 {
		t.Fatalf("honest address waited for its budget %d times", w)
	}
	s.mu.Lock()
	for c := range s.mu.conns {
		if c.peer == honest {
			if w := c.frames.ConnBudget().Waits(); w != 0 {
				t.Errorf("honest connection %d waited for its budget %d times", c.id, w)
			}
		}
	}
	s.mu.Unlock()

	// Every slow connection is closed by its rate deadline.
	for range slow {
		select {
		case <-closed:
		case <-time.After(30 * time.Second):
			t.Fatalf("slow connections still open; %d closed as too slow", s.refusals[refusedTooSlow].Load())
		}
	}
	close(stopSampling)
	sampling.Wait()
	if w := s.budget.Waits(); w != 0 {
		t.Fatalf("%d waits for broker budget during the attack", w)
	}
	if maxSlow > slow*hotpath.FirstChunk {
		t.Fatalf("slow connections held up to %d bytes, want at most %d (a first chunk each)", maxSlow, slow*hotpath.FirstChunk)
	}
	if maxBroker > slow*hotpath.FirstChunk+16<<20 {
		t.Fatalf("broker budget reached %d", maxBroker)
	}
	// The client sees the close before the broker has logged it.
	waitUntil(t, "200 refusals counted", func() bool {
		return s.refusals[refusedTooSlow].Load()+s.refusals[refusedTimeout].Load()+s.refusals[refusedTruncated].Load() == slow
	})
	if n := s.refusals[refusedTooSlow].Load(); n != slow {
		t.Fatalf("%d connections closed as too slow, want %d (others: timeout %d truncated %d)", n, slow,
			s.refusals[refusedTimeout].Load(), s.refusals[refusedTruncated].Load())
	}
	waitUntil(t, "slow peer entry dropped", func() bool { return s.peers.lookup(netip.MustParseAddr("127.0.0.2")) == nil })
	warns := logs.Lines("frame body arriving below")
	if len(warns) == 0 || len(warns) > 10 {
		t.Fatalf("%d WARN lines for 200 slow connections, want 1..10 (rate-limited by reason)", len(warns))
	}
	if l := warns[0]; !strings.Contains(l, "level=WARN") || !strings.Contains(l, "client_id=slow-client") ||
		!strings.Contains(l, "api=Produce") || !strings.Contains(l, "remote=127.0.0.2:") {
		t.Fatalf("WARN line lacks level, client, api or address: %s", l)
	}
}

// max.connections.per.ip and its overrides, enforced at accept: the
// connection over the limit is closed at once, logged, and counted; a
// closed connection makes room again; DescribeConfigs shows both.
func TestMaxConnectionsPerIP(t *testing.T) {
	logs := &logbuf.Buffer{}
	two := 2
	b := startBroker(t, t.TempDir(), func(c *Config) {
		c.MaxConnectionsPerIP = &two
		c.MaxConnectionsPerIPOverrides = "127.0.0.2:3, [::1]:0"
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	s := b.srv
	served := func(nc net.Conn) bool {
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = nc.Write(apiVersionsFrame(1, 3)) // may fail: refused connections are closed at once
		_, _, err := (&rawConn{t: t, nc: nc}).read()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("connection neither served nor closed")
		}
		return err == nil
	}
	var local []net.Conn
	for i := range 3 {
		nc := dialFrom(t, "127.0.0.1", b.addr)
		if got, want := served(nc), i < 2; got != want {
			t.Fatalf("127.0.0.1 connection %d served %v, want %v", i, got, want)
		}
		local = append(local, nc)
	}
	for i := range 4 {
		if got, want := served(dialFrom(t, "127.0.0.2", b.addr)), i < 3; got != want {
			t.Fatalf("127.0.0.2 connection %d served %v, want %v (override 3)", i, got, want)
		}
	}
	if n := s.refusals[refusedTooManyConns].Load(); n != 2 {
		t.Fatalf("%d refusals counted, want 2", n)
	}
	local[0].Close()
	waitUntil(t, "a closed connection leaves its address's count", func() bool { return s.peerConns("127.0.0.1") == 1 })
	if !served(dialFrom(t, "127.0.0.1", b.addr)) {
		t.Fatal("no room after a connection closed")
	}
	lines := logs.Lines("connection refused")
	if len(lines) != 2 || !strings.Contains(lines[0], "remote=127.0.0.1:") || !strings.Contains(lines[0], "maximum of 2 connections") ||
		!strings.Contains(lines[1], "remote=127.0.0.2:") || !strings.Contains(lines[1], "maximum of 3") {
		t.Fatalf("refusal log lines:\n%s", strings.Join(lines, "\n"))
	}

	cfgs := map[string]string{}
	for _, e := range s.brokerConfigs() {
		cfgs[e.name] = e.value
	}
	if cfgs["max.connections.per.ip"] != "2" || cfgs["max.connections.per.ip.overrides"] != "127.0.0.2:3, [::1]:0" {
		t.Fatalf("described: max.connections.per.ip=%q overrides=%q", cfgs["max.connections.per.ip"], cfgs["max.connections.per.ip.overrides"])
	}
}

func TestConnLimitConfig(t *testing.T) {
	zero, neg := 0, -1
	for _, c := range []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"defaults", func(*Config) {}, true},
		{"zero with overrides", func(c *Config) { c.MaxConnectionsPerIP, c.MaxConnectionsPerIPOverrides = &zero, "localhost:5" }, true},
		{"zero without overrides", func(c *Config) { c.MaxConnectionsPerIP = &zero }, false},
		{"negative", func(c *Config) { c.MaxConnectionsPerIP = &neg }, false},
		{"override without count", func(c *Config) { c.MaxConnectionsPerIPOverrides = "10.0.0.1" }, false},
		{"override bad count", func(c *Config) { c.MaxConnectionsPerIPOverrides = "10.0.0.1:x" }, false},
		{"override bad host", func(c *Config) { c.MaxConnectionsPerIPOverrides = "a b:3" }, false},
		{"per-IP budget below a frame", func(c *Config) { c.MaxInFlightBytesPerIP = 1 << 20 }, false},
		{"frame over the largest buffer", func(c *Config) { c.MaxFrameBytes, c.MaxInFlightBytes = 200<<20, 1<<30 }, false},
	} {
		cfg := Config{DataDir: t.TempDir()}
		c.mod(&cfg)
		got, err := cfg.withDefaults()
		if (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
		}
		if c.name == "defaults" && (got.MaxInFlightBytesPerIP != 144<<20 || got.MaxInFlightBytesPerConn != 144<<20 ||
			got.FrameMinRate != 1<<20 || got.FrameGrace != 5*time.Second || got.MaxConnectionsPerIP != nil) {
			t.Errorf("defaults: per IP %d, per conn %d, rate %d, grace %s", got.MaxInFlightBytesPerIP, got.MaxInFlightBytesPerConn, got.FrameMinRate, got.FrameGrace)
		}
	}
	pt, err := newPeerTable(Config{MaxConnectionsPerIPOverrides: "localhost:7,::ffff:10.1.2.3:4"})
	if err != nil {
		t.Fatal(err)
	}
	if pt.overrides[netip.MustParseAddr("127.0.0.1")] != 7 || pt.overrides[netip.MustParseAddr("10.1.2.3")] != 4 {
		t.Fatalf("overrides resolved to %v", pt.overrides)
	}
}

// The frame budget of one address: its connections' frames beyond it wait
// on it (holding none of the broker's budget meanwhile), and another
// address is served without waiting.
func TestPerIPFrameBudget(t *testing.T) {
	b := startBroker(t, t.TempDir(), func(c *Config) {
		c.MaxFrameBytes = 60000                                 // class 64 KiB, footprint 96 KiB
		c.MaxInFlightBytesPerIP = 2*64<<10 + hotpath.FirstChunk // two promoted frames and a first chunk
		// The stalled frames must outlive the test: under -race on a
		// loaded machine it can take longer than the 5 s grace, after
		// which the rate deadline would close them and no frame waits.
		c.FrameGrace = 5 * time.Minute
		c.RequestTimeout = 5 * time.Minute
	})
	s := b.srv
	part := append(binary.BigEndian.AppendUint32(nil, 60000), make([]byte, 40000)...)
	var slow []net.Conn
	for i := range 3 {
		nc := dialFrom(t, "127.0.0.2", b.addr)
		if _, err := nc.Write(part); err != nil {
			t.Fatal(err)
		}
		slow = append(slow, nc)
		if i < 2 {
			// One frame at a time, so slow[0] and slow[1] hold the
			// promoted frames and the third is the one that waits
			// (closing a waiting connection would release nothing).
			want := int64(i+1) * 64 << 10
			waitUntil(t, "a frame promoted", func() bool {
				q := s.peers.lookup(netip.MustParseAddr("127.0.0.2"))
				return q != nil && q.budget.InUse() == want
			})
		}
	}
	var p *peer
	waitUntil(t, "the third frame waiting on its address's budget", func() bool {
		p = s.peers.lookup(netip.MustParseAddr("127.0.0.2"))
		return p != nil && p.budget.Waiting() == 1
	})
	if used := s.budget.InUse(); used != p.budget.InUse() || used != 2*64<<10+hotpath.FirstChunk {
		t.Fatalf("broker holds %d, the address %d: a frame waiting on its address holds broker budget", used, p.budget.InUse())
	}
	honest := dialRaw(t, b.addr)
	honest.write(apiVersionsFrame(1, 3))
	if _, _, err := honest.read(); err != nil {
		t.Fatalf("another address while one is at its cap: %v", err)
	}
	slow[0].Close() // its 64 KiB go back; the waiting frame is promoted
	waitUntil(t, "the waiting frame promoted", func() bool { return p.budget.Waiting() == 0 && p.budget.InUse() == 2*64<<10 })
	if s.budget.Waits() != 0 || s.peers.lookup(netip.MustParseAddr("127.0.0.1")).budget.Waits() != 0 {
		t.Fatal("the broker's or the other address's budget was waited for")
	}
	for _, nc := range slow[1:] {
		nc.Close()
	}
	waitInflightZero(t, s)
}
