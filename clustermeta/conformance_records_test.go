package clustermeta_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// The record space's behaviours (Store.PutRecord, DeleteRecord), run by
// TestConformance against both stores.

func mustPut(t *testing.T, st clustermeta.Store, f clustermeta.Fence, kind, name, value string, expect int64) int64 {
	t.Helper()
	v, err := st.PutRecord(ctxT(t), f, kind, name, []byte(value), expect)
	if err != nil {
		t.Fatalf("PutRecord %s/%s: %v", kind, name, err)
	}
	return v
}

// del is DeleteRecord's error.
func del(st clustermeta.Store, f clustermeta.Fence, kind, name string, expect int64) error {
	_, err := st.DeleteRecord(context.Background(), f, kind, name, expect)
	return err
}

func wantRecord(t *testing.T, s *clustermeta.Snapshot, kind, name, value string, version int64) {
	t.Helper()
	r, ok := s.Record(kind, name)
	if !ok || string(r.Value) != value || r.Version != version {
		t.Fatalf("record %s/%s: %q v%d (%v), want %q v%d", kind, name, r.Value, r.Version, ok, value, version)
	}
}

var recordBehaviours = []struct {
	name string
	run  func(t *testing.T, h harness)
}{
	{"records: create, compare-and-swap, delete", func(t *testing.T, h harness) {
		none := clustermeta.Fence{}
		v1 := mustPut(t, h.st, none, "acl", "a", "one", clustermeta.MustNotExist)
		_, err := h.st.PutRecord(ctxT(t), none, "acl", "a", []byte("dup"), clustermeta.MustNotExist)
		wantErr(t, err, clustermeta.ErrConflict, "second create")
		v2 := mustPut(t, h.st, none, "acl", "a", "two", v1)
		if v2 <= v1 {
			t.Fatalf("version %d after %d", v2, v1)
		}
		_, err = h.st.PutRecord(ctxT(t), none, "acl", "a", []byte("stale"), v1)
		wantErr(t, err, clustermeta.ErrConflict, "stale put")
		s := snap(t, h.st)
		wantRecord(t, s, "acl", "a", "two", v2)
		if s.Revision < v2 {
			t.Fatalf("snapshot revision %d < write %d", s.Revision, v2)
		}
		v3 := mustPut(t, h.st, none, "acl", "a", "three", clustermeta.AnyVersion)
		wantErr(t, del(h.st, none, "acl", "a", v2), clustermeta.ErrConflict, "stale delete")
		dv, err := h.st.DeleteRecord(ctxT(t), none, "acl", "a", v3)
		if err != nil {
			t.Fatal(err)
		}
		if dv <= v3 {
			t.Fatalf("deleted at revision %d after version %d", dv, v3)
		}
		if s := snap(t, h.st); s.Revision < dv {
			t.Fatalf("snapshot revision %d < deletion %d", s.Revision, dv)
		}
		wantErr(t, del(h.st, none, "acl", "a", clustermeta.AnyVersion), clustermeta.ErrNotFound, "delete of a missing record")
		wantErr(t, del(h.st, none, "acl", "a", v3), clustermeta.ErrConflict, "delete at a version of a deleted record")
		_, err = h.st.PutRecord(ctxT(t), none, "acl", "a", []byte("back"), v3)
		wantErr(t, err, clustermeta.ErrConflict, "put at a version of a deleted record")
		if s := snap(t, h.st); len(s.Records) != 0 {
			t.Fatalf("records left: %v", s.Records)
		}
		v4 := mustPut(t, h.st, none, "acl", "a", "", clustermeta.MustNotExist)
		wantRecord(t, snap(t, h.st), "acl", "a", "", v4)
		if _, err := h.st.DeleteRecord(ctxT(t), none, "acl", "a", clustermeta.AnyVersion); err != nil {
			t.Fatal(err)
		}
	}},
	{"records: kinds and names stay apart", func(t *testing.T, h harness) {
		none := clustermeta.Fence{}
		va := mustPut(t, h.st, none, "scram", "SCRAM-SHA-256/al/ice", "x", clustermeta.MustNotExist)
		vb := mustPut(t, h.st, none, "scram", "SCRAM-SHA-256/al", "y", clustermeta.MustNotExist)
		vc := mustPut(t, h.st, none, "mirror", "SCRAM-SHA-256/al", "z", clustermeta.MustNotExist)
		// A record of a kind whose name prefixes another kind's.
		vd := mustPut(t, h.st, none, "mirro", "r", "w", clustermeta.MustNotExist)
		tr, _ := mustCreate(t, h.st, "beside", 1)
		s := snap(t, h.st)
		wantRecord(t, s, "scram", "SCRAM-SHA-256/al/ice", "x", va)
		wantRecord(t, s, "scram", "SCRAM-SHA-256/al", "y", vb)
		wantRecord(t, s, "mirror", "SCRAM-SHA-256/al", "z", vc)
		wantRecord(t, s, "mirro", "r", "w", vd)
		if len(s.Records) != 3 || len(s.Records["scram"]) != 2 || len(s.Corrupt) != 0 {
			t.Fatalf("records %v, corrupt %v", s.Records, s.Corrupt)
		}
		if err := h.st.DeleteTopic(ctxT(t), "beside", tr.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := h.st.DeleteRecord(ctxT(t), none, "scram", "SCRAM-SHA-256/al", vb); err != nil {
			t.Fatal(err)
		}
		s = snap(t, h.st)
		wantRecord(t, s, "scram", "SCRAM-SHA-256/al/ice", "x", va)
		if _, ok := s.Record("scram", "SCRAM-SHA-256/al"); ok || len(s.Records) != 3 {
			t.Fatalf("records %v", s.Records)
		}
	}},
	{"records: bad arguments refused, nothing written", func(t *testing.T, h harness) {
		none := clustermeta.Fence{}
		for _, c := range []struct {
			kind, name string
			expect     int64
		}{{"", "n", clustermeta.AnyVersion}, {"a/b", "n", clustermeta.AnyVersion}, {"acl", "", clustermeta.AnyVersion}, {"acl", "n", -2}} {
			if _, err := h.st.PutRecord(ctxT(t), none, c.kind, c.name, []byte("v"), c.expect); err == nil {
				t.Fatalf("put %+v accepted", c)
			}
			if _, err := h.st.DeleteRecord(ctxT(t), none, c.kind, c.name, c.expect); err == nil {
				t.Fatalf("delete %+v accepted", c)
			}
		}
		if _, err := h.st.DeleteRecord(ctxT(t), none, "acl", "n", clustermeta.MustNotExist); err == nil || errors.Is(err, clustermeta.ErrNotFound) {
			t.Fatalf("delete expecting no record: %v", err)
		}
		if s := snap(t, h.st); len(s.Records) != 0 {
			t.Fatalf("records %v", s.Records)
		}
	}},
	{"records fenced by a session", func(t *testing.T, h harness) {
		sess := mustRegister(t, h.st, 1)
		v := mustPut(t, h.st, sess.Fence(), "link", "l", "on", clustermeta.MustNotExist)
		h.expire(1)
		waitClosed(t, sess.Done(), "session Done after expiry")
		_, err := h.st.PutRecord(ctxT(t), sess.Fence(), "link", "l", []byte("off"), v)
		wantErr(t, err, clustermeta.ErrFenced, "put on an expired session")
		_, err = h.st.PutRecord(ctxT(t), sess.Fence(), "link", "l", []byte("off"), v-1)
		wantErr(t, err, clustermeta.ErrFenced, "fenced stale put")
		wantErr(t, del(h.st, sess.Fence(), "link", "l", clustermeta.AnyVersion), clustermeta.ErrFenced, "delete on an expired session")
		again := mustRegister(t, h.st, 1)
		_, err = h.st.PutRecord(ctxT(t), again.Fence(), "link", "l", []byte("off"), v-1)
		wantErr(t, err, clustermeta.ErrConflict, "stale put on a live fence")
		wantRecord(t, snap(t, h.st), "link", "l", "on", v)
		if _, err := h.st.DeleteRecord(ctxT(t), again.Fence(), "link", "l", v); err != nil {
			t.Fatal(err)
		}
	}},
	{"records in the watch, immutable snapshots", func(t *testing.T, h harness) {
		none := clustermeta.Fence{}
		w := h.st.Watch(ctxT(t))
		va := mustPut(t, h.st, none, "acl", "x", "1", clustermeta.MustNotExist)
		first := waitFor(t, w, "acl/x", func(s *clustermeta.Snapshot) bool { _, ok := s.Record("acl", "x"); return ok })
		vb := mustPut(t, h.st, none, "acl", "y", "2", clustermeta.MustNotExist)
		second := waitFor(t, w, "acl/y", func(s *clustermeta.Snapshot) bool { _, ok := s.Record("acl", "y"); return ok })
		if _, err := h.st.DeleteRecord(ctxT(t), none, "acl", "x", va); err != nil {
			t.Fatal(err)
		}
		third := waitFor(t, w, "acl/x gone", func(s *clustermeta.Snapshot) bool { _, ok := s.Record("acl", "x"); return !ok })
		if _, err := h.st.DeleteRecord(ctxT(t), none, "acl", "y", vb); err != nil {
			t.Fatal(err)
		}
		fourth := waitFor(t, w, "no acls", func(s *clustermeta.Snapshot) bool { return len(s.Records) == 0 })
		if _, ok := first.Record("acl", "y"); ok || len(first.Records["acl"]) != 1 {
			t.Fatalf("the first snapshot changed: %v", first.Records)
		}
		wantRecord(t, second, "acl", "x", "1", va)
		wantRecord(t, third, "acl", "y", "2", vb)
		if len(third.Records["acl"]) != 1 || len(fourth.Records) != 0 {
			t.Fatalf("third %v, fourth %v", third.Records, fourth.Records)
		}
	}},
	{"records: concurrent read-modify-write and creation, no update lost", func(t *testing.T, h harness) {
		none := clustermeta.Fence{}
		mustPut(t, h.st, none, "counter", "n", "0", clustermeta.MustNotExist)
		const writers, rounds = 4, 8
		var created atomic.Int32
		racers(t, writers, 1, func(g int) error {
			_, err := h.st.PutRecord(ctxT(t), none, "counter", "once", []byte(strconv.Itoa(g)), clustermeta.MustNotExist)
			if err == nil {
				created.Add(1)
			} else if errors.Is(err, clustermeta.ErrConflict) {
				return nil // another goroutine created it: this one's round is done
			}
			return err
		})
		racers(t, writers, rounds, func(int) error {
			s, err := h.st.Snapshot(ctxT(t))
			if err != nil {
				return err
			}
			r, _ := s.Record("counter", "n")
			n, _ := strconv.Atoi(string(r.Value))
			_, err = h.st.PutRecord(ctxT(t), none, "counter", "n", []byte(strconv.Itoa(n+1)), r.Version)
			return err
		})
		r, _ := snap(t, h.st).Record("counter", "n")
		if string(r.Value) != strconv.Itoa(writers*rounds) || created.Load() != 1 {
			t.Fatalf("counter %s after %d increments, %d creations of one record", r.Value, writers*rounds, created.Load())
		}
	}},
}

func init() { behaviours = append(behaviours, recordBehaviours...) }
