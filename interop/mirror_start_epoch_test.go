package interop

import (
	"context"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/mirror"
)

// earliestAnswer is ListOffsets EARLIEST of partition 0 of topic on addr.
func earliestAnswer(t *testing.T, addr, topic string) client.OffsetAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cn, err := client.Dial(ctx, addr, client.Options{ClientID: "interop"})
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close()
	a, err := client.ListOffset(ctx, cn, topic, 0, client.Earliest, client.ReadUncommitted)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// firstBase is the base offset of the first batch of partition 0 of
// topic on addr (-1: none).
func firstBase(t *testing.T, addr, topic string) int64 {
	first := int64(-1)
	eachBatch(t, addr, topic, func(b []byte) {
		if first < 0 {
			first = kbatch.BaseOffset(b)
		}
	})
	return first
}

// checkEarliestEpoch (a subtest of TestMirrorFromKafka, which prepares the
// compacted topic): once Kafka's cleaner removed the topic's first
// records, Kafka still answers ListOffsets EARLIEST with leader epoch 0
// at offset 0 (its epoch cache starts where the epoch began), while the
// copied log's first batch is further on. `mirror push` forwards that
// epoch with the log start, so the copy answers the same and verify is
// exact; a copy made without the forward (the pusher's test hook) answers
// -1 and verify names list_offsets.earliest.leader_epoch.
func checkEarliestEpoch(t *testing.T, bin, src, topic string) {
	deadline := time.Now().Add(60 * time.Second)
	for firstBase(t, src, topic) <= 0 {
		if time.Now().After(deadline) {
			t.Fatalf("Kafka's cleaner did not remove the first records of %s within 60s", topic)
		}
		time.Sleep(500 * time.Millisecond)
	}
	want := earliestAnswer(t, src, topic)
	if want.LeaderEpoch < 0 {
		t.Fatalf("Kafka answers EARLIEST %+v: no epoch to mirror", want)
	}
	t.Logf("source: first batch at %d, EARLIEST offset %d epoch %d", firstBase(t, src, topic), want.Offset, want.LeaderEpoch)

	with := StartVerbatim(t, bin, VerbatimOptions{})
	runPush(t, bin, src, with.Addr, 0, "--topics", topic, "--create-topics")
	if got := earliestAnswer(t, with.Addr, topic); got.Offset != want.Offset || got.LeaderEpoch != want.LeaderEpoch {
		t.Fatalf("destination EARLIEST %+v, source %+v", got, want)
	}
	if v := runVerify(t, bin, src, with.Addr, topic, 0); !*v.Exact {
		t.Fatalf("with the epoch forwarded: %+v", v)
	}

	without := StartVerbatim(t, bin, VerbatimOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := mirror.Push(ctx, mirror.Options{Source: src, Dest: without.Addr, Topics: []string{topic}, CreateTopics: true, NoStartEpoch: true}); err != nil {
		t.Fatalf("push without the epoch forward: %v", err)
	}
	if got := earliestAnswer(t, without.Addr, topic); got.LeaderEpoch != -1 {
		t.Fatalf("without the forward the destination answers EARLIEST %+v", got)
	}
	v := runVerify(t, bin, src, without.Addr, topic, 1)
	if m := v.Partitions[0].FirstMismatch; *v.Exact || m == nil || m.Field == nil || *m.Field != "list_offsets.earliest.leader_epoch" {
		t.Fatalf("without the epoch forwarded verify says %+v", v.Partitions[0])
	}
}
