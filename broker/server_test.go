package broker

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// testBroker is an in-process broker on a loopback port.
type testBroker struct {
	t    *testing.T
	srv  *Server
	addr string
	dir  string
	done chan error
}

func startBroker(t *testing.T, dir string, mod func(*Config)) *testBroker {
	t.Helper()
	return startBrokerOn(t, dir, mod, nil)
}

// startBrokerOn is startBroker serving the listener l (nil: the default
// PLAINTEXT listener).
func startBrokerOn(t *testing.T, dir string, mod func(*Config), l *Listener) *testBroker {
	t.Helper()
	cfg := Config{DataDir: dir, NodeID: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if testing.Verbose() {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &testBroker{t: t, srv: srv, addr: ln.Addr().String(), dir: dir, done: make(chan error, 1)}
	go func() {
		if l == nil {
			b.done <- srv.Serve(ln)
		} else {
			b.done <- srv.ServeListener(ln, l)
		}
	}()
	t.Cleanup(func() { b.stop() })
	return b
}

func (b *testBroker) stop() {
	if b.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.srv.Shutdown(ctx); err != nil {
		b.t.Errorf("Shutdown: %v", err)
	}
	if err := <-b.done; err != nil {
		b.t.Errorf("Serve: %v", err)
	}
	b.srv = nil
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func (b *testBroker) client(opts ...kgo.Opt) *kgo.Client {
	b.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.addr), kgo.RequestRetries(0)}, opts...)...)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(cl.Close)
	return cl
}

func (b *testBroker) admin() *kadm.Client { return kadm.NewClient(b.client()) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
