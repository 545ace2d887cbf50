package interop

import (
	"context"
	"fmt"
	"net"
	"strconv"
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
// moment ago. The listeners are closed before returning, so a port can in
// principle be taken by someone else before the caller binds it; callers
// that start servers should treat a bind failure as fatal with a clear log.
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
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("interop: listen on 127.0.0.1:0: %v", err)
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
