package broker

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/hotpath"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/storage"
)

// gateGuard holds a partition's writer: its Begin signals entered and
// blocks until release is closed, then refuses the append.
type gateGuard struct {
	entered chan struct{}
	release chan struct{}
}

var errGate = errors.New("gate")

func (g *gateGuard) Begin() error {
	close(g.entered)
	<-g.release
	return errGate
}

func (g *gateGuard) End(*storage.AppendResult, error) {}

// holdWriter makes the partition's queue busy: an append whose guard
// blocks is written inline by a goroutine of its own, so every later
// submit queues behind it. The returned function releases it.
func holdWriter(t *testing.T, q *hotpath.Partition) (release func()) {
	t.Helper()
	g := &gateGuard{entered: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		grp := hotpath.NewGroup()
		a := &hotpath.Append{Verbatim: true, Guard: g}
		grp.Add(1)
		if err := q.Submit(ctxT(t), grp, a); err != nil {
			done <- err
			return
		}
		grp.Wait()
		done <- a.Err
	}()
	<-g.entered
	var once sync.Once
	release = func() {
		once.Do(func() {
			close(g.release)
			if err := <-done; !errors.Is(err, errGate) {
				t.Errorf("gate append: %v", err)
			}
		})
	}
	// A failing test must not leave the queue held: closing the broker
	// waits for it.
	t.Cleanup(release)
	return release
}

// readProduce reads the next response of c as a produce v11 answer.
func readProduce(t *testing.T, c *rawConn, corr int32) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	body := c.readAnswer(corr)
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 11
	if err := resp.ReadFrom(body[1:]); err != nil { // header v1: empty tags
		t.Fatalf("response %d: %v", corr, err)
	}
	return resp.Topics[0].Partitions[0]
}

// TestMirrorProducesOverlapOnOneConnection: mirror produces pipelined on
// one connection are all in the partition's queue at once, as normal
// produces are (the handler no longer waits for the write), and are
// written in order once the queue moves.
func TestMirrorProducesOverlapOnOneConnection(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push")})
	p := b.srv.cluster.topic("m").Partition(0)
	h := mustHandle(t, p)
	const n, per = 8, 3
	c := dialRaw(t, b.addr)
	release := holdWriter(t, h.queue)
	var buf []byte
	for i := range n {
		set := data(int64(i*per), 1, per).encode(t)
		buf = appendRequestFrame(buf, mirrorProduce(11, "m", 0, set, int64(i*per), -1), int32(i), "pipe")
	}
	c.write(buf)
	waitFor(t, "8 mirror produces in the partition queue", func() bool { return h.queue.Queued() == n })
	if end := h.log.LogEndOffset(); end != 0 {
		t.Fatalf("log end %d before the queue moved", end)
	}
	release()
	for i := range n {
		pr := readProduce(t, c, int32(i))
		if pr.ErrorCode != 0 || pr.BaseOffset != int64(i*per) {
			t.Fatalf("mirror produce %d: error %d (%v), base offset %d, want %d", i, pr.ErrorCode, strPtr(pr.ErrorMessage), pr.BaseOffset, i*per)
		}
	}
	if end := h.log.LogEndOffset(); end != n*per {
		t.Fatalf("log end %d, want %d", end, n*per)
	}
}

// TestMirrorStopRacingPipelinedProduces: a stop racing a pipeline of
// mirror produces on one connection leaves every acknowledged mirror
// batch before the stop's barrier and nothing mirrored after it; the
// acknowledged produces are a prefix of the pipeline and the rest are
// refused.
func TestMirrorStopRacingPipelinedProduces(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push"), "mirror.source.cluster.id": sp("src"), "retention.ms": sp("-1")})
	p := b.srv.cluster.topic("m").Partition(0)
	const n, per = 64, 2
	// The first produce registers the writer (a persisted state change),
	// so the pipeline's produces race the stop on equal terms.
	if pr := mirrorOne(t, b, "m", data(0, 1, per).encode(t), 0, -1); pr.ErrorCode != 0 {
		t.Fatalf("first mirror produce: %d", pr.ErrorCode)
	}
	c := dialRaw(t, b.addr)
	var buf []byte
	for i := 1; i < n; i++ {
		set := data(int64(i*per), 1, per).encode(t)
		buf = appendRequestFrame(buf, mirrorProduce(11, "m", 0, set, int64(i*per), -1), int32(i), "pipe")
	}
	half := len(buf) / 2
	c.write(buf[:half])
	stopped := make(chan error, 1)
	go func() {
		err, _ := incrementalAlter(t, b, "m", false, iacDelete("mirror.mode"))
		stopped <- err
	}()
	c.write(buf[half:])
	acked := 1
	for i := 1; i < n; i++ {
		pr := readProduce(t, c, int32(i))
		switch {
		case pr.ErrorCode == 0 && acked == i:
			acked++
		case pr.ErrorCode == 0:
			t.Fatalf("mirror produce %d acknowledged after a refusal", i)
		case pr.ErrorCode != kerr.PolicyViolation.Code:
			t.Fatalf("mirror produce %d: error %d (%v), want POLICY_VIOLATION once stopped", i, pr.ErrorCode, strPtr(pr.ErrorMessage))
		}
	}
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
	t.Logf("%d of %d mirror produces acknowledged before the stop", acked, n)
	bs := storedBatches(t, p, 0)
	barrier := -1
	for i, bt := range bs {
		if ct, ok := kbatch.ControlType(bt); ok && ct == kbatch.ControlMirrorPidReset {
			barrier = i
		}
	}
	if barrier != acked || len(bs) != acked+1 {
		t.Fatalf("%d batches stored, barrier at %d; want the %d acknowledged mirror batches, then the barrier", len(bs), barrier, acked)
	}
	for i, bt := range bs[:acked] {
		if kbatch.BaseOffset(bt) != int64(i*per) {
			t.Fatalf("batch %d at offset %d, want %d", i, kbatch.BaseOffset(bt), i*per)
		}
	}
}

