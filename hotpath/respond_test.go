package hotpath

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
)

// Frames queued together reach a TCP peer in order, in one vectored write.
func TestResponseWriterCoalescesOverTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		b, _ := io.ReadAll(c)
		got <- b
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	var rw ResponseWriter
	var want []byte
	for i := 0; i < 50; i++ {
		p := GetResponseBuffer()
		resp := ProduceResponse{Version: int16(3 + i%11), Topics: []ProduceTopicResponse{{Name: []byte("t"),
			Partitions: []ProducePartitionResponse{NewPartitionResponse(int32(i), 0)}}}}
		*p = AppendResponseFrame(*p, int32(i), &resp)
		want = append(want, *p...)
		if rw.Add(p) {
			t.Fatal("flush requested below the default limit")
		}
	}
	if rw.Pending() != 50 {
		t.Fatal(rw.Pending())
	}
	if err := rw.Flush(c); err != nil {
		t.Fatal(err)
	}
	if rw.Pending() != 0 {
		t.Fatal("frames still pending after flush")
	}
	c.Close()
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("peer got %d bytes, want %d in order", len(b), len(want))
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestResponseWriterLimitAndError(t *testing.T) {
	rw := ResponseWriter{MaxPending: 2}
	if rw.Add(GetResponseBuffer()) {
		t.Fatal("flush due after one frame")
	}
	p := GetResponseBuffer()
	*p = append(*p, 1, 2, 3)
	if !rw.Add(p) {
		t.Fatal("flush not due at MaxPending")
	}
	if err := rw.Flush(failWriter{}); err == nil {
		t.Fatal("write error lost")
	}
	if rw.Pending() != 0 {
		t.Fatal("buffers kept after a failed flush")
	}
	if err := rw.Flush(failWriter{}); err != nil {
		t.Fatal("empty flush wrote")
	}
}
