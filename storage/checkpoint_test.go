package storage

import (
	"errors"
	"testing"
)

func TestLogStartCheckpointKafkaFormat(t *testing.T) {
	fs := NewMemFS()
	l, err := Open(fs, "data/orders.eu-3", Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := l.AppendLeader(testBatch(t, 0, 1, 1, 2, 5), 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.DeleteRecords(4); err != nil {
		t.Fatal(err)
	}
	l.Close()
	b, err := readAll(fs, "data/orders.eu-3/"+LogStartOffsetCheckpointFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "0\n1\norders.eu 3 4\n" {
		t.Fatalf("checkpoint %q", b)
	}
	l, err = Open(fs, "data/orders.eu-3", Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.LogStartOffset() != 4 {
		t.Fatalf("start %d", l.LogStartOffset())
	}
}

func TestLogStartCheckpointParsing(t *testing.T) {
	for _, bad := range []string{"", "0\n", "1\n1\nt 0 1\n", "0\n2\nt 0 1\n", "0\n1\nt 0\n", "0\n1\nt x 1\n", "0\n1\nt 0 -5\n"} {
		if _, err := decodePartitionCheckpoint([]byte(bad), "t", 0); !errors.Is(err, ErrCorruptCheckpoint) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	off, err := decodePartitionCheckpoint([]byte("0\n2\na 1 5\nt 0 9\n"), "t", 0)
	if err != nil || off != 9 {
		t.Fatalf("%d %v", off, err)
	}
	off, err = decodePartitionCheckpoint([]byte("0\n1\na 1 5\n"), "t", 0)
	if err != nil || off != -1 {
		t.Fatalf("absent entry: %d %v", off, err)
	}
}
