package broker_test

// Replication with the real replica fetcher (package replica, which
// imports broker: hence an external test): three joined brokers over
// memstore, acks=all produce through franz-go, a leader change written
// as the controller would, and every acknowledged record read back from
// the new leader.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/clustermeta"
	"github.com/verbatim-kafka/verbatim/clustermeta/memstore"
	"github.com/verbatim-kafka/verbatim/replica"
)

func TestReplicationWithReplicaManager(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	store := memstore.New()
	defer store.Close()
	addrs := map[int32]string{}
	for id := int32(1); id <= 3; id++ {
		srv, err := broker.Open(broker.Config{DataDir: t.TempDir(), NodeID: id, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Cluster: &broker.ClusterConfig{Store: store, MinInsyncReplicas: 2}})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
		m := replica.NewManager(replica.Config{Host: replica.BrokerHost(srv), MaxWaitMs: 100, Backoff: 50 * time.Millisecond})
		srv.SetFollowers(m)
		t.Cleanup(func() {
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer scancel()
			m.Close()
			if err := srv.Shutdown(sctx); err != nil {
				t.Errorf("shutdown: %v", err)
			}
			<-served
		})
		addr := ln.Addr().(*net.TCPAddr)
		addrs[id] = addr.String()
		ep := clustermeta.Endpoint{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "127.0.0.1", Port: int32(addr.Port)}
		if err := srv.JoinCluster(ctx, []clustermeta.Endpoint{ep}); err != nil {
			t.Fatal(err)
		}
	}
	const topic = "replicated"
	id := [16]byte{7, 7, 7}
	_, parts, err := store.CreateTopic(ctx, clustermeta.TopicRecord{Name: topic, ID: id, Partitions: 1},
		[]clustermeta.PartitionState{{Topic: topic, TopicID: id, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1}})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs[1], addrs[2], addrs[3]), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const n = 200
	start := time.Now()
	for i := 0; i < n; i++ {
		r := &kgo.Record{Value: []byte(strconv.Itoa(i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("acks=all record %d: %v", i, err)
		}
	}
	t.Logf("%d acks=all records in %v", n, time.Since(start))
	// The controller moves the leadership to broker 2 (it is in the ISR:
	// every acknowledged record is on it).
	st := parts[0]
	st.Leader, st.ISR = 2, []int32{2, 3}
	st.LeaderEpoch++
	st.PartitionEpoch++
	if _, err := store.CASPartitions(ctx, clustermeta.Fence{}, []clustermeta.PartitionState{st}); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(n))}).FirstErr(); err != nil {
		t.Fatalf("acks=all after the leader change: %v", err)
	}
	t.Logf("after the leader change in %v", time.Since(start))
	consumer, err := kgo.NewClient(kgo.SeedBrokers(addrs[1], addrs[2], addrs[3]), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	for next := 0; next <= n; {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", next, n+1, err)
		}
		for _, e := range fs.Errors() {
			t.Logf("fetch error (retried): %v", e.Err)
		}
		for _, r := range fs.Records() {
			if want := fmt.Sprint(next); string(r.Value) != want || r.Offset != int64(next) {
				t.Fatalf("record at offset %d is %q, want offset %d %q", r.Offset, r.Value, next, want)
			}
			next++
		}
	}
}
