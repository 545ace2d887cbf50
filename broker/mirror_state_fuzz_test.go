package broker

import (
	"errors"
	"io"
	"log/slog"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// FuzzMirrorState feeds arbitrary bytes as a topic's persisted mirror
// state (mirror_state.go): loading never panics, a file it accepts has a
// known state and an entry per partition (version-1 writer records
// reset), the writer check on it refuses exactly what admitWriter
// refuses, and a registration assigns and persists the next epoch.
func FuzzMirrorState(f *testing.F) {
	id := addMirrorStateSeeds(f, 1)
	f.Add([]byte(`{"state":"mirroring","topic_id":"0102030405060708090a0b0c0d0e0f10","partitions":null}`))
	f.Add([]byte(`{"state":"other","topic_id":"0102030405060708090a0b0c0d0e0f10"}`))
	f.Add([]byte(`{`))
	f.Add([]byte(`{"state":"mirroring","topic_id":"0102030405060708090a0b0c0d0e0f10","partitions":[{"writer_epoch":-1},{"writer_epoch":100,"writer_id":"80000000000000000000000000000002"}]}`))
	f.Add([]byte(`{"state":"mirroring","topic_id":"0102030405060708090a0b0c0d0e0f10","partitions":[{"writer_epoch":-1},{"writer_epoch":100,"writer_id":"8000"}]}`))
	f.Add([]byte(`{"version":2,"state":"mirroring","topic_id":"0102030405060708090a0b0c0d0e0f10","partitions":[{"writer_epoch":-1},{"writer_epoch":100,"writer_id":"80000000000000000000000000000001"}]}`))
	f.Add([]byte(`{"version":2,"state":"mirroring","topic_id":"0102030405060708090a0b0c0d0e0f10","partitions":[{"writer_epoch":-1},{"writer_epoch":2147483647}]}`))
	f.Add([]byte(`{"version":1,"state":"mirroring","topic_id":"0102030405060708090a0b0c0d0e0f10","partitions":[{"writer_epoch":-1},{"writer_epoch":2147483647}]}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &Server{fs: newDirFS(dir), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		tp := &Topic{Name: "m", ID: id}
		parts := []*Partition{{Topic: tp, Index: 0}, {Topic: tp, Index: 1}}
		tp.parts.Store(&parts)
		if err := s.fs.MkdirAll(mirrorStateDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := writeFileAtomic(s.fs, mirrorStateDir, mirrorStateName(id), data); err != nil {
			t.Fatal(err)
		}
		st, err := s.mirrorStateOf(tp)
		if err != nil {
			if !errors.Is(err, errStorage) {
				t.Fatalf("a bad state file gave %v, want a storage error", err)
			}
			return
		}
		if len(st.Partitions) < len(parts) {
			t.Fatalf("%d partition states for %d partitions", len(st.Partitions), len(parts))
		}
		if st.Version != mirrorStateVersion {
			t.Fatalf("state version %d after loading", st.Version)
		}
		cur := mirrorWriter{Epoch: st.Partitions[1].WriterEpoch, ID: st.Partitions[1].WriterID}
		w := mirrorWriter{Epoch: 100, ID: writerID{0: 0x80, 15: 1}}
		err = s.checkMirrorWriter(parts[1], w)
		switch {
		case st.State != mirrorStateMirroring:
			if !errors.Is(err, kerr.PolicyViolation) {
				t.Fatalf("state %s: %v", st.State, err)
			}
			return
		case cur.Epoch < 0 || cur.Epoch < w.Epoch:
			if !errors.Is(err, kerr.InvalidProducerEpoch) {
				t.Fatalf("writer %v, registered %v: %v", w, cur, err)
			}
		case cur.Epoch > w.Epoch || cur.ID != w.ID:
			if !errors.Is(err, kerr.ProducerFenced) {
				t.Fatalf("writer %v, registered %v: %v", w, cur, err)
			}
		case err != nil:
			t.Fatalf("writer %v, registered %v: %v", w, cur, err)
		}
		// A registration gets the next epoch, persisted; only that
		// writer is admitted afterwards.
		epoch, errs := s.registerMirrorWriters(parts[1:], w.ID)
		if cur.Epoch == math.MaxInt32 {
			if !errors.Is(errs[0], kerr.InvalidProducerEpoch) {
				t.Fatalf("registration after epoch %d: %v", cur.Epoch, errs[0])
			}
			return
		}
		if errs[0] != nil || epoch != max(cur.Epoch, -1)+1 {
			t.Fatalf("registration after %v: epoch %d, %v", cur, epoch, errs[0])
		}
		st2, err := (&Server{fs: s.fs, log: s.log}).mirrorStateOf(tp)
		if err != nil || st2.Partitions[1].WriterEpoch != epoch || st2.Partitions[1].WriterID != w.ID {
			t.Fatalf("persisted writer %d %x (%v)", st2.Partitions[1].WriterEpoch, st2.Partitions[1].WriterID, err)
		}
		if err := s.checkMirrorWriter(parts[1], mirrorWriter{Epoch: epoch, ID: w.ID}); err != nil {
			t.Fatalf("the registered writer: %v", err)
		}
		if err := s.checkMirrorWriter(parts[1], mirrorWriter{Epoch: epoch}); !errors.Is(err, kerr.ProducerFenced) {
			t.Fatalf("its epoch with another id: %v", err)
		}
	})
}
