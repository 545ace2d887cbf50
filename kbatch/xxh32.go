package kbatch

import (
	"encoding/binary"
	"math/bits"
)

// xxHash32 (seed 0), the checksum of the LZ4 frame format: the frame
// descriptor's header checksum, block checksums and the content checksum.
// Written from the xxHash specification; streaming, allocation-free.

const (
	xxPrime1 uint32 = 0x9E3779B1
	xxPrime2 uint32 = 0x85EBCA77
	xxPrime3 uint32 = 0xC2B2AE3D
	xxPrime4 uint32 = 0x27D4EB2F
	xxPrime5 uint32 = 0x165667B1
)

type xxh32 struct {
	v     [4]uint32
	total uint64
	buf   [16]byte
	n     int // bytes in buf
}

func (x *xxh32) reset() {
	p1, p2 := xxPrime1, xxPrime2 // variables: the sums wrap, as the algorithm wants
	*x = xxh32{v: [4]uint32{p1 + p2, p2, 0, -p1}}
}

func xxRound(acc, lane uint32) uint32 {
	return bits.RotateLeft32(acc+lane*xxPrime2, 13) * xxPrime1
}

func (x *xxh32) stripe(b []byte) {
	for i := range x.v {
		x.v[i] = xxRound(x.v[i], binary.LittleEndian.Uint32(b[4*i:]))
	}
}

func (x *xxh32) write(p []byte) {
	x.total += uint64(len(p))
	if x.n > 0 {
		k := copy(x.buf[x.n:], p)
		x.n += k
		p = p[k:]
		if x.n < 16 {
			return
		}
		x.stripe(x.buf[:])
		x.n = 0
	}
	for len(p) >= 16 {
		x.stripe(p)
		p = p[16:]
	}
	x.n = copy(x.buf[:], p)
}

func (x *xxh32) sum() uint32 {
	var h uint32
	if x.total >= 16 {
		h = bits.RotateLeft32(x.v[0], 1) + bits.RotateLeft32(x.v[1], 7) + bits.RotateLeft32(x.v[2], 12) + bits.RotateLeft32(x.v[3], 18)
	} else {
		h = xxPrime5
	}
	h += uint32(x.total)
	p := x.buf[:x.n]
	for ; len(p) >= 4; p = p[4:] {
		h += binary.LittleEndian.Uint32(p) * xxPrime3
		h = bits.RotateLeft32(h, 17) * xxPrime4
	}
	for _, c := range p {
		h += uint32(c) * xxPrime5
		h = bits.RotateLeft32(h, 11) * xxPrime1
	}
	h ^= h >> 15
	h *= xxPrime2
	h ^= h >> 13
	h *= xxPrime3
	h ^= h >> 16
	return h
}

// xxh32Sum is the checksum of b.
func xxh32Sum(b []byte) uint32 {
	var x xxh32
	x.reset()
	x.write(b)
	return x.sum()
}
