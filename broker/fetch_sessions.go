package broker

// Incremental fetch sessions (KIP-227), as Kafka's FetchManager.newContext
// and FetchSessionCache resolve (session id, epoch) for consumers:
//
//   - Epoch -1 (FINAL) or 0 (INITIAL) is a full fetch. A non-zero session
//     id names a session to close: it is removed when it exists and
//     ignored when it does not (no error; kafka-go always sends id -1 with
//     epoch -1).
//   - Epoch -1: a sessionless full fetch; the response carries id 0.
//   - Epoch 0: a full fetch that creates a new session; the response
//     carries its id. When the cache is full and no session is idle long
//     enough to evict, the response carries id 0 and the client goes on
//     with full fetches.
//   - Any other epoch (including negative ones below -1) is an incremental
//     fetch of the named session: an unknown id (0 included) gets
//     FETCH_SESSION_ID_NOT_FOUND, an epoch other than the expected one
//     INVALID_FETCH_SESSION_EPOCH, a session created with topic ids used
//     with names or back FETCH_SESSION_TOPIC_ID_ERROR (the session stays).
//     These errors come with an empty response and id 0. Otherwise the
//     request's partitions are added or updated, then ForgottenTopics
//     removes partitions (a partition in both is forgotten); a session
//     left with no partition is removed and the fetch is served
//     sessionless (id 0). Else the response lists only partitions with
//     records, an error, a diverging epoch or a changed high watermark /
//     last stable offset / log start offset since the last response, plus
//     those the request named. The epoch after 2^31-1 is 1.
//
// Sessions are bounded (maxFetchSessions, Kafka's
// max.incremental.fetch.session.cache.slots) and evicted least recently
// used once idle for fetchSessionEvictIdle.

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	maxFetchSessions      = 1000
	fetchSessionEvictIdle = 2 * time.Minute
	fetchSessionAbandoned = 10 * time.Minute
)

// fetchSessionCache holds the sessions of one broker. The zero value is
// ready to use.
type fetchSessionCache struct {
	mu       sync.Mutex
	sessions map[int32]*fetchSession
	nextID   int32
}

// sessKey identifies a partition in a session: by topic id when the
// session uses ids (v13+), else by name.
type sessKey struct {
	name string
	id   [16]byte
	part int32
}

// sessPart is a partition of a session: the fetch parameters last sent by
// the client and what the last response told it.
type sessPart struct {
	key                sessKey
	fetchOffset        int64
	maxBytes           int32
	currentLeaderEpoch int32
	lastFetchedEpoch   int32
	// fetcherLogStart is a follower's own log start as it last sent it
	// (LogStartOffset; -1 from consumers), Kafka's CachedPartition
	// fetcherLogStartOffset: replica_logstart.go.
	fetcherLogStart int64
	// last response's view; -2 = never sent
	hw, lso, logStart int64
}

type fetchSession struct {
	id      int32
	epoch   int32 // the next expected epoch
	usesIDs bool
	parts   map[sessKey]*sessPart
	order   []sessKey // insertion order, for stable responses
	used    time.Time
	inUse   bool
}

// sessionPlan is how a fetch request maps onto the session cache.
type sessionPlan struct {
	sess *fetchSession // nil: sessionless
	// newSession: the response creates sess (full response).
	newSession bool
	// errCode is a top-level session error (the response is empty).
	errCode int16
	// named are the keys the request listed (always answered).
	named map[sessKey]bool
}

