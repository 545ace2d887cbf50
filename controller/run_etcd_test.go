package controller

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

func freeURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "http://" + l.Addr().String()
}

// On a real etcd: two candidates with clients of their own; the first
// resigns its term, its write on a snapshot it read while elected fails
// with ErrFenced, and the second carries on deciding.
func TestRunOnEtcd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	member, err := clustermeta.StartEmbedded(ctx, clustermeta.EmbedConfig{
		Name: "controller-test", Dir: t.TempDir(), ClientURL: freeURL(t), PeerURL: freeURL(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	var stores []clustermeta.Store
	defer func() {
		// Clients first: a member closing under open clients waits for them.
		for _, st := range stores {
			st.Close()
		}
	}()
	open := func() clustermeta.Store {
		st, err := clustermeta.Open(ctx, clustermeta.Config{Endpoints: []string{member.ClientURL}, Prefix: "/controller-test/"})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, st)
		return st
	}
	a, b := open(), open()
	sessions := registerBrokers(t, a, 3)
	defer func() {
		for _, s := range sessions {
			s.Close(context.Background())
		}
	}()
	staleTermFenced(t, a, b,
		func(ctx context.Context, l *clustermeta.Leadership) {
			if err := l.Resign(ctx); err != nil {
				t.Fatal(err)
			}
		},
		func(id int32) {
			if err := sessions[id].Close(ctx); err != nil {
				t.Fatal(err)
			}
		})
}
