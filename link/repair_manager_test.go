package link

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// The repair operations of the Manager against brokers in process: a
// Verbatim source (truncated by hand to make it diverge) and a
// destination running the link.

type linkedBroker struct {
	srv  *broker.Server
	addr string
	m    *Manager
}

func startLinkedBroker(t *testing.T) *linkedBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := broker.Open(broker.Config{DataDir: t.TempDir(), AdvertisedHost: "127.0.0.1", AdvertisedPort: int32(port), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	m, err := Open(Config{Host: srv, Log: quiet, SyncInterval: 100 * time.Millisecond, RetryFor: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv.SetLinkService(m)
	t.Cleanup(func() {
		srv.SetLinkService(nil)
		m.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return &linkedBroker{srv: srv, addr: "127.0.0.1:" + strconv.Itoa(port), m: m}
}

func (b *linkedBroker) client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produce writes n records to topic, one batch each.
func (b *linkedBroker) produce(t *testing.T, topic string, prefix string, n int) {
	t.Helper()
	cl := b.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableIdempotentWrite())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce to %s on %s: %v", topic, b.addr, err)
		}
	}
}

func (b *linkedBroker) status(t *testing.T, topic string) wireext.MirrorPartitionStatus {
	t.Helper()
	st, ok := b.statusOK(t, topic)
	if !ok {
		t.Fatalf("describe %s: no partition", topic)
	}
	return st
}

// statusOK is the topic's one partition's status, false before the link
// discovered it.
func (b *linkedBroker) statusOK(t *testing.T, topic string) (wireext.MirrorPartitionStatus, bool) {
	t.Helper()
	sts, err := b.m.DescribeMirrors(context.Background(), wireext.DescribeMirrorsRequest{Topics: []string{topic}})
	if err != nil || len(sts) > 1 {
		t.Fatalf("describe %s: %v %+v", topic, err, sts)
	}
	if len(sts) == 0 {
		return wireext.MirrorPartitionStatus{}, false
	}
	return sts[0], true
}

func (b *linkedBroker) waitStatus(t *testing.T, topic, what string, ok func(wireext.MirrorPartitionStatus) bool) wireext.MirrorPartitionStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, found := b.statusOK(t, topic)
		if found && ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s not reached: %+v", topic, what, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func createTopic(t *testing.T, b *linkedBroker, topic string) {
	t.Helper()
	if _, err := kadm.NewClient(b.client(t)).CreateTopic(context.Background(), 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
}

// A Verbatim source truncated below what the link mirrored (its leader
// epoch bumps, new records follow): the partition goes FAILED with the
// divergence point; TruncateMirrorTopics cuts the mirror there, keeps the
// cut in `<topic>.truncated` and the partition resumes to MIRRORING with
// the source's new records. Refusals: an ordinary topic, a partition not
// FAILED by divergence, an unknown topic.
func TestManagerTruncateToDivergence(t *testing.T) {
	src, dst := startLinkedBroker(t), startLinkedBroker(t)
	createTopic(t, src, "t")
	src.produce(t, "t", "a", 10)
	ctx := context.Background()
	if err := dst.m.CreateLink(ctx, "admin", wireext.LinkConfig{Name: "l", SourceBootstrap: src.addr, Topics: "t"}, false); err != nil {
		t.Fatal(err)
	}
	dst.waitStatus(t, "t", "MIRRORING at 10", func(st wireext.MirrorPartitionStatus) bool {
		return st.State == wireext.StateMirroring && st.LogEndOffset == 10
	})
	if _, err := dst.m.TruncateMirrorTopics(ctx, "admin", wireext.TruncateMirrorTopicsRequest{Topics: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	res, _ := dst.m.TruncateMirrorTopics(ctx, "admin", wireext.TruncateMirrorTopicsRequest{Topics: []string{"t"}})
	if res[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("truncating a MIRRORING partition: %+v", res[0])
	}

	// The source loses 4..9 (kept on its side too) and writes anew.
	if _, err := src.srv.TruncateKeepingCut(ctx, "t", 0, 4, ""); err != nil {
		t.Fatal(err)
	}
	src.produce(t, "t", "b", 8)
	st := dst.waitStatus(t, "t", "FAILED", func(st wireext.MirrorPartitionStatus) bool { return st.State == wireext.StateFailed })
	if st.DivergenceOffset != 4 || st.LogEndOffset != 10 {
		t.Fatalf("FAILED: %+v, want divergence at 4 with 10 mirrored", st)
	}
	res, err := dst.m.TruncateMirrorTopics(ctx, "admin", wireext.TruncateMirrorTopicsRequest{Topics: []string{"t", "nope"}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].ErrorCode != 0 || len(res[0].Partitions) != 1 {
		t.Fatalf("truncate: %+v", res[0])
	}
	if tp := res[0].Partitions[0]; tp.TruncatedTo != 4 || tp.RemovedBatches == 0 || tp.KeptIn != "t.truncated" {
		t.Fatalf("truncated partition %+v", tp)
	}
	if res[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %+v", res[1])
	}
	dst.waitStatus(t, "t", "MIRRORING at 12", func(st wireext.MirrorPartitionStatus) bool {
		return st.State == wireext.StateMirroring && st.LogEndOffset == 12
	})
	if _, _, end, err := dst.srv.PartitionEpochs("t.truncated", 0); err != nil || end != 10 {
		t.Fatalf("keep topic end %d (%v), want 10", end, err)
	}

	createTopic(t, dst, "plain")
	res, _ = dst.m.TruncateMirrorTopics(ctx, "admin", wireext.TruncateMirrorTopicsRequest{Topics: []string{"plain"}})
	if res[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("truncating an ordinary topic: %+v", res[0])
	}
}

// Failback in process: the destination's ordinary topic holds the
// source's first records plus its own tail; StartMirrorTopics with
// TruncateToCommon makes it the link's pull mirror, cuts the tail into
// the keep topic, and mirrors the source's later records. A live mirror
// of another writer is refused.
func TestManagerFailback(t *testing.T) {
	v2, v1 := startLinkedBroker(t), startLinkedBroker(t)
	ctx := context.Background()
	// V1 is the primary; V2 mirrors it and takes over.
	createTopic(t, v1, "t")
	v1.produce(t, "t", "first", 8)
	if err := v2.m.CreateLink(ctx, "admin", wireext.LinkConfig{Name: "fwd", SourceBootstrap: v1.addr, Topics: "t"}, false); err != nil {
		t.Fatal(err)
	}
	v2.waitStatus(t, "t", "MIRRORING at 8", func(st wireext.MirrorPartitionStatus) bool {
		return st.State == wireext.StateMirroring && st.LogEndOffset == 8
	})
	stopTopic(t, v2.addr, "t")
	v2.waitStatus(t, "t", "STOPPED", func(st wireext.MirrorPartitionStatus) bool { return st.State == wireext.StateStopped })
	v1.produce(t, "t", "tail", 5) // the old primary's tail: 8..12
	v2.produce(t, "t", "second", 4)
	if st := v2.status(t, "t"); st.LastMirroredOffset != 7 {
		t.Fatalf("V2's stopped partition reports last mirrored %d, want 7 (the stop's point)", st.LastMirroredOffset)
	}

	if err := v1.m.CreateLink(ctx, "admin", wireext.LinkConfig{Name: "back", SourceBootstrap: v2.addr}, false); err != nil {
		t.Fatal(err)
	}
	res, err := v1.m.StartMirrorTopics(ctx, "admin", wireext.StartMirrorTopicsRequest{Link: "back", Topics: []string{"t"}, TruncateToCommon: true})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].ErrorCode != 0 || len(res[0].Partitions) != 1 || res[0].Partitions[0].TruncatedTo != 8 || res[0].Partitions[0].KeptIn != "t.truncated" {
		t.Fatalf("failback: %+v", res[0])
	}
	_, _, v2End, _ := v2.srv.PartitionEpochs("t", 0)
	v1.waitStatus(t, "t", "MIRRORING at V2's end", func(st wireext.MirrorPartitionStatus) bool {
		return st.State == wireext.StateMirroring && st.LogEndOffset == v2End
	})
	if _, _, end, _ := v1.srv.PartitionEpochs("t.truncated", 0); end != 13 {
		t.Fatalf("V1's keep topic ends at %d, want 13", end)
	}
	// The same again does nothing more (nothing to cut now).
	res, _ = v1.m.StartMirrorTopics(ctx, "admin", wireext.StartMirrorTopicsRequest{Link: "back", Topics: []string{"t"}, TruncateToCommon: true})
	if res[0].ErrorCode != 0 || res[0].Partitions[0].TruncatedTo != -1 {
		t.Fatalf("repeated failback: %+v", res[0])
	}
	// A live mirror of another link is refused.
	if err := v1.m.CreateLink(ctx, "admin", wireext.LinkConfig{Name: "other", SourceBootstrap: v2.addr}, false); err != nil {
		t.Fatal(err)
	}
	res, _ = v1.m.StartMirrorTopics(ctx, "admin", wireext.StartMirrorTopicsRequest{Link: "other", Topics: []string{"t"}, TruncateToCommon: true})
	if res[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("failback onto a live mirror: %+v", res[0])
	}
}
