package broker

import (
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sessReq is a fetch request of the given version carrying only session
// metadata.
func sessReq(version int16, id, epoch int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.SessionID, req.SessionEpoch = id, epoch
	return req
}

// openSession creates a session in c and answers its first response, so
// the next expected epoch is 1.
func openSession(t *testing.T, c *fetchSessionCache, version int16, now time.Time) *fetchSession {
	t.Helper()
	plan := c.begin(sessReq(version, 0, 0), now)
	if plan.sess == nil || !plan.newSession || plan.errCode != 0 {
		t.Fatalf("session not created: %+v", plan)
	}
	c.end(plan.sess, true)
	return plan.sess
}

// Every (session id, epoch) case of Kafka's FetchManager.newContext.
func TestFetchSessionMetadataCases(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, c := range []struct {
		name string
		// id: the request's session id; known replaces it with an
		// existing session's id.
		id      int32
		known   bool
		epoch   int32
		version int16
		// want
		code       int16
		session    bool // the fetch runs in a session
		newSession bool
		keepsOld   bool // the existing session is still cached
	}{
		{name: "no session, FINAL: sessionless", id: 0, epoch: -1, version: 12, keepsOld: true},
		{name: "unknown id, FINAL: sessionless, no error", id: 777, epoch: -1, version: 12, keepsOld: true},
		{name: "id -1, FINAL (kafka-go): sessionless, no error", id: -1, epoch: -1, version: 12, keepsOld: true},
		{name: "known id, FINAL: closed, sessionless", known: true, epoch: -1, version: 12},
		{name: "no session, INITIAL: new session", id: 0, epoch: 0, version: 12, session: true, newSession: true, keepsOld: true},
		{name: "unknown id, INITIAL: new session", id: 777, epoch: 0, version: 12, session: true, newSession: true, keepsOld: true},
		{name: "known id, INITIAL: closed, new session", known: true, epoch: 0, version: 12, session: true, newSession: true},
		{name: "known id, expected epoch: incremental", known: true, epoch: 1, version: 12, session: true, keepsOld: true},
		{name: "known id, other epoch", known: true, epoch: 5, version: 12, code: kerr.InvalidFetchSessionEpoch.Code, keepsOld: true},
		{name: "known id, epoch below -1", known: true, epoch: -2, version: 12, code: kerr.InvalidFetchSessionEpoch.Code, keepsOld: true},
		{name: "unknown id, incremental", id: 777, epoch: 1, version: 12, code: kerr.FetchSessionIDNotFound.Code, keepsOld: true},
		{name: "unknown id, epoch below -1", id: 777, epoch: -2, version: 12, code: kerr.FetchSessionIDNotFound.Code, keepsOld: true},
		{name: "id 0, incremental", id: 0, epoch: 1, version: 12, code: kerr.FetchSessionIDNotFound.Code, keepsOld: true},
		{name: "names session with topic ids", known: true, epoch: 1, version: 13, code: kerr.FetchSessionTopicIDError.Code, keepsOld: true},
		{name: "below v7: always sessionless", known: true, epoch: 1, version: 6, keepsOld: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cache fetchSessionCache
			old := openSession(t, &cache, 12, now)
			id := c.id
			if c.known {
				id = old.id
			}
			plan := cache.begin(sessReq(c.version, id, c.epoch), now)
			if plan.errCode != c.code || (plan.sess != nil) != c.session || plan.newSession != c.newSession {
				t.Fatalf("plan: code %d session %v new %v; want code %d session %v new %v",
					plan.errCode, plan.sess != nil, plan.newSession, c.code, c.session, c.newSession)
			}
			if c.newSession && plan.sess.id == old.id {
				t.Fatalf("new session reuses the closed id %d", old.id)
			}
			if got := cache.sessions[old.id] == old; got != c.keepsOld {
				t.Fatalf("existing session cached: %v, want %v", got, c.keepsOld)
			}
		})
	}
}

// A session error leaves the session as it was: the right request
// afterwards is served (Kafka removes a session only on a full fetch
// naming it, on eviction, or when it empties).
func TestFetchSessionErrorKeepsSession(t *testing.T) {
	var c fetchSessionCache
	now := time.Unix(1000, 0)
	s := openSession(t, &c, 12, now)
	for _, req := range []*kmsg.FetchRequest{sessReq(13, s.id, 1), sessReq(12, s.id, 2), sessReq(12, s.id, -2)} {
		if plan := c.begin(req, now); plan.errCode == 0 {
			t.Fatalf("v%d epoch %d: no error", req.Version, req.SessionEpoch)
		}
	}
	serveIncremental(t, &c, s, 1, 2, func() {
		// The same epoch again while the first is being answered.
		if dup := c.begin(sessReq(12, s.id, 1), now); dup.errCode != kerr.InvalidFetchSessionEpoch.Code {
			t.Fatalf("concurrent duplicate: %d", dup.errCode)
		}
	})
}

// serveIncremental runs one incremental fetch of s at epoch (during, if
// not nil, while it is being answered) and checks the next epoch.
func serveIncremental(t *testing.T, c *fetchSessionCache, s *fetchSession, epoch, next int32, during func()) {
	t.Helper()
	plan := c.begin(sessReq(12, s.id, epoch), time.Unix(1000, 0))
	if plan.errCode != 0 || plan.sess != s {
		t.Fatalf("incremental fetch at epoch %d: %+v", epoch, plan)
	}
	if during != nil {
		during()
	}
	c.end(s, true)
	if s.epoch != next {
		t.Fatalf("epoch after %d: %d, want %d", epoch, s.epoch, next)
	}
}

