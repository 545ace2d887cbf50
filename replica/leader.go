package replica

// The leader as one fetcher sees it: the three requests a follower sends
// (Fetch in a session, OffsetForLeaderEpoch, ListOffsets), over one
// connection. The state machine (fetcher.go) knows only this interface, so
// tests drive it with a simulated leader.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/client"
)

// leader is one connection to a partition leader broker.
type leader interface {
	// Fetch sends one session fetch of want; an error is the whole
	// request's (a broken connection, a top-level error).
	Fetch(ctx context.Context, want []client.SessionPartition) ([]client.SessionAnswer, error)
	// EpochEnds asks where each query's epoch ends on the leader
	// (OffsetForLeaderEpoch as a replica); one answer per query, in any
	// order, partition errors in the answers.
	EpochEnds(ctx context.Context, qs []epochQuery) ([]epochAnswer, error)
	// Offsets asks the leader's log start and log end of each partition
	// (ListOffsets earliest and latest as a replica).
	Offsets(ctx context.Context, qs []offsetQuery) ([]offsetAnswer, error)
	Close()
}

// named is a query about one partition.
type named interface{ topicPartition() client.TopicPartition }

// byTopic is a request's topic list for qs: their partitions (made by
// part) grouped under one entry per topic (made by topic), in the order
// the topics first appear.
func byTopic[Q named, T, P any](qs []Q, topic func(name string, ps []P) T, part func(Q) P) []T {
	var names []string
	ps := map[string][]P{}
	for _, q := range qs {
		tp := q.topicPartition()
		if _, seen := ps[tp.Topic]; !seen {
			names = append(names, tp.Topic)
		}
		ps[tp.Topic] = append(ps[tp.Topic], part(q))
	}
	out := make([]T, 0, len(names))
	for _, n := range names {
		out = append(out, topic(n, ps[n]))
	}
	return out
}

func (q epochQuery) topicPartition() client.TopicPartition  { return q.TopicPartition }
func (q offsetQuery) topicPartition() client.TopicPartition { return q.TopicPartition }

// epochQuery asks where Epoch ends; Current is the follower's leader
// epoch (fencing).
type epochQuery struct {
	client.TopicPartition
	Current, Epoch int32
}

type epochAnswer struct {
	client.TopicPartition
	End client.EpochEnd
	Err error
}

type offsetQuery struct {
	client.TopicPartition
	Current int32
}

type offsetAnswer struct {
	client.TopicPartition
	Start, End int64
	Err        error
}

// connLeader is a leader over a client connection.
type connLeader struct {
	cn   *client.Conn
	sess *client.FetchSession
	opts client.SessionOptions
	id   int32 // this broker's replica id
	// epoch is this broker's current broker epoch, read for every fetch
	// (as Kafka's brokerEpochSupplier): a broker that registered again
	// (a new epoch) must not go on fetching with the old one, which the
	// leader refuses.
	epoch func() int64
}

func newConnLeader(cn *client.Conn, o client.SessionOptions, epoch func() int64) *connLeader {
	return &connLeader{cn: cn, sess: client.NewFetchSession(cn), opts: o, id: o.ReplicaID, epoch: epoch}
}

func (l *connLeader) Close() { l.cn.Close() }

func (l *connLeader) Fetch(ctx context.Context, want []client.SessionPartition) ([]client.SessionAnswer, error) {
	o := l.opts
	o.ReplicaEpoch = l.epoch()
	r, err := l.sess.Fetch(ctx, want, o)
	return r.Answers, err
}

