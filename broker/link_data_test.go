package broker

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A link's in-process mirror append takes the wire mirror produce's path:
// the registered writer only, the expected log end, the bytes as given,
// the KIP-1279 epoch rule; only the link named by mirror.link writes.
func TestLinkMirrorAppend(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	s := b.srv
	ctx := context.Background()
	id := [16]byte{7}
	skipped, err := s.CreatePullTopic("l1", "p", 2, [16]byte{9, 9}, map[string]string{"retention.ms": "-1", "mirror.mode": "push", "confluent.x": "1"}, "src-A")
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) != 2 {
		t.Fatalf("skipped configs %v, want mirror.mode and the unknown one", skipped)
	}
	info, ok := s.LinkTopic("p")
	if !ok || info.MirrorMode != "pull" || info.MirrorLink != "l1" || info.ID != ([16]byte{9, 9}) || info.Partitions != 2 ||
		info.MirrorState != MirrorStateMirroring || info.Configs["retention.ms"] != "-1" || info.Configs["mirror.source.cluster.id"] != "src-A" {
		t.Fatalf("pull topic %+v", info)
	}
	// Before registering: refused as a wire write would be.
	set := data(0, 3, 2).encode(t)
	if _, err := s.LinkMirrorAppend(ctx, "l1", "p", 0, LinkWriter{Epoch: 0, ID: id}, set, 0, 0).Wait(ctx); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("append before registering: %v", err)
	}
	epoch, errs := s.RegisterLinkWriter("l1", id, []LinkPartition{{"p", 0}, {"p", 1}, {"p", 2}})
	if errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], kerr.UnknownTopicOrPartition) {
		t.Fatalf("registration: %v", errs)
	}
	w := LinkWriter{Epoch: epoch, ID: id}
	if _, errs := s.RegisterLinkWriter("l2", id, []LinkPartition{{"p", 0}}); !errors.Is(errs[0], kerr.PolicyViolation) {
		t.Fatalf("another link registering: %v", errs)
	}
	if off, err := s.LinkMirrorAppend(ctx, "l1", "p", 0, w, set, 0, 0).Wait(ctx); err != nil || off != 0 {
		t.Fatalf("append: %d %v", off, err)
	}
	if e := s.Topic("p").Partition(0).LeaderEpoch(); e != 13 {
		t.Fatalf("leader epoch after mirroring epoch 3: %d, want 13", e)
	}
	if _, err := s.LinkMirrorAppend(ctx, "l1", "p", 0, w, data(2, 3, 1).encode(t), 5, 0).Wait(ctx); !errors.Is(err, kerr.OffsetOutOfRange) {
		t.Fatalf("wrong expected log end: %v", err)
	}
	if _, err := s.LinkMirrorAppend(ctx, "l2", "p", 0, w, data(2, 3, 1).encode(t), 2, 0).Wait(ctx); !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("another link's append: %v", err)
	}
	set2 := data(2, 4, 3).encode(t)
	if _, err := s.LinkMirrorAppend(ctx, "l1", "p", 0, w, set2, 2, 0).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadMirrorLog("p", 0, 0, 1<<20)
	if err != nil || !bytes.Equal(got, concat(set, set2)) {
		t.Fatalf("stored %d bytes (%v), want the appended sets byte for byte", len(got), err)
	}
	if start, end, err := s.MirrorLogRange("p", 0); start != 0 || end != 5 || err != nil {
		t.Fatalf("log range %d %d %v", start, end, err)
	}
	if e, err := s.LastBatchEpoch("p", 0); e != 4 || err != nil {
		t.Fatalf("last batch epoch %d %v", e, err)
	}
	// The log-start forward, and a newer registration fencing w.
	if low, err := s.LinkForwardLogStart("l1", "p", 0, w, 2, -1); low != 2 || err != nil {
		t.Fatalf("log start forward: %d %v", low, err)
	}
	if _, errs := s.RegisterLinkWriter("l1", id, []LinkPartition{{"p", 0}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if _, err := s.LinkMirrorAppend(ctx, "l1", "p", 0, w, data(5, 4, 1).encode(t), 5, 0).Wait(ctx); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("append by a fenced registration: %v", err)
	}
	if _, err := s.LinkForwardLogStart("l1", "p", 0, w, 3, -1); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("forward by a fenced registration: %v", err)
	}
	// After the stop the link's writes are refused and the topic reads as stopped.
	if err, msg := incrementalAlter(t, b, "p", false, iacDelete("mirror.mode")); err != nil {
		t.Fatalf("stop: %v %s", err, msg)
	}
	if info, _ := s.LinkTopic("p"); info.MirrorMode != "" || info.MirrorState != MirrorStateStopped {
		t.Fatalf("after the stop: %+v", info)
	}
	if _, err := s.LinkMirrorAppend(ctx, "l1", "p", 1, w, data(0, 4, 1).encode(t), 0, 0).Wait(ctx); !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("append after the stop: %v", err)
	}
	if info, _ := s.LinkTopic(topicNameNeverMirror(t, b)); info.MirrorState != "" {
		t.Fatalf("an ordinary topic reads as mirror state %q", info.MirrorState)
	}
}

func topicNameNeverMirror(t *testing.T, b *testBroker) string {
	createTopic(t, b, "plain", 1, nil)
	return "plain"
}
