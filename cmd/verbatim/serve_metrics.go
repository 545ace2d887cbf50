package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/verbatim-kafka/verbatim/broker"
)

// metricsServer serves the broker's /metrics, /healthz and /readyz on
// --metrics-listen (metrics.listen). It is started before the Kafka
// listeners, so /readyz answers "not ready" until they accept, and closed
// after the broker's shutdown, so /healthz answers throughout it.
type metricsServer struct {
	hs   *http.Server
	done chan struct{}
}

func startMetrics(srv *broker.Server, addr string, log *slog.Logger) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	m := &metricsServer{
		hs:   &http.Server{Handler: srv.MetricsHandler(), ReadHeaderTimeout: 10 * time.Second},
		done: make(chan struct{}),
	}
	log.Info("metrics listening", "addr", ln.Addr().String())
	go func() {
		defer close(m.done)
		if err := m.hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener failed", "err", err)
		}
	}()
	return m, nil
}

// stop closes the listener and waits briefly for scrapes in progress.
func (m *metricsServer) stop() {
	if m == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = m.hs.Shutdown(ctx)
	<-m.done
}
