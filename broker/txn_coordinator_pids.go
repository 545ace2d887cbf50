package broker

import (
	"fmt"
	"strconv"
)

// ensureAbove makes every later allocation return an id above min.
func (p *producerIDs) ensureAbove(min int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if min < p.next {
		return nil
	}
	next := min + 1
	end := next + producerIDBlock
	if err := writeFileAtomic(p.fs, metaDirName, producerIDsFile, []byte(strconv.FormatInt(end, 10)+"\n")); err != nil {
		return fmt.Errorf("%w: persisting producer id block: %v", errStorage, err)
	}
	p.next, p.end = next, end
	return nil
}
