package client

// Multi-partition Fetch over one connection with a KIP-227 incremental
// fetch session.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

// SessionPartition is one partition of a session fetch: where to read and
// what the caller believes of its leader.
type SessionPartition struct {
	TopicPartition
	// TopicID is the topic's id (Metadata v10+); zero when unknown. A
	// session uses topic ids (Fetch v13+) only when every partition it
	// holds has one, names (Fetch v12) otherwise.
	TopicID          [16]byte
	Offset           int64
	MaxBytes         int32 // the partition's max bytes
	CurrentEpoch     int32 // -1: no fencing
	LastFetchedEpoch int32 // -1: no divergence check
	// LogStart is a follower's own log start offset (Fetch v5+
	// LogStartOffset), which its leader counts for DeleteRecords' low
	// watermark; sent only with SessionOptions.Follower (a consumer sends
	// -1 whatever it holds). A change is sent in an incremental fetch.
	LogStart int64
}

// SessionOptions are the request-level fields of a session fetch.
type SessionOptions struct {
	MaxWaitMs int32
	MinBytes  int32
	MaxBytes  int32 // the response's max bytes
	Isolation int8
	// Follower makes the fetch a replica's (a broker's replica fetcher):
	// ReplicaID is the fetching broker's node id and ReplicaEpoch its
	// broker epoch, sent in ReplicaState from Fetch v15 (KIP-903) and as
	// ReplicaID before (no epoch). Without Follower the fetch is a
	// consumer's (replica id -1), whatever the two fields hold.
	Follower     bool
	ReplicaID    int32
	ReplicaEpoch int64
}

// SessionAnswer is one partition of a session fetch response.
type SessionAnswer struct {
	TopicPartition
	FetchResult
}

// SessionResponse is what one session fetch returned: the partitions the
// broker answered (an incremental response omits partitions with nothing
// new) and the quota throttle it asks the client to respect before the
// next request.
type SessionResponse struct {
	Answers  []SessionAnswer
	Throttle time.Duration
	// Full reports that the request was a full fetch (a new session, or
	// one reset after a session error).
	Full bool
}

// FetchSession is a KIP-227 fetch session with one broker over one
// connection: each Fetch names the partitions wanted now, and the session
// sends only what changed since the last request the broker answered
// (added or moved partitions, and the ones no longer wanted as forgotten
// topics). A session error from the broker (FETCH_SESSION_ID_NOT_FOUND,
// INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR) resets it to a
// full fetch, which is sent at once. Requests of one session are sent one
// at a time (its epochs are sequential): it is not safe for concurrent
// use.
type FetchSession struct {
	cn      *Conn
	id      int32
	epoch   int32 // 0: the next request is full
	version int16 // the version the session was created with
	// held is what the broker's session holds, as last sent.
	held  map[TopicPartition]SessionPartition
	names map[[16]byte]string // topic id -> name, for v13+ answers
}

// Session epochs of KIP-227.
const (
	initialEpoch int32 = 0
	finalEpoch   int32 = -1
)

// NewFetchSession starts a session on cn; its first request is full.
func NewFetchSession(cn *Conn) *FetchSession {
	return &FetchSession{cn: cn, held: map[TopicPartition]SessionPartition{}, names: map[[16]byte]string{}}
}

// Conn is the session's connection.
func (s *FetchSession) Conn() *Conn { return s.cn }

// ID is the session id the broker assigned (0: none yet, or sessionless).
func (s *FetchSession) ID() int32 { return s.id }

// Reset makes the next request a full fetch in a new session.
func (s *FetchSession) Reset() {
	s.id, s.epoch = 0, initialEpoch
	clear(s.held)
}

// isSessionErr reports the errors that end a fetch session.
func isSessionErr(err error) bool {
	return errors.Is(err, kerr.FetchSessionIDNotFound) || errors.Is(err, kerr.InvalidFetchSessionEpoch) || errors.Is(err, kerr.FetchSessionTopicIDError)
}

// Fetch sends one request for want: the partitions to fetch now. Whatever
// the session holds and want does not name is forgotten. A top-level
// error (other than a session error, which is retried once as a full
// fetch) or a connection failure is returned for the whole request and
// resets the session; partition errors are in their answers.
func (s *FetchSession) Fetch(ctx context.Context, want []SessionPartition, o SessionOptions) (SessionResponse, error) {
	for attempt := 0; ; attempt++ {
		req, full, err := s.build(want, o)
		if err != nil {
			return SessionResponse{}, err
		}
		resp, err := s.cn.Request(ctx, req, req.Version)
		if err != nil {
			s.Reset()
			return SessionResponse{}, err
		}
		out, err := s.handle(req, want, resp.(*kmsg.FetchResponse))
		out.Full = full
		if isSessionErr(err) && attempt == 0 {
			continue // handle reset the session: resend in full
		}
		return out, err
	}
}

