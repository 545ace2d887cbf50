package replica

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/client"
)

// TestConnLeaderIdentity: every request names this broker as the replica;
// each fetch carries the broker epoch current when it is sent (a broker
// that registered again fetches with its new epoch on the same
// connection); OffsetForLeaderEpoch and ListOffsets carry the replica id
// and the follower's leader epoch.
func TestConnLeaderIdentity(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var mu sync.Mutex
	var reqs []kmsg.Request
	for _, k := range []kmsg.Key{kmsg.Fetch, kmsg.OffsetForLeaderEpoch, kmsg.ListOffsets} {
		c.ControlKey(k.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			mu.Lock()
			reqs = append(reqs, r)
			mu.Unlock()
			return nil, nil, false
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cn, err := client.Dial(ctx, c.ListenAddrs()[0], client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var epoch atomic.Int64
	epoch.Store(7)
	l := newConnLeader(cn, client.SessionOptions{MaxWaitMs: 1, MinBytes: 1, MaxBytes: 1 << 20, Follower: true, ReplicaID: 3}, epoch.Load)
	defer l.Close()
	tp := client.TopicPartition{Topic: "t", Partition: 0}
	want := []client.SessionPartition{{TopicPartition: tp, TopicID: c.TopicInfo("t").TopicID, MaxBytes: 1 << 20, CurrentEpoch: -1, LastFetchedEpoch: -1}}
	for _, e := range []int64{7, 8} {
		epoch.Store(e)
		if _, err := l.Fetch(ctx, want); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.EpochEnds(ctx, []epochQuery{{TopicPartition: tp, Current: 0, Epoch: 0}}); err != nil {
		t.Fatal(err)
	}
	as, err := l.Offsets(ctx, []offsetQuery{{TopicPartition: tp, Current: 0}})
	if err != nil || len(as) != 1 || as[0].Err != nil || as[0].Start != 0 || as[0].End != 0 {
		t.Fatalf("offsets %+v %v", as, err)
	}
	mu.Lock()
	defer mu.Unlock()
	var fetchEpochs []int64
	for _, r := range reqs {
		switch r := r.(type) {
		case *kmsg.FetchRequest:
			id, ep := r.ReplicaID, int64(-1)
			if r.Version >= 15 {
				id, ep = r.ReplicaState.ID, r.ReplicaState.Epoch
			}
			if id != 3 {
				t.Errorf("Fetch v%d: replica id %d", r.Version, id)
			}
			fetchEpochs = append(fetchEpochs, ep)
		case *kmsg.OffsetForLeaderEpochRequest:
			if r.ReplicaID != 3 || r.Topics[0].Partitions[0].CurrentLeaderEpoch != 0 {
				t.Errorf("OffsetForLeaderEpoch: replica id %d, current epoch %d", r.ReplicaID, r.Topics[0].Partitions[0].CurrentLeaderEpoch)
			}
		case *kmsg.ListOffsetsRequest:
			if r.ReplicaID != 3 || r.Topics[0].Partitions[0].CurrentLeaderEpoch != 0 {
				t.Errorf("ListOffsets: replica id %d, current epoch %d", r.ReplicaID, r.Topics[0].Partitions[0].CurrentLeaderEpoch)
			}
		}
	}
	if len(fetchEpochs) != 2 || fetchEpochs[0] != 7 || fetchEpochs[1] != 8 {
		t.Fatalf("fetches carried broker epochs %v, want [7 8]", fetchEpochs)
	}
}
