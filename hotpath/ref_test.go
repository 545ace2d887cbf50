package hotpath

import (
	"encoding/binary"
	"errors"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// refValidate is the slow reference the fuzz targets compare Validate
// against: batches are decoded field by field with kmsg.RecordBatch, records
// with franz-go's kbin.Reader, and Kafka's rules are applied in the plainest
// form. It returns the Kafka error code (0 = accepted) and, for an accepted
// normal-mode batch, the MaxTimestamp and attributes the stored batch must
// carry.
func refValidate(set []byte, o *Options) (code int16, wantMax int64, wantAttrs int16) {
	// Frame the set into kmsg batches; tail is the framing verdict on what
	// follows the last complete batch (0: nothing, -1: a partial batch).
	var batches []kmsg.RecordBatch
	var tail int16
	rest := set
	for len(rest) > 0 {
		tail = refFrame(rest, o.Mode)
		if tail != 0 {
			break
		}
		length := int32(binary.BigEndian.Uint32(rest[8:]))
		var b kmsg.RecordBatch
		if err := b.ReadFrom(rest[:12+length]); err != nil {
			panic(err) // framing guaranteed the bytes
		}
		batches = append(batches, b)
		rest = rest[12+length:]
		if o.Mode == Normal {
			break
		}
	}
	if o.Mode == Verbatim {
		return refVerbatim(batches, tail), 0, 0
	}
	if tail > 0 {
		return tail, 0, 0
	}
	if len(batches) == 0 {
		return kerr.InvalidRecord.Code, 0, 0
	}
	return refNormal(&batches[0], len(rest), o)
}

// refFrame is Kafka's framing verdict on the batch at the start of b: 0 for
// a complete magic-2 batch, -1 for a partial one, else an error code.
func refFrame(b []byte, mode Mode) int16 {
	if len(b) < 12 {
		return -1
	}
	length := int32(binary.BigEndian.Uint32(b[8:]))
	if length < 14 {
		return kerr.CorruptMessage.Code
	}
	if len(b) < 17 {
		return -1
	}
	if magic := int8(b[16]); magic < 0 || magic > 2 {
		return kerr.CorruptMessage.Code
	} else if int64(len(b)) < 12+int64(length) {
		return -1
	} else if magic != 2 {
		if mode == Verbatim {
			return kerr.UnsupportedForMessageFormat.Code
		}
		return kerr.InvalidRecord.Code
	}
	if 12+int64(length) < 61 {
		return kerr.CorruptMessage.Code
	}
	return 0
}

func refCRC(b *kmsg.RecordBatch) uint32 {
	// CRC-32C over attributes..end: re-encode the batch and checksum it.
	raw := b.AppendTo(nil)
	return crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))
}

func refVerbatim(batches []kmsg.RecordBatch, tail int16) int16 {
	if len(batches) == 0 && tail == 0 {
		return kerr.InvalidRecord.Code
	}
	prevLast := int64(-1)
	for i := range batches {
		b := &batches[i]
		if uint32(b.CRC) != refCRC(b) {
			return kerr.CorruptMessage.Code
		}
		switch {
		case b.Attributes&7 > 4,
			b.FirstOffset < 0,
			b.LastOffsetDelta < 0,
			b.FirstOffset+int64(b.LastOffsetDelta) < b.FirstOffset, // overflow
			b.NumRecords < 0 || int64(b.NumRecords) > int64(b.LastOffsetDelta)+1,
			b.FirstOffset <= prevLast,
			b.Attributes&0x10 != 0 && b.ProducerID < 0:
			return kerr.InvalidRecord.Code
		}
		prevLast = b.FirstOffset + int64(b.LastOffsetDelta)
		if b.Attributes&0x20 == 0 {
			continue
		}
		if b.Attributes&7 != 0 || b.LastOffsetDelta != 0 {
			return kerr.InvalidRecord.Code
		}
		if b.NumRecords == 0 {
			continue
		}
		r := kbin.Reader{Src: b.Records}
		rec, ok := refRecord(&r)
		if !ok || len(r.Src) != 0 || rec.OffsetDelta != 0 || len(rec.Key) < 4 || rec.Value == nil {
			return kerr.InvalidRecord.Code
		}
		kr := kbin.Reader{Src: rec.Key}
		version, typ := kr.Int16(), kr.Int16()
		if version != 0 {
			return kerr.InvalidRecord.Code
		}
		switch typ {
		case 0, 1:
			vr := kbin.Reader{Src: rec.Value}
			vv := vr.Int16()
			vr.Int32()
			if b.Attributes&0x10 == 0 || b.ProducerID < 0 || !vr.Ok() || vv < 0 {
				return kerr.InvalidRecord.Code
			}
		case 7:
			vr := kbin.Reader{Src: rec.Value}
			vv := vr.Int16()
			s := vr.CompactNullableString()
			for n := vr.Uvarint(); n > 0 && vr.Ok(); n-- {
				vr.Uvarint()
				vr.Span(int(vr.Uvarint()))
			}
			if !vr.Ok() || vv < 0 || s == nil || len(vr.Src) != 0 {
				return kerr.InvalidRecord.Code
			}
		default:
			return kerr.InvalidRecord.Code
		}
	}
	if tail < 0 {
		return kerr.CorruptMessage.Code
	}
	return tail
}

