package clustermeta

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// One embedded etcd member serves the package's tests (each test under a
// prefix of its own); started on first use, stopped after the run.
var testMember struct {
	once sync.Once
	dir  string
	e    *Embedded
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if testMember.e != nil {
		testMember.e.Close()
	}
	if testMember.dir != "" {
		os.RemoveAll(testMember.dir)
	}
	os.Exit(code)
}

// FreeURLs are n distinct http URLs on loopback ports that were free a
// moment ago (all listened on at once, so none is handed out twice).
func FreeURLs(t testing.TB, n int) []string {
	t.Helper()
	urls := make([]string, n)
	for i := range urls {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		urls[i] = "http://" + l.Addr().String()
	}
	return urls
}

// SharedEndpoint is the shared member's client URL.
func SharedEndpoint(t testing.TB) string {
	t.Helper()
	testMember.once.Do(func() {
		testMember.dir, testMember.err = os.MkdirTemp("", "clustermeta-etcd-")
		if testMember.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		urls := FreeURLs(t, 2)
		testMember.e, testMember.err = StartEmbedded(ctx, EmbedConfig{
			Name: "test", Dir: filepath.Join(testMember.dir, "etcd"), ClientURL: urls[0], PeerURL: urls[1],
		})
	})
	if testMember.err != nil {
		t.Fatalf("embedded etcd: %v", testMember.err)
	}
	return testMember.e.ClientURL
}

var prefixSeq struct {
	sync.Mutex
	n int
}

// OpenTestStore opens a store over the shared member under a fresh prefix.
func OpenTestStore(t testing.TB) Store {
	t.Helper()
	prefixSeq.Lock()
	prefixSeq.n++
	prefix := fmt.Sprintf("/test-%d-%d/", os.Getpid(), prefixSeq.n)
	prefixSeq.Unlock()
	s, err := Open(context.Background(), Config{Endpoints: []string{SharedEndpoint(t)}, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// ExpireNode revokes the leases of node's registration and controller
// candidacy, as etcd does when they are not renewed in time.
func ExpireNode(t testing.TB, st Store, node int32) {
	t.Helper()
	s := st.(*etcdStore)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := s.cli.Get(ctx, s.keys.Prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	want := strconv.FormatInt(int64(node), 10)
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		mine := key == s.keys.Broker(node) ||
			strings.HasPrefix(key, s.keys.Controller()) && string(kv.Value) == want
		if mine && kv.Lease != 0 {
			if _, err := s.cli.Revoke(ctx, clientv3.LeaseID(kv.Lease)); err != nil {
				t.Fatal(err)
			}
		}
	}
}
