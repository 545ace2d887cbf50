package hotpath

import (
	"math/bits"
	"sync"
)

// Frame buffers: power-of-two size classes backed by sync.Pools. The frame
// reader (frame.go) charges every buffer it holds, at its class size, to
// byte budgets; the pools themselves are not charged (what they keep is
// garbage the collector may take).

const (
	minClassShift = 12 // 4 KiB
	maxClassShift = 27 // 128 MiB
	numClasses    = maxClassShift - minClassShift + 1
)

var classPools [numClasses]sync.Pool

// classOf returns the size class index for n bytes (n >= 1).
func classOf(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minClassShift
}

// classSize is the capacity of buffers of class c.
func classSize(c int) int { return 1 << (c + minClassShift) }

// getBuffer returns a buffer of length n from its class pool, and the pool
// handle to give back.
func getBuffer(n int) ([]byte, *[]byte) {
	c := classOf(n)
	if p, _ := classPools[c].Get().(*[]byte); p != nil {
		return (*p)[:n], p
	}
	b := make([]byte, classSize(c))
	return b[:n], &b
}

func putBuffer(p *[]byte) {
	c := classOf(cap(*p))
	if classSize(c) != cap(*p) {
		return // not one of ours
	}
	classPools[c].Put(p)
}
