package hotpath

import "github.com/verbatim-kafka/verbatim/kbatch"

// Zero-allocation record scanning with the semantics of Kafka's
// DefaultRecord.readFrom and ByteUtils.readVarint/readVarlong.

// readVarint decodes a zigzag varint of at most 5 bytes (Kafka's
// ByteUtils.readVarint). A fifth byte carrying bits past 32 is refused, as
// franz-go's kbin does (Kafka would silently drop them). n is 0 on error.
func readVarint(b []byte) (int32, int) {
	// One and two bytes (lengths below 8 KiB) are the common case.
	if len(b) > 1 {
		if b[0] < 0x80 {
			v := int32(b[0])
			return v>>1 ^ -(v & 1), 1
		}
		if b[1] < 0x80 {
			v := int32(b[0]&0x7f) | int32(b[1])<<7
			return v>>1 ^ -(v & 1), 2
		}
	}
	return readVarintSlow(b)
}

//go:noinline
func readVarintSlow(b []byte) (int32, int) { return kbatch.Varint(b) }

// readVarlong decodes a zigzag varlong of at most 10 bytes, refusing bits
// past 64.
func readVarlong(b []byte) (int64, int) {
	if len(b) > 0 && b[0] < 0x80 {
		v := int64(b[0])
		return v>>1 ^ -(v & 1), 1
	}
	return readVarlongSlow(b)
}

//go:noinline
func readVarlongSlow(b []byte) (int64, int) { return kbatch.Varlong(b) }

type scannedRecord struct {
	tsDelta     int64
	offsetDelta int32
	keyNull     bool
	valueNull   bool
	key, value  []byte
}

// scanRecord parses the record at the start of b and returns it, its
// encoded size and "" or a description of what is wrong with it.
func scanRecord(b []byte) (r scannedRecord, n int, msg string) {
	size, k := readVarint(b)
	if k == 0 {
		return r, 0, "invalid record size varint"
	}
	if size < 0 || int64(size) > int64(len(b)-k) {
		return r, 0, "invalid record size: payload exceeds the remaining bytes"
	}
	body := b[k : k+int(size)]
	n = k + int(size)
	if len(body) < 1 {
		return r, 0, "empty record"
	}
	p := 1 // attributes
	var m int
	if r.tsDelta, m = readVarlong(body[p:]); m == 0 {
		return r, 0, "invalid timestamp delta"
	}
	p += m
	if r.offsetDelta, m = readVarint(body[p:]); m == 0 {
		return r, 0, "invalid offset delta"
	}
	p += m
	var field []byte
	var ok bool
	if field, r.keyNull, p, ok = scanBytes(body, p); !ok {
		return r, 0, "invalid key"
	}
	r.key = field
	if field, r.valueNull, p, ok = scanBytes(body, p); !ok {
		return r, 0, "invalid value"
	}
	r.value = field
	headers, m := readVarint(body[p:])
	if m == 0 {
		return r, 0, "invalid header count"
	}
	p += m
	if headers < 0 || int(headers) > len(body)-p {
		return r, 0, "found invalid number of record headers"
	}
	for h := int32(0); h < headers; h++ {
		kl, m := readVarint(body[p:])
		if m == 0 || kl < 0 {
			return r, 0, "invalid header key size"
		}
		p += m
		if int(kl) > len(body)-p {
			return r, 0, "header key past the record end"
		}
		p += int(kl)
		if _, _, p, ok = scanBytes(body, p); !ok {
			return r, 0, "invalid header value"
		}
	}
	if p != len(body) {
		return r, 0, "invalid record size: fields do not fill the record"
	}
	return r, n, ""
}

// scanBytes reads a varint-length byte field at body[p:]; negative lengths
// are null, as in Kafka.
func scanBytes(body []byte, p int) (field []byte, null bool, next int, ok bool) {
	l, m := readVarint(body[p:])
	if m == 0 {
		return nil, false, p, false
	}
	p += m
	if l < 0 {
		return nil, true, p, true
	}
	if int(l) > len(body)-p {
		return nil, false, p, false
	}
	return body[p : p+int(l)], false, p + int(l), true
}
