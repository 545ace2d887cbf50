package interop

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
)

// The fault test's last check, on the stopped brokers' files: no two
// leaders wrote the same offsets of a partition (in one epoch or across
// epochs without the followers truncating).

// chaosBatch is one batch of a replica's log.
type chaosBatch struct {
	node       int32
	base, last int64
	epoch      int32
	crc        uint32
	size       int
}

// checkReplicaLogs compares the stopped brokers' replicas of every
// partition: batches that share an offset are the same batch (offsets,
// leader epoch, CRC) on every replica, and along each replica's log the
// leader epochs never decrease and the offsets follow on. Returns the
// number of batches compared.
func checkReplicaLogs(t testing.TB, c *VCluster) int {
	t.Helper()
	parts := map[string][]chaosBatch{}
	for _, nd := range c.Nodes {
		dirs, err := os.ReadDir(filepath.Join(nd.Dir, "data"))
		if err != nil {
			t.Fatalf("node %d: %v", nd.ID, err)
		}
		for _, d := range dirs {
			files, _ := filepath.Glob(filepath.Join(nd.Dir, "data", d.Name(), "*.log"))
			if !d.IsDir() || len(files) == 0 {
				continue
			}
			sort.Strings(files)
			var prev *chaosBatch
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatalf("node %d: %v", nd.ID, err)
				}
				for len(b) > 0 {
					batch, rest, err := kbatch.Next(b)
					if err != nil {
						t.Errorf("node %d %s: %d bytes after the last whole batch: %v", nd.ID, f, len(b), err)
						break
					}
					h, _ := kbatch.ParseHeader(batch)
					cb := chaosBatch{node: nd.ID, base: h.BaseOffset, last: h.LastOffset(), epoch: h.LeaderEpoch, crc: h.CRC, size: len(batch)}
					if prev != nil && (cb.epoch < prev.epoch || cb.base != prev.last+1) {
						t.Errorf("node %d %s: batch %d..%d at leader epoch %d follows %d..%d at epoch %d", nd.ID, d.Name(), cb.base, cb.last, cb.epoch, prev.base, prev.last, prev.epoch)
					}
					parts[d.Name()] = append(parts[d.Name()], cb)
					prev = &parts[d.Name()][len(parts[d.Name()])-1]
					b = rest
				}
			}
		}
	}
	n := 0
	for name, bs := range parts {
		sort.SliceStable(bs, func(i, j int) bool { return bs[i].base < bs[j].base })
		for i := 1; i < len(bs); i++ {
			a, b := bs[i-1], bs[i]
			n++
			if b.base > a.last {
				continue
			}
			if a.base != b.base || a.last != b.last || a.epoch != b.epoch || a.crc != b.crc || a.size != b.size {
				t.Errorf("%s: node %d holds %d..%d epoch %d crc %08x, node %d holds %d..%d epoch %d crc %08x: two leaders wrote the same offsets",
					name, a.node, a.base, a.last, a.epoch, a.crc, b.node, b.base, b.last, b.epoch, b.crc)
			}
		}
	}
	return n
}
