package client

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sessionSource is a kfake cluster with topic t (3 partitions) holding n
// records in partition 0 and 1, none in 2, and a log of the Fetch
// requests it served.
type sessionSource struct {
	c    *kfake.Cluster
	addr string
	id   [16]byte
	mu   sync.Mutex
	reqs []*kmsg.FetchRequest
}

func startSessionSource(t *testing.T, n int) *sessionSource {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s := &sessionSource{c: c, addr: c.ListenAddrs()[0]}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < n; i++ {
		for p := int32(0); p < 2; p++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: p, Value: []byte{byte(i)}}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.id = c.TopicInfo("t").TopicID
	c.ControlKey(kmsg.Fetch.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		s.mu.Lock()
		s.reqs = append(s.reqs, r.(*kmsg.FetchRequest))
		s.mu.Unlock()
		return nil, nil, false
	})
	return s
}

// dial connects to the source for the test's session.
func (s *sessionSource) dial(t *testing.T) (context.Context, *Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	cn, err := Dial(ctx, s.addr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cn.Close)
	return ctx, cn
}

func (s *sessionSource) last() *kmsg.FetchRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reqs[len(s.reqs)-1]
}

func part(id [16]byte, p int32, off int64) SessionPartition {
	return SessionPartition{TopicPartition: TopicPartition{"t", p}, TopicID: id, Offset: off, MaxBytes: 1 << 20, CurrentEpoch: -1, LastFetchedEpoch: -1}
}

func answersByPartition(t *testing.T, r SessionResponse) map[int32]FetchResult {
	t.Helper()
	out := map[int32]FetchResult{}
	for _, a := range r.Answers {
		if _, dup := out[a.Partition]; dup {
			t.Fatalf("partition %d answered twice", a.Partition)
		}
		out[a.Partition] = a.FetchResult
	}
	return out
}

func requested(r *kmsg.FetchRequest) (parts map[int32]int64, forgotten []int32) {
	parts = map[int32]int64{}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			parts[p.Partition] = p.FetchOffset
		}
	}
	for _, f := range r.ForgottenTopics {
		forgotten = append(forgotten, f.Partitions...)
	}
	return parts, forgotten
}

// TestFetchSessionIncremental: the first request is full, later ones carry
// only what changed, partitions no longer wanted are forgotten, topic ids
// are used (v13+), and the answers are the partitions' records.
func TestFetchSessionIncremental(t *testing.T) {
	for _, ids := range []bool{true, false} {
		src := startSessionSource(t, 3)
		ctx, cn := src.dial(t)
		id := src.id
		if !ids {
			id = [16]byte{}
		}
		s := NewFetchSession(cn)
		o := SessionOptions{MaxWaitMs: 10, MinBytes: 1, MaxBytes: 1 << 20}
		r, err := s.Fetch(ctx, []SessionPartition{part(id, 0, 0), part(id, 1, 0), part(id, 2, 0)}, o)
		if err != nil {
			t.Fatal(err)
		}
		req := src.last()
		if !r.Full || req.SessionEpoch != 0 || s.ID() == 0 {
			t.Fatalf("first request: full %v epoch %d session id %d", r.Full, req.SessionEpoch, s.ID())
		}
		if (req.Version >= 13) != ids {
			t.Fatalf("ids %v but Fetch v%d", ids, req.Version)
		}
		got := answersByPartition(t, r)
		for p := int32(0); p < 2; p++ {
			if a := got[p]; a.Err != nil || a.HighWatermark != 3 || len(a.Records) == 0 {
				t.Fatalf("partition %d: %+v", p, a)
			}
		}
		// Partition 0 moves on, 1 is no longer wanted, 2 is unchanged.
		r, err = s.Fetch(ctx, []SessionPartition{part(id, 0, 3), part(id, 2, 0)}, o)
		if err != nil {
			t.Fatal(err)
		}
		req = src.last()
		parts, forgotten := requested(req)
		if r.Full || req.SessionID != s.ID() || req.SessionEpoch != 1 || len(parts) != 1 || parts[0] != 3 || len(forgotten) != 1 || forgotten[0] != 1 {
			t.Fatalf("incremental request: full %v session %d epoch %d parts %v forgotten %v", r.Full, req.SessionID, req.SessionEpoch, parts, forgotten)
		}
		if (len(req.ForgottenTopics) == 1 && req.ForgottenTopics[0].TopicID != id) || (req.Version >= 13) != ids {
			t.Fatalf("forgotten topic id %x, version %d", req.ForgottenTopics[0].TopicID, req.Version)
		}
		for _, a := range r.Answers {
			if len(a.Records) != 0 || a.Partition == 1 {
				t.Fatalf("answer with nothing new: %+v", a)
			}
		}
		// Re-adding partition 1 sends it alone.
		_, err = s.Fetch(ctx, []SessionPartition{part(id, 0, 3), part(id, 1, 2), part(id, 2, 0)}, o)
		if err != nil {
			t.Fatal(err)
		}
		parts, forgotten = requested(src.last())
		if len(parts) != 1 || parts[1] != 2 || len(forgotten) != 0 || src.last().SessionEpoch != 2 {
			t.Fatalf("re-add: parts %v forgotten %v", parts, forgotten)
		}
	}
}

