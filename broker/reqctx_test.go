package broker

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRequestCtxDeadline(t *testing.T) {
	var c requestCtx
	c.init(context.Background(), time.Now().Add(30*time.Millisecond))
	if c.Err() != nil {
		t.Fatal("ended early")
	}
	if d, ok := c.Deadline(); !ok || d.IsZero() {
		t.Fatal("no deadline")
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("deadline never fired")
	}
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err %v", c.Err())
	}
	c.release()
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("release changed the cause: %v", c.Err())
	}
}

func TestRequestCtxExpiredWithoutDone(t *testing.T) {
	var c requestCtx
	c.init(context.Background(), time.Now().Add(-time.Second))
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err %v", c.Err())
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Done of an expired context is open")
	}
}

func TestRequestCtxParentCancel(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	var c requestCtx
	c.init(parent, time.Now().Add(time.Hour))
	done := c.Done()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("parent cancel not propagated")
	}
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("Err %v", c.Err())
	}
	// Without Done: Err reports the parent directly.
	var c2 requestCtx
	c2.init(parent, time.Now().Add(time.Hour))
	if !errors.Is(c2.Err(), context.Canceled) {
		t.Fatalf("Err %v", c2.Err())
	}
}

func TestRequestCtxRelease(t *testing.T) {
	var c requestCtx
	c.init(context.Background(), time.Now().Add(time.Hour))
	done := c.Done()
	c.release()
	select {
	case <-done:
	default:
		t.Fatal("release did not close Done")
	}
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("Err %v", c.Err())
	}
	// A context derived from it ends too.
	var c2 requestCtx
	c2.init(context.Background(), time.Now().Add(time.Hour))
	child, cancel := context.WithCancel(&c2)
	defer cancel()
	c2.release()
	select {
	case <-child.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("derived context not ended")
	}
}
