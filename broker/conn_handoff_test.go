package broker

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Frames of handoffBytes and more are handled on the connection's handler
// goroutine while the reader reads on; smaller frames that follow them
// must wait their turn. Mixed pipelines must still be handled and
// answered in request order, and appends made in request order.
func TestLargeFramesHandedOffStayInOrder(t *testing.T) {
	b := startBroker(t, t.TempDir(), func(c *Config) { c.MaxInFlightPerConn = 4 })
	createTopic(t, b, "big", 1, nil)
	big := bytes.Repeat([]byte{'v'}, 200<<10)
	var buf []byte
	const n = 24
	large := func(i int) bool { return i%3 != 2 }
	for i := range n {
		switch {
		case large(i):
			// Three 200 KiB records: a frame above handoffBytes.
			req := produceRequest(9, "big", 0, encodeBatch(t, 0, -1, -1, big, big, big))
			f := appendRequestFrame(nil, req, int32(i), "handoff")
			if len(f) < handoffBytes {
				t.Fatalf("frame of %d bytes is below handoffBytes", len(f))
			}
			buf = append(buf, f...)
		case i%2 == 0:
			buf = append(buf, apiVersionsFrame(int32(i), 3)...)
		default:
			req := produceRequest(9, "big", 0, encodeBatch(t, 0, -1, -1, []byte("small")))
			buf = appendRequestFrame(buf, req, int32(i), "handoff")
		}
	}
	c := dialRaw(t, b.addr)
	go func() { _, _ = c.nc.Write(buf) }()
	next := int64(0)
	for i := range n {
		body := c.readAnswer(int32(i))
		if !large(i) && i%2 == 0 {
			continue // ApiVersions
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = 9
		if err := resp.ReadFrom(body[1:]); err != nil {
			t.Fatalf("produce response %d: %v", i, err)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("produce %d: error code %d", i, p.ErrorCode)
		}
		// Appends happen in request order: each base offset is the
		// previous batch's end.
		if p.BaseOffset != next {
			t.Fatalf("produce %d: base offset %d, want %d", i, p.BaseOffset, next)
		}
		if large(i) {
			next += 3
		} else {
			next++
		}
	}
	waitInflightZero(t, b.srv)
	assertHealthy(t, b)
}

// A large frame that fails on the handler goroutine closes the connection
// after the requests before it are answered, and releases the frames read
// behind it.
func TestHandedOffFrameErrorClosesConnection(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "big", 1, nil)
	big := bytes.Repeat([]byte{'v'}, 300<<10)
	var buf []byte
	req := produceRequest(9, "big", 0, encodeBatch(t, 0, -1, -1, big, big))
	buf = appendRequestFrame(buf, req, 1, "handoff")
	// A Produce whose body is not a Produce request: undecodable.
	bad := appendRequestFrame(nil, req, 2, "handoff")
	for i := 20; i < len(bad); i++ {
		bad[i] = 0xff
	}
	buf = append(buf, bad...)
	buf = append(buf, apiVersionsFrame(3, 3)...)
	c := dialRaw(t, b.addr)
	go func() { _, _ = c.nc.Write(buf) }()
	corr, _, err := c.read()
	if err != nil || corr != 1 {
		t.Fatalf("first response: corr %d, err %v", corr, err)
	}
	c.expectClosed()
	waitInflightZero(t, b.srv)
	assertHealthy(t, b)
}
