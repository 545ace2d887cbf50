package broker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
	"github.com/verbatim-kafka/verbatim/storage"
)

// BenchmarkMirrorProduceInFlight measures mirror produces (docs/protocol.md)
// on one connection over loopback TCP with 1 and 8 requests in flight:
// with 8 the appends of one connection overlap in the partition queue
// (coalesced writes) as those of normal produce do. Each request carries
// one batch of 16 records of 100 bytes at the log end; the topic has its
// default mirror policies. allocs/op is per request, client included.
func BenchmarkMirrorProduceInFlight(b *testing.B) {
	for _, window := range []int{1, 8} {
		b.Run(fmt.Sprintf("inflight=%d", window), func(b *testing.B) { benchProduceConn(b, true, window) })
	}
}

// BenchmarkProduceInFlight is BenchmarkMirrorProduceInFlight's ordinary
// produce (acks=-1, flush never) for comparison.
func BenchmarkProduceInFlight(b *testing.B) {
	for _, window := range []int{1, 8} {
		b.Run(fmt.Sprintf("inflight=%d", window), func(b *testing.B) { benchProduceConn(b, false, window) })
	}
}

// benchProduceConn sends b.N produces of one batch on one connection,
// window at a time.
func benchProduceConn(b *testing.B, mirror bool, window int, mods ...func(*Config)) {
	s, l := openProduceServer(b, "", "bench", mirror, mods...)
	defer func() { _ = s.Shutdown(context.Background()) }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()

	const per = 16
	recs := make([]kbatch.Record, per)
	for i := range recs {
		recs[i] = kbatch.Record{OffsetDelta: int32(i), Value: make([]byte, 100)}
	}
	bt := kbatch.NewBatch(1_700_000_000_000, recs...)
	bt.LeaderEpoch = 1
	batch := kbatchtest.Encode(b, bt)
	const sentinel = 0x5a5a5a5a5a5a5a5a
	req := produceRequest(9, "bench", 0, batch)
	if mirror {
		req = mirrorProduce(11, "bench", 0, batch, sentinel, -1)
	}
	frame := appendRequestFrame(nil, req, 1, "bench")
	at := bytes.Index(frame, batch)
	exp := bytes.Index(frame, binary.BigEndian.AppendUint64(nil, sentinel))
	if at < 0 || mirror && exp < 0 {
		b.Fatal("batch or expected log end not found in the frame")
	}

	tokens := make(chan struct{}, window)
	done := make(chan error, 1)
	go func() {
		br := bufio.NewReader(nc)
		var resp [256]byte
		for range b.N {
			if _, err := io.ReadFull(br, resp[:4]); err != nil {
				done <- err
				return
			}
			n := int(binary.BigEndian.Uint32(resp[:4]))
			if n > len(resp) {
				done <- fmt.Errorf("response of %d bytes", n)
				return
			}
			if _, err := io.ReadFull(br, resp[:n]); err != nil {
				done <- err
				return
			}
			<-tokens
		}
		done <- nil
	}()
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		tokens <- struct{}{}
		if mirror {
			off := uint64(i * per)
			binary.BigEndian.PutUint64(frame[at:], off)
			binary.BigEndian.PutUint64(frame[exp:], off)
		}
		if _, err := nc.Write(frame); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if end := l.LogEndOffset(); end != int64(b.N*per) {
		b.Fatalf("log end %d after %d produces of %d records: some were refused", end, b.N, per)
	}
}

// openProduceServer opens a broker (not serving) with flush policy flush
// and a one-partition topic, a mirror topic when mirror; it returns the
// topic's log too.
func openProduceServer(tb testing.TB, flush, topic string, mirror bool, mods ...func(*Config)) (*Server, *storage.Log) {
	tb.Helper()
	cfg := quietConfig(tb.TempDir())
	cfg.Flush = flush
	for _, m := range mods {
		m(&cfg)
	}
	s, err := Open(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	over := map[string]string{}
	if mirror {
		over["mirror.mode"] = "push"
	}
	tc, err := newTopicConfig(over)
	if err == nil {
		_, err = s.cluster.createTopic(topic, 1, tc, false)
	}
	if err != nil {
		_ = s.Shutdown(context.Background())
		tb.Fatal(err)
	}
	p := s.cluster.topic(topic).Partition(0)
	if mirror {
		// The writer of mirrorProduce (registerTestWriter).
		if e, errs := s.registerMirrorWriters([]*Partition{p}, writerID{}); errs[0] != nil || e != testWriterEpoch {
			_ = s.Shutdown(context.Background())
			tb.Fatalf("registering: epoch %d, %v", e, errs[0])
		}
	}
	return s, p.Log.(*logHandle).log
}
