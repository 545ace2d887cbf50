package link

import (
	"context"
	"errors"
	"math/rand"
	"testing"

	"github.com/verbatim-kafka/verbatim/storage"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// fakeEpochSource answers OffsetForLeaderEpoch as Kafka's leader does
// (LeaderEpochFileCache.endOffsetFor) over its epoch cache and log end.
type fakeEpochSource struct {
	epochs []EpochStart
	leo    int64
	asked  []int32
}

func (s *fakeEpochSource) ask(epoch int32) (EpochEnd, error) {
	s.asked = append(s.asked, epoch)
	if len(s.epochs) == 0 {
		return EpochEnd{-1, -1}, nil
	}
	if epoch < s.epochs[0].Epoch {
		return EpochEnd{-1, s.epochs[0].StartOffset}, nil
	}
	for i := len(s.epochs) - 1; i >= 0; i-- {
		if s.epochs[i].Epoch <= epoch {
			end := s.leo
			if i+1 < len(s.epochs) {
				end = s.epochs[i+1].StartOffset
			}
			return EpochEnd{s.epochs[i].Epoch, end}, nil
		}
	}
	panic("unreachable")
}

func TestFindCommonPoint(t *testing.T) {
	type es = []EpochStart
	cases := []struct {
		name       string
		dest       es
		start, end int64
		src        es
		srcEnd     int64
		want       int64
		wantEpoch  int32
		wantAsked  []int32
		wantErr    error
	}{
		{name: "identical", dest: es{{0, 0}, {1, 100}}, end: 150, src: es{{0, 0}, {1, 100}}, srcEnd: 150,
			want: 150, wantEpoch: 1, wantAsked: []int32{1}},
		{name: "destination behind", dest: es{{0, 0}, {1, 100}}, end: 120, src: es{{0, 0}, {1, 100}, {2, 160}}, srcEnd: 200,
			want: 120, wantEpoch: 1, wantAsked: []int32{1}},
		{name: "unclean election: source lost the tail of epoch 1", dest: es{{0, 0}, {1, 100}}, end: 150,
			src: es{{0, 0}, {1, 100}, {2, 120}}, srcEnd: 200, want: 120, wantEpoch: 1, wantAsked: []int32{1}},
		{name: "unclean election: the destination's latest epoch is unknown to the source", dest: es{{0, 0}, {1, 100}, {2, 130}}, end: 150,
			src: es{{0, 0}, {1, 100}, {3, 120}}, srcEnd: 200, want: 120, wantEpoch: 1, wantAsked: []int32{2}},
		{name: "two rounds: the source's answer is an epoch the destination lacks", dest: es{{0, 0}, {1, 100}, {3, 130}}, end: 150,
			src: es{{0, 0}, {1, 100}, {2, 110}, {4, 160}}, srcEnd: 200, want: 110, wantEpoch: 1, wantAsked: []int32{3, 1}},
		{name: "source's first epoch is later than all of ours", dest: es{{0, 0}}, end: 50,
			src: es{{2, 30}}, srcEnd: 90, want: 30, wantEpoch: 0, wantAsked: []int32{0}},
		{name: "destination holds only epochs later than the source's answer", dest: es{{5, 40}}, start: 40, end: 80,
			src: es{{1, 0}, {3, 60}}, srcEnd: 100, want: 40, wantEpoch: -1, wantAsked: []int32{5}},
		{name: "failback: V2 mirrored V1 to 80, stopped, wrote in epoch 2", dest: es{{0, 0}, {1, 50}}, end: 100,
			src: es{{0, 0}, {1, 50}, {2, 80}}, srcEnd: 120, want: 80, wantEpoch: 1, wantAsked: []int32{1}},
		{name: "failback with nothing written on V1 after the failover", dest: es{{0, 0}, {1, 50}}, end: 80,
			src: es{{0, 0}, {1, 50}, {2, 80}}, srcEnd: 120, want: 80, wantEpoch: 1, wantAsked: []int32{1}},
		{name: "empty destination", dest: nil, start: 0, end: 0, src: es{{0, 0}}, srcEnd: 10, want: 0, wantEpoch: -1},
		{name: "source without epochs", dest: es{{0, 0}}, end: 10, src: nil, wantErr: ErrNoCommonPoint, wantAsked: []int32{0}},
		{name: "destination cache entries at the log end are ignored", dest: es{{0, 0}, {1, 100}, {4, 150}}, end: 150,
			src: es{{0, 0}, {1, 100}}, srcEnd: 150, want: 150, wantEpoch: 1, wantAsked: []int32{1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := &fakeEpochSource{epochs: c.src, leo: c.srcEnd}
			got, err := FindCommonPoint(c.dest, c.start, c.end, src.ask)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("err %v, want %v", err, c.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			} else if got.Offset != c.want || got.Epoch != c.wantEpoch || got.Rounds != len(c.wantAsked) {
				t.Fatalf("got %+v, want offset %d epoch %d after %d rounds", got, c.want, c.wantEpoch, len(c.wantAsked))
			}
			if len(src.asked) != len(c.wantAsked) {
				t.Fatalf("asked %v, want %v", src.asked, c.wantAsked)
			}
			for i := range src.asked {
				if src.asked[i] != c.wantAsked[i] {
					t.Fatalf("asked %v, want %v", src.asked, c.wantAsked)
				}
			}
		})
	}
}

func TestFindCommonPointRefusesAnswersAboveTheEpochAsked(t *testing.T) {
	_, err := FindCommonPoint([]EpochStart{{0, 0}, {1, 10}}, 0, 20, func(int32) (EpochEnd, error) {
		return EpochEnd{Epoch: 2, EndOffset: 30}, nil
	})
	if err == nil {
		t.Fatal("an answer above the epoch asked was accepted")
	}
	boom := errors.New("boom")
	if _, err := FindCommonPoint([]EpochStart{{0, 0}}, 0, 20, func(int32) (EpochEnd, error) { return EpochEnd{}, boom }); !errors.Is(err, boom) {
		t.Fatalf("err %v, want the source's error", err)
	}
}

// Random histories: a shared prefix, then each side continues alone with
// epochs of its own (leaders elected on one side only; the destination
// may also keep writing in the last shared epoch, the records the source
// lost). The common point is the end of the shared prefix, always.
func TestFindCommonPointRandomHistories(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for iter := 0; iter < 3000; iter++ {
		var shared []EpochStart
		off, epoch := int64(0), int32(-1)
		for n := rng.Intn(4); n > 0; n-- {
			epoch += 1 + int32(rng.Intn(3))
			shared = append(shared, EpochStart{epoch, off})
			off += 1 + int64(rng.Intn(20))
		}
		common := off
		// Epochs after the prefix alternate sides by parity, so no epoch
		// is used by both.
		grow := func(es []EpochStart, off int64, parity int32, continueLast bool) ([]EpochStart, int64) {
			es = append([]EpochStart(nil), es...)
			e := epoch
			if continueLast && len(es) > 0 {
				off += 1 + int64(rng.Intn(10))
			}
			for n := rng.Intn(3); n > 0; n-- {
				e++
				for (e-epoch)%2 != parity {
					e++
				}
				es = append(es, EpochStart{e, off})
				off += 1 + int64(rng.Intn(20))
			}
			return es, off
		}
		dest, destEnd := grow(shared, common, 0, rng.Intn(2) == 0)
		src, srcEnd := grow(shared, common, 1, false)
		source := &fakeEpochSource{epochs: src, leo: srcEnd}
		got, err := FindCommonPoint(dest, 0, destEnd, source.ask)
		if len(src) == 0 && len(dest) > 0 {
			if !errors.Is(err, ErrNoCommonPoint) {
				t.Fatalf("iter %d: err %v with an empty source", iter, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		want := common
		if len(dest) == 0 {
			want = destEnd
		}
		if got.Offset != want {
			t.Fatalf("iter %d: dest %v end %d, source %v end %d: common point %+v, want %d", iter, dest, destEnd, src, srcEnd, got, want)
		}
	}
}

// fakeRepairHost records the truncation TruncateToCommon asks for.
type fakeRepairHost struct {
	entries []storage.EpochEntry
	end     int64
	cutTo   int64
}

func (h *fakeRepairHost) PartitionEpochs(string, int32) ([]storage.EpochEntry, int64, int64, error) {
	return h.entries, 0, h.end, nil
}

func (h *fakeRepairHost) TruncateKeepingCut(_ context.Context, _ string, p int32, to int64, _ string) (wireext.TruncatedPartition, error) {
	h.cutTo = to
	return wireext.TruncatedPartition{Partition: p, TruncatedTo: to}, nil
}

func (h *fakeRepairHost) ConvertToPullMirror(context.Context, string, string, string) error {
	return nil
}

func (h *fakeRepairHost) MirrorStopPoint(string, int32) (int64, int32, bool) { return -1, -1, false }

// The cross-check with a Verbatim source's last mirrored point: above it
// the destination shares the source's history only where its batch at
// the point is the source's (it mirrored the source's own later writes);
// otherwise (both wrote in an equal epoch number) the point is capped.
func TestTruncateToCommonCrossCheck(t *testing.T) {
	// Both sides hold epoch 11 from offset 8 on: OffsetForLeaderEpoch
	// alone says 13 is common.
	src := &fakeEpochSource{epochs: []EpochStart{{0, 0}, {11, 8}}, leo: 13}
	cases := []struct {
		name   string
		limit  int64
		sameAt func(int64) (bool, error)
		want   int64
	}{
		{"no cross-check", -1, nil, 13},
		{"limit above the point", 20, nil, 13},
		{"the batch at the limit is the source's", 8, func(off int64) (bool, error) { return off == 8, nil }, 13},
		{"the batch at the limit differs", 8, func(int64) (bool, error) { return false, nil }, 8},
		{"no way to compare", 8, nil, 8},
	}
	for _, c := range cases {
		h := &fakeRepairHost{entries: []storage.EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 11, StartOffset: 8}}, end: 13, cutTo: -2}
		tp, _, err := TruncateToCommon(context.Background(), h, "t", 0, "", c.limit, src.ask, c.sameAt)
		if err != nil || h.cutTo != c.want || tp.TruncatedTo != c.want {
			t.Errorf("%s: cut to %d (%+v, %v), want %d", c.name, h.cutTo, tp, err, c.want)
		}
	}
}