// TestFetchSessionReset: a session error answer makes the session resend
// the request in full at once, and the caller sees only the data.
func TestFetchSessionReset(t *testing.T) {
	for _, code := range []int16{kerr.FetchSessionIDNotFound.Code, kerr.InvalidFetchSessionEpoch.Code} {
		src := startSessionSource(t, 2)
		ctx, cn := src.dial(t)
		s := NewFetchSession(cn)
		o := SessionOptions{MaxWaitMs: 10, MinBytes: 1, MaxBytes: 1 << 20}
		if _, err := s.Fetch(ctx, []SessionPartition{part(src.id, 0, 0), part(src.id, 1, 0)}, o); err != nil {
			t.Fatal(err)
		}
		first := s.ID()
		src.c.ControlKey(kmsg.Fetch.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
			resp := r.ResponseKind().(*kmsg.FetchResponse)
			resp.ErrorCode = code
			return resp, nil, true
		})
		r, err := s.Fetch(ctx, []SessionPartition{part(src.id, 0, 1), part(src.id, 1, 0)}, o)
		if err != nil {
			t.Fatal(err)
		}
		req := src.last()
		parts, _ := requested(req)
		if !r.Full || req.SessionEpoch != 0 || req.SessionID != 0 || len(parts) != 2 || parts[0] != 1 || s.ID() == 0 || s.ID() == first {
			t.Fatalf("after %s: full %v request session %d epoch %d parts %v, session %d (was %d)", kerr.ErrorForCode(code), r.Full, req.SessionID, req.SessionEpoch, parts, s.ID(), first)
		}
		got := answersByPartition(t, r)
		if a := got[1]; a.HighWatermark != 2 || len(a.Records) == 0 {
			t.Fatalf("partition 1 after the reset: %+v", a)
		}
	}
}

// TestFetchSessionErrors: partition errors reach their partition only; a
// top-level error is the request's and resets the session; a dead
// connection fails the request.
func TestFetchSessionErrors(t *testing.T) {
	src := startSessionSource(t, 2)
	ctx, cn := src.dial(t)
	s := NewFetchSession(cn)
	o := SessionOptions{MaxWaitMs: 10, MinBytes: 1, MaxBytes: 1 << 20}
	r, err := s.Fetch(ctx, []SessionPartition{part(src.id, 0, 99), part(src.id, 1, 0)}, o)
	if err != nil {
		t.Fatal(err)
	}
	got := answersByPartition(t, r)
	if !errorsIs(got[0].Err, kerr.OffsetOutOfRange) || got[1].Err != nil || len(got[1].Records) == 0 {
		t.Fatalf("answers %+v", got)
	}
	src.c.ControlKey(kmsg.Fetch.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		resp := r.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil, true
	})
	if _, err := s.Fetch(ctx, []SessionPartition{part(src.id, 1, 2)}, o); !errorsIs(err, kerr.ClusterAuthorizationFailed) || s.ID() != 0 {
		t.Fatalf("top-level error: %v, session %d", err, s.ID())
	}
	cn.Close()
	if _, err := s.Fetch(ctx, []SessionPartition{part(src.id, 1, 2)}, o); err == nil || !Transient(err) {
		t.Fatalf("closed connection: %v", err)
	}
}

