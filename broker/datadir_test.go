package broker

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func quietConfig(dir string) Config {
	return Config{DataDir: dir, NodeID: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// usedDataDir is a data dir that a broker (node 1) has opened, and so
// formatted, and shut down.
func usedDataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(quietConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Shutdown(ctxT(t))
	return dir
}

func TestDataDirLockRefusesSecondBroker(t *testing.T) {
	dir := t.TempDir()
	s1, err := Open(quietConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(quietConfig(dir))
	if !errors.Is(err, ErrDataDirLocked) {
		t.Fatalf("second Open: %v, want ErrDataDirLocked", err)
	}
	if !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("error does not name the holder pid: %v", err)
	}
	if err := s1.Shutdown(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	// Released: a new broker may open it.
	s2, err := Open(quietConfig(dir))
	if err != nil {
		t.Fatalf("Open after release: %v", err)
	}
	_ = s2.Shutdown(ctxT(t))
}

func TestDataDirFormatVersion(t *testing.T) {
	dir := usedDataDir(t)
	got, err := os.ReadFile(filepath.Join(dir, formatFileName))
	if err != nil || strings.TrimSpace(string(got)) != "1" {
		t.Fatalf("format file: %q %v", got, err)
	}
	for _, tc := range []struct{ content, msg string }{
		{"2\n", "says version 2"},
		{"banana\n", "not a version number"},
	} {
		if err := os.WriteFile(filepath.Join(dir, formatFileName), []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(quietConfig(dir))
		if !errors.Is(err, ErrDataDirFormat) || !strings.Contains(err.Error(), tc.msg) {
			t.Fatalf("format %q: %v", tc.content, err)
		}
	}
}

func TestDataDirForeignContentRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "something"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(quietConfig(dir))
	if !errors.Is(err, ErrDataDirFormat) || !strings.Contains(err.Error(), "not written by verbatim") {
		t.Fatalf("foreign dir: %v", err)
	}
}

func TestDataDirNodeIDMismatch(t *testing.T) {
	dir := usedDataDir(t)
	cfg := quietConfig(dir)
	cfg.NodeID = 7
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "node.id 1") {
		t.Fatalf("node id mismatch: %v", err)
	}
}

func TestCorruptTopicMetadataRefused(t *testing.T) {
	dir := usedDataDir(t)
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(topicsFile)), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(quietConfig(dir)); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("corrupt metadata: %v", err)
	}
}

func TestProducerIDsNeverRepeat(t *testing.T) {
	dir := t.TempDir()
	fsys := newDirFS(dir)
	if err := fsys.MkdirAll(metaDirName, 0o755); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for round := range 3 {
		p, err := openProducerIDs(fsys)
		if err != nil {
			t.Fatal(err)
		}
		// Use a few ids, then "crash" (drop the allocator without any
		// shutdown step) and reopen.
		for range 5 + round*producerIDBlock {
			id, err := p.allocate()
			if err != nil {
				t.Fatal(err)
			}
			if seen[id] {
				t.Fatalf("round %d: id %d handed out twice", round, id)
			}
			seen[id] = true
		}
	}
}

func TestHalfWrittenMetadataTempFileIgnored(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir, nil)
	if r, _ := b.admin().CreateTopic(ctxT(t), 1, 1, nil, "kept"); r.Err != nil {
		t.Fatal(r.Err)
	}
	b.stop()
	// A crash between writing the temporary file and renaming it leaves
	// this behind; the committed file is the truth.
	tmp := filepath.Join(dir, filepath.FromSlash(topicsFile)+".tmp")
	if err := os.WriteFile(tmp, []byte(`{"version":1,"topics":[{"name":"half`), 0o644); err != nil {
		t.Fatal(err)
	}
	b2 := startBroker(t, dir, nil)
	if b2.srv.Topic("kept") == nil || b2.srv.cluster.topicCount() != 1 {
		t.Fatal("committed metadata not recovered")
	}
	// The next change overwrites the leftover.
	if r, _ := b2.admin().CreateTopic(ctxT(t), 1, 1, nil, "next"); r.Err != nil {
		t.Fatal(r.Err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("temporary file left after a successful write: %v", err)
	}
}