// begin resolves the session of req. On success with a session, the
// caller must call end when the response is built.
func (c *fetchSessionCache) begin(req *kmsg.FetchRequest, now time.Time) sessionPlan {
	if req.Version < 7 {
		return sessionPlan{}
	}
	usesIDs := req.Version >= 13
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessions == nil {
		c.sessions = make(map[int32]*fetchSession)
	}
	if req.SessionEpoch == -1 || req.SessionEpoch == 0 {
		// A full fetch: any session it names is closed, known or not.
		if req.SessionID != 0 {
			delete(c.sessions, req.SessionID)
		}
		if req.SessionEpoch == -1 {
			return sessionPlan{}
		}
		id := c.allocateLocked(now)
		if id == 0 {
			return sessionPlan{}
		}
		s := &fetchSession{id: id, epoch: 0, usesIDs: usesIDs, parts: make(map[sessKey]*sessPart), used: now, inUse: true}
		c.sessions[id] = s
		return sessionPlan{sess: s, newSession: true}
	}
	s := c.sessions[req.SessionID]
	if s == nil {
		return sessionPlan{errCode: kerr.FetchSessionIDNotFound.Code}
	}
	// A session's expected epoch is never negative, so a negative epoch
	// naming a known session is a wrong epoch.
	if s.inUse || s.epoch != req.SessionEpoch {
		return sessionPlan{errCode: kerr.InvalidFetchSessionEpoch.Code}
	}
	if s.usesIDs != usesIDs {
		return sessionPlan{errCode: kerr.FetchSessionTopicIDError.Code}
	}
	s.inUse, s.used = true, now
	return sessionPlan{sess: s}
}

// allocateLocked returns a fresh session id, evicting the least recently
// used idle session when the cache is full; 0 when no slot is free.
func (c *fetchSessionCache) allocateLocked(now time.Time) int32 {
	if len(c.sessions) >= maxFetchSessions {
		var victim *fetchSession
		for _, s := range c.sessions {
			idle := now.Sub(s.used)
			// A session left in use by a connection that broke before
			// its answer is evicted once it is clearly abandoned.
			evictable := !s.inUse && idle >= fetchSessionEvictIdle || s.inUse && idle >= fetchSessionAbandoned
			if evictable && (victim == nil || s.used.Before(victim.used)) {
				victim = s
			}
		}
		if victim == nil {
			return 0
		}
		delete(c.sessions, victim.id)
	}
	for {
		c.nextID++
		if c.nextID <= 0 {
			c.nextID = 1
		}
		if c.sessions[c.nextID] == nil {
			return c.nextID
		}
	}
}

// end releases the session after the response; ok=false (the fetch
// failed without answering, or emptied the session) drops it.
func (c *fetchSessionCache) end(s *fetchSession, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.inUse = false
	if !ok {
		if c.sessions[s.id] == s {
			delete(c.sessions, s.id)
		}
		return
	}
	s.epoch++
	if s.epoch <= 0 {
		s.epoch = 1
	}
}

// apply updates the session with the request's partitions, then removes
// its forgotten topics (Kafka's FetchSession.update order: a partition
// both named and forgotten is forgotten), and returns the partitions to
// fetch (every partition of the session, in session order). An empty
// result means the session is to be closed and the fetch served
// sessionless.
func (s *fetchSession) apply(req *kmsg.FetchRequest, plan *sessionPlan) []*sessPart {
	plan.named = make(map[sessKey]bool)
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			k := s.key(t.Topic, t.TopicID, p.Partition)
			sp := s.parts[k]
			if sp == nil {
				sp = &sessPart{key: k, hw: -2, lso: -2, logStart: -2}
				s.parts[k] = sp
				s.order = append(s.order, k)
			}
			sp.fetchOffset, sp.maxBytes = p.FetchOffset, p.PartitionMaxBytes
			sp.currentLeaderEpoch, sp.lastFetchedEpoch = p.CurrentLeaderEpoch, p.LastFetchedEpoch
			sp.fetcherLogStart = p.LogStartOffset
			plan.named[k] = true
		}
	}
	for _, ft := range req.ForgottenTopics {
		for _, p := range ft.Partitions {
			delete(s.parts, s.key(ft.Topic, ft.TopicID, p))
		}
	}
	if len(req.ForgottenTopics) > 0 {
		kept := s.order[:0]
		for _, k := range s.order {
			if s.parts[k] != nil {
				kept = append(kept, k)
			}
		}
		s.order = kept
	}
	out := make([]*sessPart, 0, len(s.parts))
	for _, k := range s.order {
		out = append(out, s.parts[k])
	}
	return out
}

// key is the session key of a partition: by id when the session uses
// topic ids, else by name.
func (s *fetchSession) key(name string, id [16]byte, part int32) sessKey {
	if s.usesIDs {
		return sessKey{id: id, part: part}
	}
	return sessKey{name: name, part: part}
}