// TestMirrorStopRefusesQueuedProduces: mirror produces admitted to the
// queue before a stop but written after it are refused (their writer
// check runs when they are written), so nothing mirrored follows the
// barrier.
func TestMirrorStopRefusesQueuedProduces(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push"), "retention.ms": sp("-1")})
	p := b.srv.cluster.topic("m").Partition(0)
	h := mustHandle(t, p)
	const n = 4
	c := dialRaw(t, b.addr)
	release := holdWriter(t, h.queue)
	var buf []byte
	for i := range n {
		buf = appendRequestFrame(buf, mirrorProduce(11, "m", 0, data(int64(i), 1, 1).encode(t), int64(i), -1), int32(i), "pipe")
	}
	c.write(buf)
	waitFor(t, "the mirror produces in the partition queue", func() bool { return h.queue.Queued() == n })
	if err, msg := incrementalAlter(t, b, "m", false, iacDelete("mirror.mode")); err != nil {
		t.Fatalf("stop: %v %s", err, msg)
	}
	release()
	for i := range n {
		if pr := readProduce(t, c, int32(i)); pr.ErrorCode != kerr.PolicyViolation.Code {
			t.Fatalf("mirror produce %d written after the stop: error %d, want POLICY_VIOLATION", i, pr.ErrorCode)
		}
	}
	bs := storedBatches(t, p, 0)
	if len(bs) != 1 || controlBatches(bs, kbatch.ControlMirrorPidReset, -1) != 1 {
		t.Fatalf("%d batches stored; want only the barrier", len(bs))
	}
}

// TestMirrorProduceAcksAllWaitsForDurability: under --flush always a
// pipelined mirror produce with acks=-1 is answered only once the group
// commit covers it.
func TestMirrorProduceAcksAllWaitsForDurability(t *testing.T) {
	b := startBroker(t, t.TempDir(), func(c *Config) { c.Flush = "always" })
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push")})
	l, err := partitionLog(b.srv.cluster.topic("m").Partition(0))
	if err != nil {
		t.Fatal(err)
	}
	const n, per = 16, 2
	c := dialRaw(t, b.addr)
	var buf []byte
	for i := range n {
		req := mirrorProduce(11, "m", 0, data(int64(i*per), 1, per).encode(t), int64(i*per), -1)
		req.Acks = -1
		buf = appendRequestFrame(buf, req, int32(i), "pipe")
	}
	c.write(buf)
	for i := range n {
		pr := readProduce(t, c, int32(i))
		if pr.ErrorCode != 0 || pr.BaseOffset != int64(i*per) {
			t.Fatalf("mirror produce %d: error %d, base offset %d", i, pr.ErrorCode, pr.BaseOffset)
		}
		if d := l.DurableOffset(); d < int64((i+1)*per) {
			t.Fatalf("mirror produce %d (up to offset %d) answered at durable offset %d", i, (i+1)*per-1, d)
		}
	}
}

// TestBrokenConnectionKeepsQueuedFrames: when the writer gives up on a
// produce (request timeout) and closes the connection while its append is
// still queued, the request frame stays held (its bytes are what the
// queue writes) until the append completes; the batch is stored as sent.
func TestBrokenConnectionKeepsQueuedFrames(t *testing.T) {
	b := startBroker(t, t.TempDir(), func(c *Config) { c.RequestTimeout = 300 * time.Millisecond })
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push"), "retention.ms": sp("-1")})
	p := b.srv.cluster.topic("m").Partition(0)
	h := mustHandle(t, p)
	conns := func() int {
		b.srv.mu.Lock()
		defer b.srv.mu.Unlock()
		return len(b.srv.mu.conns)
	}
	others := conns() // the admin client's
	release := holdWriter(t, h.queue)
	set := data(0, 1, 4).encode(t)
	c := dialRaw(t, b.addr)
	c.write(appendRequestFrame(nil, mirrorProduce(11, "m", 0, set, 0, -1), 1, "broken"))
	c.expectClosed()
	waitFor(t, "the connection to be gone", func() bool { return conns() == others })
	if b.srv.budget.InUse() == 0 {
		t.Fatal("the frame of a queued append was recycled when its connection broke")
	}
	release()
	waitInflightZero(t, b.srv)
	bs := storedBatches(t, p, 0)
	if len(bs) != 1 || !bytes.Equal(bs[0], set) {
		t.Fatalf("stored %d batches, want the one sent, byte for byte", len(bs))
	}
}
