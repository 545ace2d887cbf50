package hotpath

import (
	"bytes"
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/budget"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/storage"
)

// produceFrames encodes one Produce request per record set, as a client
// would send them on one connection.
func produceFrames(version int16, sets [][]byte) []byte {
	var stream []byte
	for i, set := range sets {
		// AppendRequest writes the size at dst[0], so each frame starts empty.
		stream = append(stream, kmsg.NewRequestFormatter().AppendRequest(nil, oneSetProduce(version, "mirror", set), int32(i))...)
	}
	return stream
}

// serveFrames runs every frame of stream through the hot path into log and
// returns the per-request results.
func serveFrames(t *testing.T, stream []byte, log *storage.Log, mode Mode, durable bool) []storage.AppendResult {
	t.Helper()
	fr, err := NewFrameReader(16<<20, budget.New(64<<20), 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPartition(log, QueueConfig{})
	defer p.Close()
	r := bytes.NewReader(stream)
	var req ProduceRequest
	var results []storage.AppendResult
	g := NewGroup()
	for r.Len() > 0 {
		f, err := fr.ReadFrame(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		version, correlationID, body := splitRequest(t, f.Buf)
		if err := req.Decode(body, version); err != nil {
			t.Fatal(err)
		}
		set := req.Topics[0].Partitions[0].Records
		o := Options{Mode: mode, Topic: DefaultTopicConfig(), ProduceVersion: version, NowMs: corpusNowMs}
		var res Result
		if err := Validate(set, &o, &res); err != nil {
			t.Fatalf("request %d: %v", correlationID, err)
		}
		a := &Append{Set: set, Verbatim: mode == Verbatim, LeaderEpoch: 5, NowMs: corpusNowMs, Durable: durable}
		g.Add(1)
		if err := p.Submit(context.Background(), g, a); err != nil {
			t.Fatal(err)
		}
		g.Wait()
		if a.Err != nil {
			t.Fatalf("request %d: %v", correlationID, a.Err)
		}
		results = append(results, a.Result)
		f.Release()
	}
	if fr.InFlight() != 0 {
		t.Fatalf("%d bytes still charged", fr.InFlight())
	}
	return results
}

func readAll(t *testing.T, log *storage.Log, from int64) []byte {
	t.Helper()
	s, err := log.Read(from, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Bytes(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every corpus shape, mirrored in verbatim mode through framing, decoding,
// validation, the queue and storage, is stored byte for byte at its offset.
func TestVerbatimCorpusStoredByteForByte(t *testing.T) {
	corpus := buildCorpus(t)
	whole := verbatimSet(corpus, 1000)
	// Split into requests of a few batches each, as a mirror would send.
	var sets [][]byte
	for rest := whole; len(rest) > 0; {
		var set []byte
		for i := 0; i < 3 && len(rest) > 0; i++ {
			b, r, err := kbatch.Next(rest)
			if err != nil {
				t.Fatal(err)
			}
			set, rest = append(set, b...), r
		}
		sets = append(sets, set)
	}
	log, err := storage.Open(storage.NewMemFS(), "data/mirror-0", storage.Config{Flush: storage.FlushAlways})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	results := serveFrames(t, produceFrames(13, sets), log, Verbatim, true)
	for i, set := range sets {
		if results[i].FirstOffset != kbatch.BaseOffset(set) || results[i].LastOffset != lastOffset(set) {
			t.Fatalf("request %d stored at [%d, %d], sent [%d, %d]", i, results[i].FirstOffset, results[i].LastOffset, kbatch.BaseOffset(set), lastOffset(set))
		}
	}
	if got := readAll(t, log, 1000); !bytes.Equal(got, whole) {
		t.Fatalf("stored %d bytes differ from the %d mirrored", len(got), len(whole))
	}
}

// Client batches in normal mode get consecutive offsets and the leader
// epoch; every other byte is what the client sent. The corpus repeats
// producer ids and sequences across codecs, so storage answers the repeats
// as duplicates with the first batch's offsets, and the queue passes that
// through.
func TestNormalClientBatchesStoredWithAssignedOffsets(t *testing.T) {
	var sets [][]byte
	for _, e := range buildCorpus(t) {
		if e.client {
			sets = append(sets, e.b)
		}
	}
	log, err := storage.Open(storage.NewMemFS(), "data/t-0", storage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	results := serveFrames(t, produceFrames(9, sets), log, Normal, false)
	stored := readAll(t, log, 0)
	next := int64(0)
	firstAt := map[[2]int64][2]int64{} // (producer id, sequence) -> offsets
	for i, set := range sets {
		h, _ := kbatch.ParseHeader(set)
		key := [2]int64{h.ProducerID, int64(h.BaseSequence)}
		if at, seen := firstAt[key]; seen && h.ProducerID >= 0 {
			if !results[i].Duplicate || results[i].FirstOffset != at[0] || results[i].LastOffset != at[1] {
				t.Fatalf("batch %d repeats producer %d sequence %d: result %+v, first stored at %v", i, h.ProducerID, h.BaseSequence, results[i], at)
			}
			continue
		}
		firstAt[key] = [2]int64{next, next + int64(h.LastOffsetDelta)}
		b, rest, err := kbatch.Next(stored)
		if err != nil {
			t.Fatal(err)
		}
		stored = rest
		if results[i].FirstOffset != next || kbatch.BaseOffset(b) != next || kbatch.LeaderEpoch(b) != 5 {
			t.Fatalf("batch %d: result %+v, stored base %d epoch %d, want base %d", i, results[i], kbatch.BaseOffset(b), kbatch.LeaderEpoch(b), next)
		}
		if !bytes.Equal(b[kbatch.MagicOffset:], set[kbatch.MagicOffset:]) || kbatch.CRC(b) != kbatch.StoredCRC(b) {
			t.Fatalf("batch %d: stored bytes differ beyond offset/epoch", i)
		}
		next += int64(kbatch.LastOffsetDelta(set)) + 1
	}
}