func (l *connLeader) EpochEnds(ctx context.Context, qs []epochQuery) ([]epochAnswer, error) {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = l.id
	req.Topics = byTopic(qs, func(name string, ps []kmsg.OffsetForLeaderEpochRequestTopicPartition) kmsg.OffsetForLeaderEpochRequestTopic {
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic, rt.Partitions = name, ps
		return rt
	}, func(q epochQuery) kmsg.OffsetForLeaderEpochRequestTopicPartition {
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = q.Partition, q.Current, q.Epoch
		return rp
	})
	resp, err := l.cn.Request(ctx, req, 4)
	if err != nil {
		return nil, err
	}
	return epochAnswers(qs, resp.(*kmsg.OffsetForLeaderEpochResponse)), nil
}

// epochAnswers reads r for qs: every query gets one answer, an error for
// a partition the leader left out.
func epochAnswers(qs []epochQuery, r *kmsg.OffsetForLeaderEpochResponse) []epochAnswer {
	got := make(map[client.TopicPartition]epochAnswer, len(qs))
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			tp := client.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			if _, dup := got[tp]; dup {
				continue // the first answer only
			}
			got[tp] = epochAnswer{TopicPartition: tp, End: client.EpochEnd{LeaderEpoch: rp.LeaderEpoch, EndOffset: rp.EndOffset}, Err: kerr.ErrorForCode(rp.ErrorCode)}
		}
	}
	out := make([]epochAnswer, 0, len(qs))
	for _, q := range qs {
		a, ok := got[q.TopicPartition]
		if !ok {
			a = epochAnswer{TopicPartition: q.TopicPartition, Err: fmt.Errorf("OffsetForLeaderEpoch: %s not answered", q.TopicPartition)}
		}
		out = append(out, a)
	}
	return out
}

func (l *connLeader) Offsets(ctx context.Context, qs []offsetQuery) ([]offsetAnswer, error) {
	ends := map[client.TopicPartition]offsetAnswer{}
	for _, ts := range []int64{client.Earliest, client.Latest} {
		req := kmsg.NewPtrListOffsetsRequest()
		// As a replica: latest is the leader's log end, not its high
		// watermark (Kafka answers replicas without isolation).
		req.ReplicaID = l.id
		req.Topics = byTopic(qs, func(name string, ps []kmsg.ListOffsetsRequestTopicPartition) kmsg.ListOffsetsRequestTopic {
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic, rt.Partitions = name, ps
			return rt
		}, func(q offsetQuery) kmsg.ListOffsetsRequestTopicPartition {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = q.Partition, ts, q.Current
			return rp
		})
		resp, err := l.cn.Request(ctx, req, 9)
		if err != nil {
			return nil, err
		}
		listAnswers(qs, ts, resp.(*kmsg.ListOffsetsResponse), ends)
	}
	out := make([]offsetAnswer, 0, len(qs))
	for _, q := range qs {
		out = append(out, ends[q.TopicPartition])
	}
	return out, nil
}

// listAnswers merges r, the ListOffsets answer at ts (Earliest: Start,
// Latest: End) for qs, into into; a partition not answered gets an error.
func listAnswers(qs []offsetQuery, ts int64, r *kmsg.ListOffsetsResponse, into map[client.TopicPartition]offsetAnswer) {
	seen := make(map[client.TopicPartition]bool, len(qs))
	for _, q := range qs {
		seen[q.TopicPartition] = false
	}
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			tp := client.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			if s, asked := seen[tp]; s || !asked {
				continue // not asked, or answered twice: the first only
			}
			a := into[tp]
			seen[tp] = true
			a.TopicPartition = tp
			if ts == client.Earliest {
				a.Start = rp.Offset
			} else {
				a.End = rp.Offset
			}
			if a.Err == nil {
				a.Err = kerr.ErrorForCode(rp.ErrorCode)
			}
			into[tp] = a
		}
	}
	for _, q := range qs {
		if !seen[q.TopicPartition] {
			a := into[q.TopicPartition]
			a.TopicPartition = q.TopicPartition
			if a.Err == nil {
				a.Err = fmt.Errorf("ListOffsets: %s not answered", q.TopicPartition)
			}
			into[q.TopicPartition] = a
		}
	}
}
