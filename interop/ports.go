package interop

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// handedOut remembers ports given out by FreePorts in this process so that
// two helpers running in parallel never get the same one before either has
// bound it.
var (
	portsMu   sync.Mutex
	handedOut = map[int]bool{}
)

// FreePorts returns n distinct TCP ports on 127.0.0.1 that were free a
// moment ago, picked below the kernel's ephemeral range when possible. The
// listeners are closed before returning, so a port can still be taken by
// someone else before the caller binds it: StartKafka and StartVerbatim
// retry on new ports when that happens.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	var (
		ports []int
		lns   []net.Listener
	)
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for attempts := 0; len(ports) < n; attempts++ {
		if attempts > 100*n {
			t.Fatalf("interop: could not find %d free loopback ports", n)
		}
		ln, err := listenOutsideEphemeral()
		if err != nil {
			// Fall back to a kernel-chosen port.
			if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
				t.Fatalf("interop: listen on 127.0.0.1:0: %v", err)
			}
		}
		p := ln.Addr().(*net.TCPAddr).Port
		if handedOut[p] {
			ln.Close()
			continue
		}
		lns = append(lns, ln)
		handedOut[p] = true
		ports = append(ports, p)
	}
	return ports
}

// ephemeralLow is the start of the kernel's ephemeral port range: ports
// below it are never handed out for outgoing connections or for listeners
// on port 0, so a port picked there is far less likely to be taken between
// FreePorts closing it and a server binding it.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= 20000 {
		return 32768
	}
	return n
}

// listenOutsideEphemeral binds a random port in [20000, ephemeralLow).
func listenOutsideEphemeral() (net.Listener, error) {
	low, high := 20000, ephemeralLow()
	var err error
	for i := 0; i < 20; i++ {
		var ln net.Listener
		ln, err = net.Listen("tcp", Addr(low+mrand.IntN(high-low)))
		if err == nil {
			return ln, nil
		}
	}
	return nil, err
}

// Addr formats a loopback address for port.
func Addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// WaitForPort polls until a TCP connection to addr succeeds or ctx ends.
// alive, when non-nil, is consulted between attempts so a server that died
// during start-up is reported at once instead of after the timeout.
func WaitForPort(ctx context.Context, addr string, alive func() error) error {
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			return nil
		}
		if alive != nil {
			if aerr := alive(); aerr != nil {
				return aerr
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last dial error: %v)", addr, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
