package wasmpolicy

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/policies"
)

// benchSet is n uncompressed 1-record batches with rising epochs, as a
// mirror produce carries them.
func benchSet(b testing.TB, n int) []byte {
	var set []byte
	for i := 0; i < n; i++ {
		set = append(set, batch(b, int64(i), int32(i/4), func(bt *kbatch.Batch) {
			bt.ProducerID, bt.ProducerEpoch, bt.BaseSequence = 7, 0, int32(i)
		})...)
	}
	return set
}

// BenchmarkJudge measures the cost of one judge call (one partition of one
// produce request) for 1, 16 and 256 batches per call; ns/batch is the
// per-batch share. defaults and epoch-monotonic are the WAT built-ins
// (run without termination checks), epoch-monotonic-go the same policy as
// a Go guest and wat the WAT example loaded from a file (with the
// deadline's per-call goroutine).
func BenchmarkJudge(b *testing.B) {
	h, dir := watExampleHost(b)
	// The Go reference of epoch-monotonic, loaded over the built-in in a
	// host of its own: what the built-in cost as a Go guest.
	goPath := filepath.Join(dir, "epoch-monotonic-go.wasm")
	if err := os.WriteFile(goPath, goEpoch, 0o644); err != nil {
		b.Fatal(err)
	}
	hGo := newHost(b, Options{CacheDir: testCacheDir})
	if _, err := hGo.LoadFile(goPath); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		h        *Host
		policies []string
	}{
		{"defaults", h, policies.DefaultMirror},
		{"epoch-monotonic", h, []string{"epoch-monotonic"}},
		{"epoch-monotonic-go", hGo, []string{"epoch-monotonic"}},
		{"wat", h, []string{"epoch-monotonic-wat"}},
	} {
		bd, err := c.h.Bind("bench", c.policies, nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{1, 16, 256} {
			set := benchSet(b, n)
			b.Run(c.name+"/batches="+strconv.Itoa(n), func(b *testing.B) {
				ctx := context.Background()
				pc := mirrorCtx(0, -1)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					v, err := bd.Judge(ctx, pc, set)
					if err != nil || !v.Accepted() {
						b.Fatalf("%d rejections (first %+v), err %v", len(v.Rejected), v.Err(), err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/batch")
			})
		}
		bd.Close()
	}
}

// BenchmarkStartup measures a broker's policy start-up: a new Host binding
// the default mirror policies, with an empty compilation cache (cold) and
// with the cache a previous start left (warm).
func BenchmarkStartup(b *testing.B) {
	start := func(cache string) time.Duration {
		t0 := time.Now()
		h, err := NewHost(Options{CacheDir: cache, privateCache: true})
		if err != nil {
			b.Fatal(err)
		}
		bd, err := h.Bind("t", policies.DefaultMirror, nil)
		if err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		bd.Close()
		h.Close()
		return d
	}
	b.Run("cold", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			start(b.TempDir())
		}
	})
	b.Run("warm", func(b *testing.B) {
		cache := b.TempDir()
		start(cache)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			start(cache)
		}
	})
}

// rssBytes reads the process's resident set size (Linux; 0 elsewhere).
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// BenchmarkInstanceMemory reports the resident memory one topic's
// instances of a policy list cost after a judge call: 100 topics bound,
// one call each (so one instance per module per topic), RSS before and
// after divided by 100. Compiled code is shared and not counted.
func BenchmarkInstanceMemory(b *testing.B) {
	for _, c := range []struct {
		name     string
		policies []string
	}{
		{"defaults", policies.DefaultMirror},
		{"producer-ids", []string{"producer-ids"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			h := newHost(b, Options{CacheDir: testCacheDir})
			if err := h.Check(c.policies); err != nil {
				b.Fatal(err)
			}
			set := benchSet(b, 16)
			const topics = 100
			for i := 0; i < b.N; i++ {
				runtime.GC()
				before := rssBytes()
				var bs []*Binding
				for j := 0; j < topics; j++ {
					bd, err := h.Bind("t"+strconv.Itoa(j), c.policies, nil)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := bd.Judge(context.Background(), mirrorCtx(0, -1), set); err != nil {
						b.Fatal(err)
					}
					bs = append(bs, bd)
				}
				runtime.GC()
				b.ReportMetric(float64(rssBytes()-before)/topics/1024, "KiB/topic")
				for _, bd := range bs {
					bd.Close()
				}
			}
		})
	}
}
