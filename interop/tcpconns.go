package interop

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// tcpConnsTo counts the established TCP connections process pid holds to
// remote port port, from /proc (its socket fds matched against
// /proc/net/tcp and tcp6): what the source broker sees, independent of
// any counter of the process itself.
func tcpConnsTo(t testing.TB, pid, port int) int {
	t.Helper()
	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatalf("interop: reading the fds of %d: %v", pid, err)
	}
	for _, fd := range fds {
		l, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	n := 0
	for _, tab := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, tab))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 || fs[3] != "01" { // 01: ESTABLISHED
				continue
			}
			rem := strings.Split(fs[2], ":")
			if len(rem) != 2 {
				continue
			}
			p, err := strconv.ParseInt(rem[1], 16, 32)
			if err == nil && int(p) == port && inodes[fs[9]] {
				n++
			}
		}
		f.Close()
	}
	return n
}

// splitHostPort splits the first address of a bootstrap list.
func splitHostPort(t testing.TB, bootstrap string) (string, int) {
	t.Helper()
	h, p, err := net.SplitHostPort(strings.Split(bootstrap, ",")[0])
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return h, n
}
