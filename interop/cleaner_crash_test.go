package interop

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// cleanerFilesIn lists the files of dir a clean in progress leaves
// (.cleaned, .swap, .deleted).
func cleanerFilesIn(dir string) []string {
	names, _ := os.ReadDir(dir)
	var out []string
	for _, n := range names {
		for _, suf := range []string{".cleaned", ".swap", ".deleted"} {
			if strings.HasSuffix(n.Name(), suf) {
				out = append(out, n.Name())
			}
		}
	}
	return out
}

// TestCleanerKillLoop kills `verbatim serve` with SIGKILL eight times at
// seeded random moments while its cleaner works on a compacted topic that
// keeps receiving rewrites and tombstones of 200 keys (1 MiB segments, the
// cleaner looking every 5 ms), each a seeded few milliseconds into a
// clean. After every restart the log recovers;
// every record read from offset 0 is exactly the record acknowledged at
// that offset (no mix of old and new segments, nothing torn), and the
// latest value of every key, tombstones applied, is the model's: the
// cleaner lost nothing it must keep.
func TestCleanerKillLoop(t *testing.T) {
	bin := BuildVerbatim(t)
	args := []string{"--log-cleaner-backoff-ms", "5"}
	v := StartVerbatim(t, bin, VerbatimOptions{Args: args})
	const topic, keys, perRound, kills = "ckill", 200, 1500, 8
	adm := verbatimClient(t, v.Addr)
	createTopicOn(t, kadm.NewClient(adm), topic, 1, map[string]string{"cleanup.policy": "compact", "segment.bytes": "1048576",
		"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "100"})
	rng := rand.New(rand.NewPCG(15, 9))
	written := map[int64]*kgo.Record{} // offset -> the acknowledged record
	latest := map[string][]byte{}
	dir := filepath.Join(v.DataDir, topic+"-0")
	n, inProgress := 0, 0
	for kill := 0; kill < kills; kill++ {
		// Not idempotent, few retries: what is in flight at the kill
		// fails promptly instead of being retried at the dead address.
		cl := verbatimClient(t, v.Addr, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.ProducerBatchMaxBytes(32<<10), kgo.DisableIdempotentWrite(), kgo.RecordRetries(2), kgo.RecordDeliveryTimeout(5*time.Second))
		var rs []*kgo.Record
		for i := 0; i < perRound; i++ {
			key := fmt.Sprintf("key-%d", n%keys)
			r := &kgo.Record{Key: []byte(key), Value: cleanerValue("kill", n/keys, n%keys)}
			if rng.IntN(20) == 0 {
				r.Value = nil
			}
			rs = append(rs, r)
			n++
		}
		// Produce in the background and kill during it: acknowledged
		// records are in the page cache, which SIGKILL does not lose.
		done := make(chan kgo.ProduceResults, 1)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		go func() { done <- cl.ProduceSync(ctx, rs...) }()
		// Kill at a seeded moment inside the clean that a roll starts: once
		// its first .cleaned file is on disk (polled; a clean of these few
		// MiB takes milliseconds), a seeded 0-3 ms later.
		for deadline := time.Now().Add(5 * time.Second); len(cleanerFilesIn(dir)) == 0 && time.Now().Before(deadline); {
			time.Sleep(100 * time.Microsecond)
		}
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
		if len(cleanerFilesIn(dir)) > 0 {
			inProgress++
		}
		v.Proc.Signal(syscall.SIGKILL)
		if !v.Proc.Wait(20 * time.Second) {
			t.Fatal("verbatim did not die on SIGKILL")
		}
		// What was not acknowledged before the kill is given up (the
		// restarted broker listens elsewhere); it may or may not be in
		// the log.
		cancel()
		actx, acancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := cl.AbortBufferedRecords(actx); err != nil {
			t.Fatalf("giving up the unacknowledged records: %v", err)
		}
		acancel()
		results := <-done
		v = StartVerbatim(t, bin, VerbatimOptions{DataDir: v.DataDir, Args: args})
		for _, pr := range results {
			if pr.Err == nil {
				written[pr.Record.Offset] = pr.Record
				if pr.Record.Value == nil {
					delete(latest, string(pr.Record.Key))
				} else {
					latest[string(pr.Record.Key)] = pr.Record.Value
				}
			}
		}
		cl.Close()
		checkAgainstModel(t, v.Addr, topic, kill, written, latest)
	}
	var bytesWritten int64
	for _, w := range written {
		bytesWritten += int64(len(w.Key) + len(w.Value))
	}
	if size := logBytes(t, dir); size > bytesWritten/2 {
		t.Fatalf("the log holds %d bytes for %d record bytes acknowledged: not cleaned", size, bytesWritten)
	}
	if inProgress == 0 {
		t.Fatalf("no kill landed inside a clean")
	}
	t.Logf("%d kills (%d with a clean's files on disk at the kill), %d records acknowledged (%d bytes), log %d bytes, %d live keys",
		kills, inProgress, len(written), bytesWritten, logBytes(t, dir), len(latest))
}

// checkAgainstModel reads topic from offset 0 and checks every record
// against the one acknowledged at its offset, and the latest value of
// every key against the model (keys whose newest record was never
// acknowledged, a write of the killed broker that survived, excepted).
func checkAgainstModel(t *testing.T, addr, topic string, kill int, written map[int64]*kgo.Record, latest map[string][]byte) {
	t.Helper()
	type seen struct {
		value []byte
		acked bool
	}
	got := map[string]seen{}
	var last int64 = -1
	eachBatch(t, addr, topic, func(b []byte) {
		for _, r := range batchRecords(t, b) {
			if r.offset <= last {
				t.Fatalf("after kill %d: offset %d after %d", kill, r.offset, last)
			}
			last = r.offset
			w, ok := written[r.offset]
			if ok && (r.key != string(w.Key) || !bytes.Equal(r.value, w.Value) || (r.value == nil) != (w.Value == nil)) {
				t.Fatalf("after kill %d: offset %d holds %s=%.16q, %s=%.16q was acknowledged there", kill, r.offset, r.key, r.value, w.Key, w.Value)
			}
			got[r.key] = seen{r.value, ok}
		}
	})
	for k, v := range latest {
		if g := got[k]; g.acked && !bytes.Equal(g.value, v) || g.value == nil && g.acked {
			t.Fatalf("after kill %d: key %s reads %.16q, the latest acknowledged value is %.16q", kill, k, g.value, v)
		}
		if _, ok := got[k]; !ok {
			t.Fatalf("after kill %d: key %s lost, the latest acknowledged value is %.16q", kill, k, v)
		}
	}
	for k, g := range got {
		if _, ok := latest[k]; !ok && g.acked && g.value != nil {
			t.Fatalf("after kill %d: key %s is live, the model deleted it", kill, k)
		}
	}
}
