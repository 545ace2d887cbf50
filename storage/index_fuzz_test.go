package storage

import (
	"math"
	"testing"
)

// FuzzLoadIndex feeds arbitrary bytes to the index loaders: no panic; an
// accepted index is sorted as Kafka requires, and lookups return entries
// consistent with a linear scan.
func FuzzLoadIndex(f *testing.F) {
	var x offsetIndex
	x.base = 100
	x.add(100, 0)
	x.add(105, 4097)
	x.add(300, 9000)
	var y timeIndex
	y.base = 100
	y.maybeAdd(50, 100)
	y.maybeAdd(70, 105)
	y.maybeAdd(90, 300)
	f.Add(int64(100), x.buf, y.buf, int64(10000), int64(301))
	f.Add(int64(0), []byte{0, 0, 0, 1}, []byte{1, 2, 3}, int64(5), int64(5))
	f.Add(int64(0), make([]byte, 16), make([]byte, 24), int64(100), int64(100))
	f.Fuzz(func(t *testing.T, base int64, ib, tb []byte, logSize, next int64) {
		if base < 0 || base > math.MaxInt64/2 {
			return
		}
		oi, err := loadOffsetIndex(base, ib, logSize)
		if err == nil {
			prevO, prevP := int64(math.MinInt64), int64(-1)
			for i := 0; i < oi.entries(); i++ {
				o, p := oi.entry(i)
				if o <= prevO || p <= prevP || p >= logSize || o < base {
					t.Fatalf("accepted unsorted offset index entry %d: %d %d", i, o, p)
				}
				prevO, prevP = o, p
			}
			for _, target := range []int64{base - 1, base, base + 5, base + 1<<20, math.MaxInt64} {
				want := int64(0)
				for i := 0; i < oi.entries(); i++ {
					if o, p := oi.entry(i); o <= target {
						want = p
					}
				}
				if got := oi.lookup(target); got != want {
					t.Fatalf("lookup(%d) = %d, want %d", target, got, want)
				}
			}
		}
		ti, err := loadTimeIndex(base, tb, next)
		if err == nil {
			prevT, prevO := int64(math.MinInt64), base
			for i := 0; i < ti.entries(); i++ {
				ts, o := ti.entry(i)
				if ts <= prevT || o < prevO || o >= next {
					t.Fatalf("accepted bad time index entry %d: %d %d", i, ts, o)
				}
				prevT, prevO = ts, o
			}
			for _, ts := range []int64{math.MinInt64, -1, 0, 60, 1 << 40} {
				wt, wo := int64(-1), base
				for i := 0; i < ti.entries(); i++ {
					if t2, o := ti.entry(i); t2 <= ts {
						wt, wo = t2, o
					}
				}
				if gt, gotO := ti.lookup(ts); gt != wt || gotO != wo {
					t.Fatalf("time lookup(%d) = %d,%d want %d,%d", ts, gt, gotO, wt, wo)
				}
			}
		}
	})
}

// FuzzLogStartCheckpoint parses arbitrary checkpoint bytes: no panic, and
// an encoded entry always decodes to itself.
func FuzzLogStartCheckpoint(f *testing.F) {
	f.Add([]byte("0\n1\nt 0 42\n"), "t", int32(0), int64(42))
	f.Add([]byte("0\n2\nt 0 42\n"), "a", int32(3), int64(0))
	f.Add([]byte("1\n0\n"), "t", int32(0), int64(1))
	f.Fuzz(func(t *testing.T, data []byte, topic string, partition int32, off int64) {
		decodePartitionCheckpoint(data, topic, partition)
		if off < 0 || topic == "" || !validTopicName(topic) {
			return
		}
		got, err := decodePartitionCheckpoint(encodePartitionCheckpoint(topic, partition, off), topic, partition)
		if err != nil || got != off {
			t.Fatalf("round trip %q %d %d: %d %v", topic, partition, off, got, err)
		}
	})
}

func validTopicName(s string) bool {
	for _, c := range s {
		if !(c == '.' || c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return len(s) <= 249
}