// build makes the next request for want.
func (s *FetchSession) build(want []SessionPartition, o SessionOptions) (*kmsg.FetchRequest, bool, error) {
	v := s.cn.MaxVersion(kmsg.Fetch.Int16())
	if v < 4 {
		return nil, false, fmt.Errorf("%s does not serve Fetch v4+", s.cn.Addr())
	}
	if v > 12 {
		for _, p := range want {
			if p.TopicID == ([16]byte{}) {
				v = 12
				break
			}
		}
	}
	if s.epoch != initialEpoch && v != s.version {
		// Names and topic ids do not mix in one session (KIP-516).
		s.Reset()
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version = v
	req.ReplicaID = -1
	req.ReplicaState.ID, req.ReplicaState.Epoch = -1, -1
	if o.Follower {
		if v >= 15 {
			req.ReplicaState.ID, req.ReplicaState.Epoch = o.ReplicaID, o.ReplicaEpoch
		} else {
			req.ReplicaID = o.ReplicaID
		}
	}
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = o.MaxWaitMs, o.MinBytes, o.MaxBytes
	req.IsolationLevel = o.Isolation
	full := s.epoch == initialEpoch || v < 7
	if v >= 7 {
		req.SessionID, req.SessionEpoch = s.id, s.epoch
		if full {
			req.SessionID = 0
		}
	}
	byTopic := map[string]int{}
	add := func(p SessionPartition) {
		i := TopicEntry(byTopic, &req.Topics, p.Topic, func() kmsg.FetchRequestTopic {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = p.Topic, p.TopicID
			return rt
		})
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p.Partition, p.Offset, p.MaxBytes
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = p.CurrentEpoch, p.LastFetchedEpoch, -1
		if o.Follower {
			rp.LogStartOffset = p.LogStart
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	type topicKey struct {
		name string
		id   [16]byte
	}
	forgot := map[topicKey]int{}
	forget := func(p SessionPartition) {
		k := topicKey{p.Topic, p.TopicID}
		i, ok := forgot[k]
		if !ok {
			i = len(req.ForgottenTopics)
			forgot[k] = i
			ft := kmsg.NewFetchRequestForgottenTopic()
			ft.Topic, ft.TopicID = p.Topic, p.TopicID
			req.ForgottenTopics = append(req.ForgottenTopics, ft)
		}
		req.ForgottenTopics[i].Partitions = append(req.ForgottenTopics[i].Partitions, p.Partition)
	}
	wanted := make(map[TopicPartition]struct{}, len(want))
	for _, p := range want {
		if _, dup := wanted[p.TopicPartition]; dup {
			return nil, false, fmt.Errorf("fetch session: %s named twice", p.TopicPartition)
		}
		wanted[p.TopicPartition] = struct{}{}
		old, held := s.held[p.TopicPartition]
		if !full && held && old.TopicID != p.TopicID {
			forget(old) // the topic was re-created: drop the old id's entry
		}
		if full || old != p {
			add(p)
		}
	}
	if !full {
		for tp, p := range s.held {
			if _, ok := wanted[tp]; !ok {
				forget(p)
			}
		}
	}
	return req, full, nil
}

// handle reads the response to req (built for want) and moves the
// session on: a new session id and epoch after a full fetch, the next
// epoch after an incremental one, a reset after any top-level error.
func (s *FetchSession) handle(req *kmsg.FetchRequest, want []SessionPartition, r *kmsg.FetchResponse) (SessionResponse, error) {
	out := SessionResponse{Throttle: time.Duration(max(r.ThrottleMillis, 0)) * time.Millisecond}
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		s.Reset()
		return out, fmt.Errorf("fetch session %d epoch %d with %s: %w", req.SessionID, req.SessionEpoch, s.cn.Addr(), err)
	}
	// The broker holds want now.
	clear(s.held)
	for _, p := range want {
		s.held[p.TopicPartition] = p
		if p.TopicID != ([16]byte{}) {
			s.names[p.TopicID] = p.Topic
		}
	}
	switch {
	case req.Version < 7 || req.SessionEpoch == finalEpoch:
		s.id, s.epoch = 0, initialEpoch
	case req.SessionEpoch == initialEpoch:
		s.version = req.Version
		if r.SessionID == 0 {
			// The broker keeps no session (its cache is full): every
			// request stays full.
			s.id, s.epoch = 0, initialEpoch
		} else {
			s.id, s.epoch = r.SessionID, 1
		}
	default:
		s.epoch = nextEpoch(s.epoch)
	}
	for i := range r.Topics {
		rt := &r.Topics[i]
		name := rt.Topic
		if req.Version >= 13 {
			n, ok := s.names[rt.TopicID]
			if !ok {
				continue // a topic this session never asked for
			}
			name = n
		}
		for j := range rt.Partitions {
			p := &rt.Partitions[j]
			tp := TopicPartition{Topic: name, Partition: p.Partition}
			if h, ok := s.held[tp]; !ok || (req.Version >= 13 && h.TopicID != rt.TopicID) {
				continue // not held, or held under another topic id
			}
			res := FetchResult{
				Err:            kerr.ErrorForCode(p.ErrorCode),
				HighWatermark:  p.HighWatermark,
				LastStable:     p.LastStableOffset,
				LogStart:       p.LogStartOffset,
				Records:        p.RecordBatches, // aliased, as kmsg decoded it
				Aborted:        p.AbortedTransactions,
				DivergingEpoch: EpochEnd{LeaderEpoch: p.DivergingEpoch.Epoch, EndOffset: p.DivergingEpoch.EndOffset},
			}
			if req.Version < 12 {
				res.DivergingEpoch.LeaderEpoch = -1
			}
			out.Answers = append(out.Answers, SessionAnswer{TopicPartition: tp, FetchResult: res})
		}
	}
	return out, nil
}

// nextEpoch is the session epoch after e (wrapping past MaxInt32 to 1,
// as Kafka's FetchMetadata does).
func nextEpoch(e int32) int32 {
	if e < 0 || e == 1<<31-1 {
		return 1
	}
	return e + 1
}
