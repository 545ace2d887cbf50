package storage

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

func TestLogLeaderAppendAssignsOffsets(t *testing.T) {
	fs := NewMemFS()
	l := openLog(t, fs, Config{})
	defer l.Close()
	for i := 0; i < 5; i++ {
		b := testBatch(t, 999, -1, 1000+int64(i), 3, 10)
		crc := kbatch.StoredCRC(b)
		res, err := l.AppendLeader(b, 7, 5000)
		if err != nil {
			t.Fatal(err)
		}
		if res.FirstOffset != int64(i*3) || res.LastOffset != int64(i*3+2) {
			t.Fatalf("append %d: got [%d,%d]", i, res.FirstOffset, res.LastOffset)
		}
		if kbatch.BaseOffset(b) != int64(i*3) || kbatch.LeaderEpoch(b) != 7 || kbatch.StoredCRC(b) != crc || kbatch.CRC(b) != crc {
			t.Fatalf("batch not patched in place correctly")
		}
	}
	if l.LogEndOffset() != 15 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
	got := readAllBatches(t, l)
	if len(got) != 5 {
		t.Fatalf("read %d batches", len(got))
	}
	// Offset inside a batch returns that batch.
	sl, err := l.Read(4, 1)
	if err != nil || sl.BaseOffset != 3 {
		t.Fatalf("read 4: %+v %v", sl, err)
	}
	if _, err := l.Read(16, 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read past end: %v", err)
	}
}

func TestLogVerbatimGapsAndRetry(t *testing.T) {
	fs := NewMemFS()
	l := openLog(t, fs, Config{})
	b1 := testBatch(t, 10, 3, 1000, 2, 5)
	b2 := testBatch(t, 50, 4, 1001, 1, 5)
	set := slices.Concat(b1, b2)
	res, err := l.AppendVerbatim(set)
	if err != nil {
		t.Fatal(err)
	}
	if res.FirstOffset != 10 || res.LastOffset != 50 || l.LogEndOffset() != 51 {
		t.Fatalf("res %+v leo %d", res, l.LogEndOffset())
	}
	// Gap read: offset 20 returns the batch at 50.
	sl, err := l.Read(20, 1)
	if err != nil || sl.BaseOffset != 50 {
		t.Fatalf("gap read: %+v %v", sl, err)
	}
	// Identical retry.
	res, err = l.AppendVerbatim(append([]byte(nil), set...))
	if err != nil || !res.AlreadyPresent || res.FirstOffset != 10 {
		t.Fatalf("retry: %+v %v", res, err)
	}
	// Different bytes below the end.
	bad := testBatch(t, 50, 4, 1001, 1, 6)
	if _, err := l.AppendVerbatim(bad); !errors.Is(err, ErrOffsetBelowLogEnd) {
		t.Fatalf("non-identical: %v", err)
	}
	// Partial retry: stored prefix + new batch.
	b3 := testBatch(t, 60, 4, 1002, 1, 5)
	res, err = l.AppendVerbatim(slices.Concat(b2, b3))
	if err != nil || res.AlreadyPresent || l.LogEndOffset() != 61 {
		t.Fatalf("partial retry: %+v %v", res, err)
	}
	got := readAllBatches(t, l)
	want := [][]byte{b1, b2, b3}
	checkBatches(t, got, want)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, fs, Config{})
	defer l.Close()
	if l.LogEndOffset() != 61 || l.LogStartOffset() != 0 {
		t.Fatalf("reopen: start %d end %d", l.LogStartOffset(), l.LogEndOffset())
	}
	got = readAllBatches(t, l)
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("after reopen batch %d differs", i)
		}
	}
}
