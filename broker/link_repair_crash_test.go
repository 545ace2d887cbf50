package broker

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math/rand"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/storage"
)

// TestTruncateKeepingCutCrashAtEveryStep cuts a TruncateKeepingCut after
// every one of its file operations (the keep topic's creation and
// metadata, its appends and sync, the truncation's steps) and crashes the
// machine in every mode: the broker that opens the crashed files finds
// either the old log, or the truncated one with every removed batch in
// the keep topic byte for byte at its offset. Never a cut without its
// copy.
func TestTruncateKeepingCutCrashAtEveryStep(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sets := repairSets(t)
	const to, oldEnd = 5, 11
	ctx := context.Background()
	open := func(dir string, fs storage.FS) *Server {
		srv, err := Open(Config{DataDir: dir, FS: fs, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return srv
	}
	setup := func(dir string, fs *storage.MemFS) *Server {
		if err := fs.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		srv := open(dir, fs)
		cfg, err := srv.topicConfig(map[string]string{"mirror.mode": "push"})
		if err != nil {
			t.Fatal(err)
		}
		tp, err := srv.cluster.createTopic("m", 1, cfg, false)
		if err != nil {
			t.Fatal(err)
		}
		l, err := partitionLog(tp.Partition(0))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sets {
			if _, err := l.AppendVerbatim(s); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		return srv
	}
	shutdown := func(srv *Server) {
		c, cancel := context.WithTimeout(ctx, 0)
		defer cancel()
		srv.Shutdown(c)
	}
	ref := storage.NewMemFS()
	srv := setup(t.TempDir(), ref)
	start := ref.Ops()
	if res, err := srv.TruncateKeepingCut(ctx, "m", 0, to, ""); err != nil || res.TruncatedTo != to {
		t.Fatalf("reference truncation: %+v %v", res, err)
	}
	ops := ref.Ops() - start
	shutdown(srv)

	rng := rand.New(rand.NewSource(7))
	truncated := 0
	for cut := 1; cut <= ops+1; cut++ {
		for _, mode := range storage.CrashModes {
			dir := t.TempDir()
			fs := storage.NewMemFS()
			srv := setup(dir, fs)
			fs.CutAfter(cut)
			srv.TruncateKeepingCut(ctx, "m", 0, to, "") // fails at the cut
			crashed := fs.Crash(mode, rng)
			shutdown(srv)
			srv2 := open(dir, crashed)
			l, err := partitionLog(srv2.cluster.topic("m").Partition(0))
			if err != nil {
				t.Fatalf("cut %d/%d %v: %v", cut, ops, mode, err)
			}
			switch l.LogEndOffset() {
			case oldEnd:
			case to:
				truncated++
				kt := srv2.cluster.topic("m.truncated")
				if kt == nil {
					t.Fatalf("cut %d/%d %v: truncated, and the keep topic is gone", cut, ops, mode)
				}
				kept := storedBatches(t, kt.Partition(0), to)
				if len(kept) != len(sets)-2 {
					t.Fatalf("cut %d/%d %v: truncated, %d of %d batches kept", cut, ops, mode, len(kept), len(sets)-2)
				}
				for i, k := range kept {
					if !bytes.Equal(k, sets[2+i]) || kbatch.BaseOffset(k) != kbatch.BaseOffset(sets[2+i]) {
						t.Fatalf("cut %d/%d %v: kept batch %d differs", cut, ops, mode, i)
					}
				}
			default:
				t.Fatalf("cut %d/%d %v: log end %d, neither the old %d nor the cut %d", cut, ops, mode, l.LogEndOffset(), oldEnd, to)
			}
			// Doing it again completes it.
			if res, err := srv2.TruncateKeepingCut(ctx, "m", 0, to, ""); err != nil || l.LogEndOffset() != to {
				t.Fatalf("cut %d/%d %v: repeating the truncation: %+v %v", cut, ops, mode, res, err)
			}
			shutdown(srv2)
		}
	}
	if truncated == 0 {
		t.Fatal("no crash left the truncated log: the cut points miss the truncation")
	}
}
