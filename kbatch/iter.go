package kbatch

// Iter walks the batches of a record set in place:
//
//	for it := kbatch.Batches(set); it.Next(); {
//		b := it.Batch()
//		...
//	}
//
// A batch is at least HeaderSize bytes and as long as its length field
// says; the walk stops at the first rest that does not hold one (Rest,
// Pos). Magic and CRC are not checked: it is for sets whose framing was
// checked (hotpath.Validate, storage's checkSet) or that are read
// defensively. A value type over the set: walking allocates nothing.
type Iter struct {
	rest  []byte
	batch []byte
	pos   int
}

// Batches returns an iterator over set's batches.
func Batches(set []byte) Iter { return Iter{rest: set} }

// Next moves to the next batch; false at the end of the set or when the
// rest is not a whole batch.
func (it *Iter) Next() bool {
	it.pos += len(it.batch)
	it.batch = nil
	if len(it.rest) < HeaderSize {
		return false
	}
	size := int64(LogOverhead) + int64(Length(it.rest))
	if size < HeaderSize || size > int64(len(it.rest)) {
		return false
	}
	n := int(size)
	it.batch, it.rest = it.rest[:n:n], it.rest[n:]
	return true
}

// Batch is the batch Next moved to (capacity capped at its length).
func (it *Iter) Batch() []byte { return it.batch }

// Pos is the position of Batch in the set; after the walk, of Rest.
func (it *Iter) Pos() int { return it.pos }

// Rest returns the bytes after Batch: empty once a whole set was walked.
func (it *Iter) Rest() []byte { return it.rest }