// The epoch after the largest int32 is 1 (FetchMetadata.nextEpoch).
func TestFetchSessionEpochWraps(t *testing.T) {
	var c fetchSessionCache
	s := openSession(t, &c, 12, time.Unix(1000, 0))
	s.epoch = math.MaxInt32
	serveIncremental(t, &c, s, math.MaxInt32, 1, nil)
}

// A full fetch ending one session does not drop a session that took its
// place: end(ok=false) of the old one leaves the new one cached.
func TestFetchSessionEndDropsOnlyItself(t *testing.T) {
	var c fetchSessionCache
	now := time.Unix(1000, 0)
	s := openSession(t, &c, 12, now)
	plan := c.begin(sessReq(12, s.id, 1), now)
	if plan.sess != s {
		t.Fatalf("%+v", plan)
	}
	c.begin(sessReq(12, s.id, -1), now) // closes s while in use
	other := &fetchSession{id: s.id}
	c.sessions[s.id] = other
	c.end(s, false)
	if c.sessions[s.id] != other {
		t.Fatal("ending a closed session dropped its successor")
	}
}

// Through the wire: the fetch kafka-go's Client.Fetch sends (session id
// -1, epoch -1) reads records; an incremental fetch that forgets every
// partition closes its session and is answered sessionless; a partition
// both named and forgotten is forgotten.
func TestFetchSessionsKafkaCases(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "fs", 2, nil)
	for p := int32(0); p < 2; p++ {
		if r := produceOne(t, b, 9, "fs", p, encodeBatch(t, 0, -1, -1, []byte("v"))); r.ErrorCode != 0 {
			t.Fatal(r.ErrorCode)
		}
	}
	type part struct {
		p      int32
		off    int64
		forget bool
	}
	fetch := func(id, epoch int32, parts ...part) *kmsg.FetchResponse {
		req := sessReq(12, id, epoch)
		req.ReplicaID = -1
		req.MaxBytes = 1 << 20
		rt, ft := kmsg.NewFetchRequestTopic(), kmsg.NewFetchRequestForgottenTopic()
		rt.Topic, ft.Topic = "fs", "fs"
		for _, p := range parts {
			if p.forget {
				ft.Partitions = append(ft.Partitions, p.p)
				continue
			}
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p.p, p.off, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(rt.Partitions) > 0 {
			req.Topics = append(req.Topics, rt)
		}
		if len(ft.Partitions) > 0 {
			req.ForgottenTopics = append(req.ForgottenTopics, ft)
		}
		return rawRequest[*kmsg.FetchResponse](t, b, req)
	}
	listed := func(r *kmsg.FetchResponse) map[int32]int {
		m := map[int32]int{}
		for _, tp := range r.Topics {
			for _, p := range tp.Partitions {
				m[p.Partition] = len(p.RecordBatches)
			}
		}
		return m
	}

	r := fetch(-1, -1, part{p: 0})
	if r.ErrorCode != 0 || r.SessionID != 0 || listed(r)[0] == 0 {
		t.Fatalf("kafka-go full fetch (id -1, epoch -1): err %d id %d partitions %v", r.ErrorCode, r.SessionID, listed(r))
	}

	// A session on both partitions, at their log ends; forgetting p0
	// while naming it drops p0.
	full := fetch(0, 0, part{p: 0, off: 1}, part{p: 1, off: 1})
	id := full.SessionID
	if full.ErrorCode != 0 || id == 0 || len(listed(full)) != 2 {
		t.Fatalf("session creation: %+v", full)
	}
	r = fetch(id, 1, part{p: 0, off: 1}, part{p: 0, forget: true})
	if r.ErrorCode != 0 || r.SessionID != id {
		t.Fatalf("named and forgotten: err %d id %d", r.ErrorCode, r.SessionID)
	}
	if got := listed(r); len(got) != 0 {
		t.Fatalf("named and forgotten: listed %v, want nothing (p0 forgotten, p1 unchanged)", got)
	}
	if r := produceOne(t, b, 9, "fs", 0, encodeBatch(t, 0, -1, -1, []byte("w"))); r.ErrorCode != 0 {
		t.Fatal(r.ErrorCode)
	}
	if got := listed(fetch(id, 2)); len(got) != 0 {
		t.Fatalf("an append to a forgotten partition is listed: %v", got)
	}

	// Forgetting the last partition closes the session: answered
	// sessionless (id 0, no partition), and the id is gone afterwards.
	r = fetch(id, 3, part{p: 1, forget: true})
	if r.ErrorCode != 0 || r.SessionID != 0 || len(listed(r)) != 0 {
		t.Fatalf("emptied session: err %d id %d partitions %v", r.ErrorCode, r.SessionID, listed(r))
	}
	if r := fetch(id, 4); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("emptied session still known: %d", r.ErrorCode)
	}
	// Session errors answer with id 0 and no partition.
	if r := fetch(id, 4, part{p: 0}); r.ErrorCode != kerr.FetchSessionIDNotFound.Code || r.SessionID != 0 || len(r.Topics) != 0 {
		t.Fatalf("session error response: %+v", r)
	}
}