func errorsIs(err, target error) bool { return err != nil && errors.Is(err, target) }

// TestFetchSessionFollower: a follower's session fetch carries its replica
// id and broker epoch in ReplicaState from v15 and in ReplicaID before (as
// they go on the wire); without Follower the fetch is a consumer's.
func TestFetchSessionFollower(t *testing.T) {
	id := [16]byte{1, 2, 3}
	for _, c := range []struct {
		v                 int16
		follower          bool
		wantID            int32
		wantState, wantEp int64
	}{
		{12, true, 3, -1, -1},
		{14, true, 3, -1, -1},
		{15, true, -1, 3, 77},
		{17, true, -1, 3, 77},
		{14, false, -1, -1, -1},
		{17, false, -1, -1, -1},
	} {
		s := NewFetchSession(&Conn{addr: "test", versions: map[int16]int16{kmsg.Fetch.Int16(): c.v}})
		sp := part(id, 0, 0)
		sp.LogStart = 5
		req, _, err := s.build([]SessionPartition{sp}, SessionOptions{MaxBytes: 1 << 20, Follower: c.follower, ReplicaID: 3, ReplicaEpoch: 77})
		if err != nil {
			t.Fatal(err)
		}
		// What the broker reads: the request encoded and decoded at v.
		got := kmsg.NewPtrFetchRequest()
		got.Version = req.Version
		if err := got.ReadFrom(req.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
		if got.Version != c.v || got.ReplicaID != c.wantID || int64(got.ReplicaState.ID) != c.wantState || got.ReplicaState.Epoch != c.wantEp {
			t.Errorf("v%d follower %v: replica id %d, state %d/%d; want %d, %d/%d", c.v, c.follower, got.ReplicaID, got.ReplicaState.ID, got.ReplicaState.Epoch, c.wantID, c.wantState, c.wantEp)
		}
		// A follower's own log start goes in LogStartOffset; a consumer
		// sends -1.
		wantStart := int64(-1)
		if c.follower {
			wantStart = 5
		}
		if ls := got.Topics[0].Partitions[0].LogStartOffset; ls != wantStart {
			t.Errorf("v%d follower %v: log start offset %d, want %d", c.v, c.follower, ls, wantStart)
		}
	}
}

// TestFetchSessionLogStartChangeIsSent: in an incremental fetch, a
// partition whose follower log start moved is sent again (the leader
// learns it), one that did not move is not.
func TestFetchSessionLogStartChangeIsSent(t *testing.T) {
	id := [16]byte{1, 2, 3}
	s := NewFetchSession(&Conn{addr: "test", versions: map[int16]int16{kmsg.Fetch.Int16(): 17}})
	a, b := part(id, 0, 10), part(id, 1, 10)
	a.LogStart, b.LogStart = 2, 2
	s.id, s.epoch, s.version = 9, 1, 17
	s.held[a.TopicPartition], s.held[b.TopicPartition] = a, b
	a.LogStart = 4
	req, full, err := s.build([]SessionPartition{a, b}, SessionOptions{MaxBytes: 1 << 20, Follower: true, ReplicaID: 3})
	if err != nil || full {
		t.Fatalf("full %v err %v", full, err)
	}
	if len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 {
		t.Fatalf("incremental fetch sent %+v, want partition 0 only", req.Topics)
	}
	if rp := req.Topics[0].Partitions[0]; rp.Partition != 0 || rp.LogStartOffset != 4 {
		t.Fatalf("sent partition %d log start %d, want 0 at 4", rp.Partition, rp.LogStartOffset)
	}
}