type refRec struct {
	TimestampDelta int64
	OffsetDelta    int32
	Key, Value     []byte
}

// refRecord decodes one record with kbin and checks that its fields fill
// exactly its declared length, as Kafka's DefaultRecord.readFrom does.
func refRecord(r *kbin.Reader) (refRec, bool) {
	var rec refRec
	length := r.Varint()
	if !r.Ok() || length < 0 || int(length) > len(r.Src) {
		return rec, false
	}
	body := kbin.Reader{Src: r.Span(int(length))}
	body.Int8()
	rec.TimestampDelta = body.Varlong()
	rec.OffsetDelta = body.Varint()
	rec.Key = body.VarintBytes()
	rec.Value = body.VarintBytes()
	headers := body.Varint()
	if !body.Ok() || headers < 0 || int(headers) > len(body.Src) {
		return rec, false
	}
	for i := int32(0); i < headers; i++ {
		if kl := body.Varint(); kl < 0 || !body.Ok() {
			return rec, false
		} else {
			body.Span(int(kl))
		}
		body.VarintBytes()
	}
	return rec, body.Ok() && len(body.Src) == 0
}

func refNormal(b *kmsg.RecordBatch, trailing int, o *Options) (int16, int64, int16) {
	codec := b.Attributes & 7
	if o.ProduceVersion > 0 && o.ProduceVersion < 7 && codec == 4 {
		return kerr.UnsupportedCompressionType.Code, 0, 0
	}
	if trailing > 0 {
		return kerr.InvalidRecord.Code, 0, 0
	}
	if b.FirstOffset != 0 {
		return kerr.InvalidRecord.Code, 0, 0
	}
	if o.Topic.MaxMessageBytes > 0 && 12+b.Length > o.Topic.MaxMessageBytes {
		return kerr.MessageTooLarge.Code, 0, 0
	}
	if uint32(b.CRC) != refCRC(b) {
		return kerr.CorruptMessage.Code, 0, 0
	}
	if codec > 4 || b.LastOffsetDelta < 0 || b.NumRecords <= 0 || int64(b.NumRecords) != int64(b.LastOffsetDelta)+1 ||
		b.Attributes&0x20 != 0 || (b.ProducerID >= 0 && b.FirstSequence < 0) || (b.Attributes&0x10 != 0 && b.ProducerID < 0) {
		return kerr.InvalidRecord.Code, 0, 0
	}
	batchLAT := b.Attributes&0x08 != 0
	tsBad := func(ts int64) bool {
		if !o.Topic.LogAppendTime && ts != -1 {
			d := o.NowMs - ts
			return d > o.Topic.TimestampBeforeMaxMs || -d > o.Topic.TimestampAfterMaxMs
		}
		return batchLAT
	}
	maxTS := int64(-1)
	// Every batch is inspected record by record, compressed ones after
	// decompression, with Kafka's per-record max.decompressed.message.bytes
	// (a declared size over it is INVALID_RECORD).
	data := b.Records
	if codec != 0 {
		// Sizes the stream headers declare over the per-batch cap are
		// refused before anything is decoded (the reader's own check: the
		// cap is Verbatim's, there is no Kafka reference for it).
		rr, err := kbatch.NewRecordReader(b.AppendTo(nil), kbatch.Limits{MaxBatchBytes: o.Topic.MaxDecompressedBatchBytes})
		if errors.Is(err, kbatch.ErrBatchTooLarge) {
			return kerr.MessageTooLarge.Code, 0, 0
		}
		if err == nil {
			rr.Close()
		}
		d, err := kbatch.Decompress(kbatch.Codec(codec), data)
		if err != nil {
			return kerr.InvalidRecord.Code, 0, 0
		}
		data = d
	}
	r := kbin.Reader{Src: data}
	var keyErr, tsErr bool
	for i := int32(0); i < b.NumRecords; i++ {
		if codec != 0 {
			peek := kbin.Reader{Src: r.Src}
			if l := peek.Varint(); peek.Ok() && l >= 0 && int64(l) > int64(o.Topic.MaxDecompressedRecordBytes) {
				return kerr.InvalidRecord.Code, 0, 0
			}
		}
		rec, ok := refRecord(&r)
		if !ok || (codec != 0 && rec.OffsetDelta != i) {
			return kerr.InvalidRecord.Code, 0, 0
		}
		ts := b.FirstTimestamp + rec.TimestampDelta
		if batchLAT {
			ts = b.MaxTimestamp
		}
		switch {
		case o.Topic.Compacted && rec.Key == nil:
			keyErr = true
		case tsBad(ts):
			tsErr = true
		case ts > maxTS:
			maxTS = ts
		}
	}
	if len(r.Src) != 0 {
		return kerr.InvalidRecord.Code, 0, 0
	}
	if tsErr {
		return kerr.InvalidTimestamp.Code, 0, 0
	}
	if keyErr {
		return kerr.InvalidRecord.Code, 0, 0
	}
	attrs := b.Attributes
	if o.Topic.LogAppendTime {
		maxTS = o.NowMs
	}
	if batchLAT != o.Topic.LogAppendTime || b.MaxTimestamp != maxTS {
		attrs &= 0x77
		if o.Topic.LogAppendTime {
			attrs |= 0x08
		}
	}
	return 0, maxTS, attrs
}
