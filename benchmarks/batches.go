package benchmarks

// The batches the load generators send: uncompressed ones of an exact size
// with pseudo-random values, compressed ones of text-like records fitted to a
// size by bisection (cached per size, codec and seed: every run of a scenario
// asks for the same ones), and the codec names of the command lines.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// BuildBatch returns a valid uncompressed v2 batch of exactly size bytes
// (at least 100) holding records with values of about recordBytes bytes
// of pseudo-random data, base offset 0, no producer id.
func BuildBatch(size, recordBytes int, seed uint64) ([]byte, int, error) {
	if size < 100 {
		return nil, 0, fmt.Errorf("batch size %d too small", size)
	}
	if recordBytes <= 0 {
		recordBytes = 1000
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	fill := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	// Estimate how many full records fit, back off while the encoding is
	// too long, then size the last value so the batch is exactly size bytes.
	key := []byte("k")
	var recs []kbatch.Record
	encode := func() ([]byte, error) {
		for i := range recs {
			recs[i].OffsetDelta = int32(i)
		}
		b := kbatch.NewBatch(1_700_000_000_000, recs...)
		b.LeaderEpoch = 0
		return kbatch.Encode(b)
	}
	n := max(1, (size-kbatch.HeaderSize)/(recordBytes+16))
	for range n {
		recs = append(recs, kbatch.Record{Key: key, Value: fill(recordBytes)})
	}
	for len(recs) > 1 {
		enc, err := encode()
		if err != nil {
			return nil, 0, err
		}
		if len(enc) <= size {
			break
		}
		recs = recs[:len(recs)-1]
	}
	// Adjust the last value (or add one) to hit size exactly; varint
	// lengths may shift by a byte, so search around the estimate.
	last := &recs[len(recs)-1]
	base, err := encode()
	if err != nil {
		return nil, 0, err
	}
	want := len(last.Value) + size - len(base)
	for try := max(0, want+4); try >= 0 && try > want-8; try-- {
		last.Value = fill(try)
		enc, err := encode()
		if err != nil {
			return nil, 0, err
		}
		if len(enc) == size {
			return enc, len(recs), nil
		}
	}
	return nil, 0, fmt.Errorf("cannot build a batch of exactly %d bytes", size)
}

// BuildCompressedBatch returns a valid v2 batch compressed with codec, as
// close to size bytes on the wire as whole records allow (never over it),
// holding records with text-like values of about recordBytes bytes
// (TextValue), base offset 0, no producer id.
func BuildCompressedBatch(size, recordBytes int, codec kbatch.Codec, seed uint64) ([]byte, int, error) {
	if size < 100 {
		return nil, 0, fmt.Errorf("batch size %d too small", size)
	}
	if recordBytes <= 0 {
		recordBytes = 1000
	}
	key := compressedKey{size, recordBytes, codec, seed}
	compressedMu.Lock()
	defer compressedMu.Unlock()
	if c, ok := compressedCache[key]; ok {
		return c.batch, c.records, nil
	}
	rng := rand.New(rand.NewPCG(seed, 0x7e47))
	var recs []kbatch.Record
	// n records encoded; the records are generated once, so a prefix of n
	// is the same whatever was tried before.
	encode := func(n int) ([]byte, error) {
		for len(recs) < n {
			recs = append(recs, kbatch.Record{OffsetDelta: int32(len(recs)), Key: []byte("k"), Value: TextValue(rng, recordBytes)})
		}
		b := kbatch.NewBatch(1_700_000_000_000, recs[:n]...)
		b.LeaderEpoch = 0
		b.Attributes = int16(codec)
		return kbatch.Encode(b)
	}
	// The compressed size grows with the number of records: double until
	// over size, then bisect for the most records that fit.
	fits := func(n int) ([]byte, bool, error) {
		enc, err := encode(n)
		return enc, err == nil && len(enc) <= size, err
	}
	best, ok, err := fits(1)
	if err != nil {
		return nil, 0, err
	}
	if !ok {
		return nil, 0, fmt.Errorf("one %d-byte record compressed with %s is over %d bytes", recordBytes, codec, size)
	}
	lo, hi := 1, 2
	for {
		enc, ok, err := fits(hi)
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			break
		}
		best, lo, hi = enc, hi, 2*hi
		if hi > 1<<22 {
			return nil, 0, errors.New("compressed batch does not grow")
		}
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		enc, ok, err := fits(mid)
		if err != nil {
			return nil, 0, err
		}
		if ok {
			best, lo = enc, mid
		} else {
			hi = mid
		}
	}
	compressedCache[key] = compressedBatch{best, lo}
	return best, lo, nil
}

// Compressed batches are costly to build (a bisection of compressions)
// and every run of a scenario asks for the same ones.
type compressedKey struct {
	size, recordBytes int
	codec             kbatch.Codec
	seed              uint64
}

type compressedBatch struct {
	batch   []byte
	records int
}

var (
	compressedMu    sync.Mutex
	compressedCache = map[compressedKey]compressedBatch{}
)

// parseCodecs maps codec names (default: none).
func parseCodecs(names []string) ([]kbatch.Codec, error) {
	if len(names) == 0 {
		return []kbatch.Codec{kbatch.CodecNone}, nil
	}
	var out []kbatch.Codec
	for _, n := range names {
		c, ok := codecByName[n]
		if !ok {
			return nil, fmt.Errorf("unknown codec %q (none, gzip, snappy, lz4, zstd)", n)
		}
		out = append(out, c)
	}
	return out, nil
}

var codecByName = map[string]kbatch.Codec{"none": kbatch.CodecNone, "gzip": kbatch.CodecGzip, "snappy": kbatch.CodecSnappy,
	"lz4": kbatch.CodecLZ4, "zstd": kbatch.CodecZstd}

// textWords are the vocabulary of TextValue.
var textWords = []string{"offset", "epoch", "leader", "batch", "record", "mirror", "consumer", "topic", "partition",
	"segment", "replica", "producer", "commit", "abort", "fetch", "index", "timestamp", "cluster", "broker", "group"}

// TextValue returns n bytes of log-like text (key=value fields from a
// small vocabulary, numbers, ids, message words) that compresses about 4x
// with gzip and zstd, 2.5x with LZ4 and snappy: neither zeros nor random
// bytes.
func TextValue(rng *rand.Rand, n int) []byte {
	b := make([]byte, 0, n+64)
	for len(b) < n {
		b = append(b, "level="...)
		b = append(b, [...]string{"INFO", "WARN", "DEBUG", "ERROR"}[rng.IntN(4)]...)
		b = append(b, " topic="...)
		b = append(b, textWords[rng.IntN(len(textWords))]...)
		b = append(b, " partition="...)
		b = strconv.AppendUint(b, uint64(rng.IntN(64)), 10)
		b = append(b, " offset="...)
		b = strconv.AppendUint(b, uint64(rng.IntN(1_000_000)), 10)
		b = append(b, " id="...)
		b = strconv.AppendUint(b, uint64(rng.Uint32()), 16)
		b = append(b, " msg="...)
		for range 1 + rng.IntN(4) {
			b = append(b, textWords[rng.IntN(len(textWords))]...)
			b = append(b, ' ')
		}
		b = append(b, '\n')
	}
	return b[:n]
}
