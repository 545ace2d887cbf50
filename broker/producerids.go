package broker

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"

	"github.com/verbatim-kafka/verbatim/storage"
)

// producerIDs allocates idempotent producer ids that never repeat, across
// restarts and crashes included: ids are handed out from blocks, and the
// end of a block is made durable before the first id of the block is
// returned. A crash wastes at most the rest of one block. In cluster
// mode the blocks come from the cluster store (fromStore), whose
// allocator no two brokers share a block of.
type producerIDs struct {
	fs storage.FS
	// fromStore reserves n ids in the cluster store and returns the
	// first (cluster mode); nil: the local file.
	fromStore func(n int64) (int64, error)
	mu        sync.Mutex
	// next is the next id to hand out; end is the persisted exclusive
	// bound (no id >= end has ever been handed out).
	next, end int64
}

const (
	producerIDsFile  = "producer-ids"
	producerIDBlock  = 1000
	producerIDsFirst = 0
)

func openProducerIDs(fsys storage.FS) (*producerIDs, error) {
	p := &producerIDs{fs: fsys}
	data, err := readFile(fsys, metaDirName+"/"+producerIDsFile)
	switch {
	case errors.Is(err, os.ErrNotExist):
		p.next, p.end = producerIDsFirst, producerIDsFirst
	case err != nil:
		return nil, fmt.Errorf("reading producer id allocator: %w", err)
	default:
		n, perr := strconv.ParseInt(string(bytes.TrimSpace(data)), 10, 64)
		if perr != nil || n < 0 {
			return nil, fmt.Errorf("producer id allocator %s/%s is corrupt: %q", metaDirName, producerIDsFile, bytes.TrimSpace(data))
		}
		// Everything below the persisted bound may have been used.
		p.next, p.end = n, n
	}
	return p, nil
}

// allocate returns a fresh producer id.
func (p *producerIDs) allocate() (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next >= p.end && p.fromStore != nil {
		first, err := p.fromStore(producerIDBlock)
		if err != nil {
			return -1, err
		}
		p.next, p.end = first, first+producerIDBlock
	}
	if p.next >= p.end {
		if p.end > math.MaxInt64-producerIDBlock {
			return -1, errors.New("producer id space exhausted")
		}
		end := p.end + producerIDBlock
		if err := writeFileAtomic(p.fs, metaDirName, producerIDsFile, []byte(strconv.FormatInt(end, 10)+"\n")); err != nil {
			return -1, fmt.Errorf("%w: persisting producer id block: %v", errStorage, err)
		}
		p.end = end
	}
	id := p.next
	p.next++
	return id, nil
}

// ensureAbove makes every later allocation return an id above min.
func (p *producerIDs) ensureAbove(min int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if min < p.next {
		return nil
	}
	if p.fromStore != nil {
		return p.ensureAboveInStore(min)
	}
	next := min + 1
	end := next + producerIDBlock
	if err := writeFileAtomic(p.fs, metaDirName, producerIDsFile, []byte(strconv.FormatInt(end, 10)+"\n")); err != nil {
		return fmt.Errorf("%w: persisting producer id block: %v", errStorage, err)
	}
	p.next, p.end = next, end
	return nil
}

// ensureAboveInStore is ensureAbove over the cluster store: blocks are
// reserved until one reaches past min (an id a mirrored producer uses),
// and allocation continues above min in it.
// REQUIRES: p.mu is held.
func (p *producerIDs) ensureAboveInStore(min int64) error {
	n := int64(producerIDBlock)
	for {
		first, err := p.fromStore(n)
		if err != nil {
			return err
		}
		if end := first + n; end > min+1 {
			p.next, p.end = max(first, min+1), end
			return nil
		}
		// The next block starts at first+n or later: make it reach past
		// min by a block.
		n = min + 1 - (first + n) + producerIDBlock
	}
}
