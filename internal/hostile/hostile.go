package hostile

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"

	"github.com/klauspost/compress/flate"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// Codecs are the four compression codecs.
var Codecs = []kbatch.Codec{kbatch.CodecGzip, kbatch.CodecSnappy, kbatch.CodecLZ4, kbatch.CodecZstd}

// WithRecords returns a copy of batch b with its records section replaced
// by payload, its length and CRC fixed: a batch whose header checks pass
// whatever the payload.
func WithRecords(b, payload []byte) []byte {
	out := append(bytes.Clone(b[:kbatch.HeaderSize]), payload...)
	binary.BigEndian.PutUint32(out[kbatch.LengthOffset:], uint32(len(out)-kbatch.LogOverhead))
	kbatch.SetCRC(out)
	return out
}

// Batch returns a batch of codec c holding payload as its records section,
// declaring count records (offsets 0..count-1), timestamps at ts.
func Batch(c kbatch.Codec, payload []byte, count int32, ts int64) []byte {
	recs := make([]kbatch.Record, count)
	for i := range recs {
		recs[i].OffsetDelta = int32(i)
	}
	b := kbatch.NewBatch(ts, recs...)
	raw, err := kbatch.Encode(b) // uncompressed: only its header is kept
	if err != nil {
		panic(err)
	}
	out := WithRecords(raw, payload)
	binary.BigEndian.PutUint16(out[kbatch.AttributesOffset:], uint16(c))
	kbatch.SetCRC(out)
	return out
}

// Poison returns a payload that starts like a stream of codec c (its magic
// number or framing) and is not valid for it.
func Poison(c kbatch.Codec) []byte {
	garbage := bytes.Repeat([]byte{0xa5, 0x5a, 0xff, 0x00, 0x13}, 40)
	var head []byte
	switch c {
	case kbatch.CodecGzip: // gzip header, then no deflate stream
		head = []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}
	case kbatch.CodecSnappy: // xerial header, one chunk of garbage
		head = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, byte(len(garbage))}
	case kbatch.CodecLZ4: // an LZ4 frame descriptor, then garbage blocks
		head = []byte{0x04, 0x22, 0x4d, 0x18, 0x64, 0x40, 0xa7, 0xc8, 0, 0, 0}
	case kbatch.CodecZstd: // a zstd frame header, then garbage blocks
		head = []byte{0x28, 0xb5, 0x2f, 0xfd, 0x20, 0xc8, 0x05, 0x03, 0x00}
	default:
		panic("hostile: not a compression codec")
	}
	return append(head, garbage...)
}

// GzipBomb returns a gzip member (one, valid, with its CRC and size) of a
// records section holding one record whose value is n zero bytes: about
// n/1000 bytes inflating to n. It is built without compressing n bytes: the
// deflate blocks of one MiB of zeros after a window of zeros are the same
// everywhere, so one sync-flushed copy is repeated.
func GzipBomb(n int64) []byte {
	const mib = 1 << 20
	n = max(n/mib, 2) * mib
	// attributes, timestamp delta, offset delta, null key, value length,
	// value, header count
	body := 4 + int64(varintLen(n)) + n + 1
	var prefix []byte
	prefix = binary.AppendVarint(prefix, body) // record length
	prefix = append(prefix, 0, 0, 0)           // attributes, timestamp delta, offset delta
	prefix = binary.AppendVarint(prefix, -1)   // null key
	prefix = binary.AppendVarint(prefix, n)    // value length
	suffix := []byte{0}                        // no headers

	var def bytes.Buffer
	w, err := flate.NewWriter(&def, flate.BestCompression)
	if err != nil {
		panic(err)
	}
	zeros := make([]byte, mib)
	w.Write(prefix)
	w.Write(zeros)
	w.Flush()
	a := def.Len()
	w.Write(zeros)
	w.Flush()
	chunk := bytes.Clone(def.Bytes()[a:])
	for i := int64(2); i < n/mib; i++ {
		def.Write(chunk)
	}
	// The final block continues the same stream (the writer's window is
	// zeros too); the writer's own trailer is not used.
	var tail bytes.Buffer
	w.Reset(&tail)
	w.Write(suffix)
	w.Close()

	crc := crc32.Update(0, crc32.IEEETable, prefix)
	for i := int64(0); i < n/mib; i++ {
		crc = crc32.Update(crc, crc32.IEEETable, zeros)
	}
	crc = crc32.Update(crc, crc32.IEEETable, suffix)
	size := int64(len(prefix)) + n + int64(len(suffix))

	out := []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}
	out = append(out, def.Bytes()...)
	out = append(out, tail.Bytes()...)
	out = binary.LittleEndian.AppendUint32(out, crc)
	return binary.LittleEndian.AppendUint32(out, uint32(size))
}

func varintLen(v int64) int { return len(binary.AppendVarint(nil, v)) }
