package hotpath

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/verbatim-kafka/verbatim/budget"
)

// FuzzFrameStream reads a byte stream as frames, in reads of a fuzzed size,
// keeping up to two frames before releasing them, with thresholds shrunk
// so that small inputs take every promotion path. Invariants: each frame
// or error is what the stream says (checked by parsing it independently),
// while a frame is read the charge is at least what has arrived and at
// most the bound (floor, or 9x the bytes received), every budget holds the
// same charge, and once everything is released every budget is empty.
func FuzzFrameStream(f *testing.F) {
	f.Add(frameBytes([]byte("abc"), nil, bytes.Repeat([]byte{1}, 5000)), uint16(100), uint8(1))
	f.Add(append(sizePrefix(70000), make([]byte, 100)...), uint16(1), uint8(0))
	f.Add(append(sizePrefix(60000), make([]byte, 40000)...), uint16(4000), uint8(2))
	f.Add(frameBytes(make([]byte, 9000), make([]byte, 65536)), uint16(8191), uint8(2))
	f.Add([]byte{0, 0}, uint16(3), uint8(0))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, uint16(3), uint8(0))
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint16, keep uint8) {
		const maxFrame, first, direct = 64 << 10, 4 << 10, 8 << 10
		broker, peer := budget.New(1<<20), budget.New(1<<20)
		fr, err := NewFrameReaderConfig(FrameConfig{ConnBytes: 1 << 20, Shared: []*budget.Budget{peer, broker}, MaxFrame: maxFrame})
		if err != nil {
			t.Fatal(err)
		}
		fr.first, fr.direct = first, direct
		r := &scriptReader{data: stream, chunk: int(chunk)%9000 + 1, stopAt: -1}
		var kept []Frame
		var keptBytes int64
		frameStart := 0
		r.onRead = func(pos int) {
			got := pos - frameStart - 4
			if got < 0 {
				return
			}
			c := fr.InFlight() - keptBytes
			if c < int64(got) || c > max(int64(direct+first), int64(GrowFactor+1)*int64(got)) {
				t.Fatalf("%d bytes of a frame in, charge %d", got, c)
			}
			if peer.InUse() != c+keptBytes || broker.InUse() != c+keptBytes {
				t.Fatalf("budgets disagree: conn %d peer %d broker %d", c+keptBytes, peer.InUse(), broker.InUse())
			}
		}
		for {
			frameStart = r.pos
			rest := stream[frameStart:]
			fm, err := fr.ReadFrame(context.Background(), r)
			if err != nil {
				checkStreamError(t, rest, maxFrame, err)
				break
			}
			n := int(binary.BigEndian.Uint32(rest))
			if !bytes.Equal(fm.Buf, rest[4:4+n]) {
				t.Fatalf("frame of %d bytes read wrong", n)
			}
			if fm.charged != int64(classSize(classOf(max(n, 1)))) {
				t.Fatalf("frame of %d bytes holds %d", n, fm.charged)
			}
			kept = append(kept, fm)
			keptBytes += fm.charged
			if len(kept) > int(keep%3) {
				keptBytes -= kept[0].charged
				kept[0].Release()
				kept = kept[1:]
			}
		}
		for i := range kept {
			kept[i].Release()
		}
		if fr.InFlight() != 0 || peer.InUse() != 0 || broker.InUse() != 0 {
			t.Fatalf("after release: conn %d peer %d broker %d", fr.InFlight(), peer.InUse(), broker.InUse())
		}
	})
}

// checkStreamError checks the error ReadFrame gave for the rest of a
// stream.
func checkStreamError(t *testing.T, rest []byte, maxFrame int, err error) {
	t.Helper()
	switch {
	case len(rest) == 0:
		if err != io.EOF {
			t.Fatalf("at the end: %v", err)
		}
		return
	case len(rest) < 4:
		if err != io.ErrUnexpectedEOF {
			t.Fatalf("partial size: %v", err)
		}
		return
	}
	var fe *FrameError
	if !errors.As(err, &fe) {
		t.Fatalf("error after the size is not a FrameError: %v", err)
	}
	n := int(int32(binary.BigEndian.Uint32(rest)))
	switch {
	case n < 0 || n > maxFrame:
		if !errors.Is(err, ErrFrameTooLarge) || fe.Size != n {
			t.Fatalf("size %d: %v", n, err)
		}
	case len(rest)-4 < n:
		if !errors.Is(err, io.ErrUnexpectedEOF) || fe.Received != len(rest)-4 || !bytes.Equal(fe.Head, rest[4:4+min(fe.Received, headBytes)]) {
			t.Fatalf("truncated frame of %d with %d bytes: %v (head %d)", n, len(rest)-4, err, len(fe.Head))
		}
	default:
		t.Fatalf("complete frame of %d bytes failed: %v", n, err)
	}
}
