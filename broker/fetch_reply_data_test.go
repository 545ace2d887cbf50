package broker

import (
	"bytes"
	"math/rand"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The vectored Fetch encoding is byte-identical to kmsg's for every served
// version and shape (errors, aborted lists null/empty/full, diverging
// epochs, current leaders, empty and non-empty record sets).
func TestFetchReplyEncodingMatchesKmsg(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for v := int16(4); v <= 17; v++ {
		for round := 0; round < 50; round++ {
			resp := kmsg.NewPtrFetchResponse()
			resp.Version = v
			resp.ErrorCode, resp.SessionID = int16(rng.Intn(3)), rng.Int31()
			for ti := 0; ti < rng.Intn(4); ti++ {
				tp := kmsg.NewFetchResponseTopic()
				tp.Topic = string(rune('a' + ti))
				rng.Read(tp.TopicID[:])
				for pi := 0; pi < rng.Intn(4); pi++ {
					p := kmsg.NewFetchResponseTopicPartition()
					p.Partition, p.ErrorCode = int32(pi), int16(rng.Intn(2))
					p.HighWatermark, p.LastStableOffset, p.LogStartOffset = rng.Int63(), rng.Int63(), rng.Int63()
					switch rng.Intn(3) {
					case 0:
						p.AbortedTransactions = nil
					case 1:
						p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
					case 2:
						for i := 0; i < 3; i++ {
							a := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
							a.ProducerID, a.FirstOffset = rng.Int63(), rng.Int63()
							p.AbortedTransactions = append(p.AbortedTransactions, a)
						}
					}
					if v >= 12 && rng.Intn(3) == 0 {
						p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = rng.Int31(), rng.Int63()
					}
					if v >= 12 && rng.Intn(4) == 0 {
						p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = 1, rng.Int31()
					}
					if n := rng.Intn(3); n > 0 {
						p.RecordBatches = make([]byte, rng.Intn(5000)+1)
						rng.Read(p.RecordBatches)
					} else {
						p.RecordBatches = []byte{}
					}
					tp.Partitions = append(tp.Partitions, p)
				}
				resp.Topics = append(resp.Topics, tp)
			}
			want := resp.AppendTo(nil)
			r := &fetchReply{resp: resp}
			got := r.AppendTo(nil)
			if !bytes.Equal(got, want) {
				t.Fatalf("v%d round %d: vectored encoding differs from kmsg (%d vs %d bytes)", v, round, len(got), len(want))
			}
			back := kmsg.NewPtrFetchResponse()
			back.Version = v
			if err := back.ReadFrom(got); err != nil {
				t.Fatalf("v%d: %v", v, err)
			}
		}
	}
}

// Record buffers come from size classes and go back to them.
func TestFetchBufPool(t *testing.T) {
	for _, n := range []int{1, 4096, 4097, 1 << 20, 1<<20 + 1} {
		p := getFetchBuf(n)
		if cap(*p) < n || len(*p) != 0 {
			t.Fatalf("getFetchBuf(%d): len %d cap %d", n, len(*p), cap(*p))
		}
		if c := cap(*p); c&(c-1) != 0 {
			t.Fatalf("getFetchBuf(%d): capacity %d is not a class size", n, c)
		}
		putFetchBuf(p)
	}
	if fetchBufClass(200<<20) < len(fetchBufPools) {
		t.Fatal("a 200 MiB buffer would be pooled")
	}
	odd := make([]byte, 0, 5000)
	putFetchBuf(&odd) // not a class size: dropped, not pooled
	if p := getFetchBuf(5000); cap(*p) != 8192 {
		t.Fatalf("pool returned a foreign buffer of capacity %d", cap(*p))
	}
}

// A full session cache evicts idle sessions and sessions abandoned in use
// (a connection that broke mid-fetch), never a busy recent one.
func TestFetchSessionEviction(t *testing.T) {
	var c fetchSessionCache
	now := time.Unix(1000, 0)
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.SessionID, req.SessionEpoch = 0, 0 // create a session
	for i := 0; i < maxFetchSessions; i++ {
		if plan := c.begin(req, now); plan.sess == nil {
			t.Fatalf("session %d not created", i)
		}
	}
	// All in use and recent: no slot.
	if plan := c.begin(req, now.Add(time.Minute)); plan.sess != nil {
		t.Fatal("a busy recent session was evicted")
	}
	// Abandoned in use long enough: evicted.
	if plan := c.begin(req, now.Add(fetchSessionAbandoned)); plan.sess == nil {
		t.Fatal("no session evicted after being abandoned in use")
	}
	if len(c.sessions) != maxFetchSessions {
		t.Fatalf("%d sessions cached, limit %d", len(c.sessions), maxFetchSessions)
	}
}
