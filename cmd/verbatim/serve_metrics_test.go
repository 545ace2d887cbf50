package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/internal/testkit/logbuf"
)

// TestServeMetricsListen serves the metrics endpoint from metrics.listen
// in --config: /healthz answers, /readyz becomes ready once the Kafka
// listener accepts and the default policies compiled, /metrics carries
// the Kafka names.
func TestServeMetricsListen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	maddr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	conf := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(conf, []byte("metrics.listen="+maddr+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out logbuf.Buffer
	_, code := startServe(t, []string{"--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"), "--config", conf}, &out)
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + maddr + path)
		if err != nil {
			t.Fatalf("GET %s: %v\n%s", path, err, out.String())
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if c, _ := get("/healthz"); c != http.StatusOK {
		t.Fatalf("/healthz: %d", c)
	}
	deadline := time.Now().Add(120 * time.Second) // liveness: the default policies compile
	for {
		c, body := get("/readyz")
		if c == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz: %d %q", c, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if c, body := get("/metrics"); c != http.StatusOK || !strings.Contains(body, "kafka_network_requestmetrics_totaltimems") {
		t.Fatalf("/metrics: %d, no request metrics:\n%.2000s", c, body)
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	if c := <-code; c != 0 {
		t.Fatalf("exit code %d:\n%s", c, out.String())
	}
	if _, err := net.Dial("tcp", maddr); err == nil {
		t.Fatal("metrics listener still open after serve returned")
	}
}
