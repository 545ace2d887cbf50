package hostile

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/klauspost/compress/gzip"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// GzipBomb is one valid gzip member (checksum and size verified by the
// decoder) whose records section is one record of n zero bytes, about
// 1000 times smaller than what it inflates to.
func TestGzipBomb(t *testing.T) {
	const n = 48 << 20
	bomb := GzipBomb(n)
	if len(bomb) > n/500 || len(bomb) < n/2000 {
		t.Fatalf("%d bytes for %d", len(bomb), n)
	}
	z, err := gzip.NewReader(bytes.NewReader(bomb))
	if err != nil {
		t.Fatal(err)
	}
	z.Multistream(false)
	got, err := io.Copy(io.Discard, z)
	if err != nil {
		t.Fatalf("inflating: %v after %d bytes", err, got)
	}
	b := Batch(kbatch.CodecGzip, bomb, 1, 1000)
	rr, err := kbatch.NewRecordReader(b, kbatch.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Close()
	info, err := rr.Next()
	if err != nil || info.ValueLen != n || info.KeyLen != -1 || info.Headers != 0 {
		t.Fatalf("record %+v, %v", info, err)
	}
	if _, err := rr.Next(); err != io.EOF {
		t.Fatalf("after the record: %v", err)
	}
}

// Poison starts like each codec's stream and is refused by the reader as
// not valid for it.
func TestPoison(t *testing.T) {
	for _, c := range Codecs {
		rr, err := kbatch.NewRecordReader(Batch(c, Poison(c), 1, 1000), kbatch.Limits{})
		if err == nil {
			_, err = rr.Next()
			rr.Close()
		}
		if !errors.Is(err, kbatch.ErrUndecodable) {
			t.Errorf("%s: %v", c, err)
		}
	}
}
