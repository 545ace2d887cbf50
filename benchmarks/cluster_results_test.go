package benchmarks

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Load.Addrs sends each connection's partition to its own server (the
// partition's leader in a cluster): each sink holds only its partition.
func TestLoadPerConnectionAddrs(t *testing.T) {
	a, sa := startSinkInProcess(t, false)
	b, sb := startSinkInProcess(t, false)
	res, err := RunLoad(context.Background(), Load{Addr: "127.0.0.1:1", Addrs: []string{a, b}, Topic: "t", BatchBytes: 4096,
		Conns: 2, InFlight: 2, TotalBytes: 32 << 10})
	if err != nil {
		t.Fatal(err)
	}
	sa.Close()
	sb.Close()
	for i, s := range []*Sink{sa, sb} {
		for p := range 2 {
			fi, err := os.Stat(filepath.Join(s.Dir, "t-"+string(rune('0'+p))+".log"))
			switch {
			case p == i && (err != nil || fi.Size() != res.Bytes/2):
				t.Errorf("sink %d: partition %d: %v (size %v), want %d bytes", i, p, err, fi, res.Bytes/2)
			case p != i && err == nil:
				t.Errorf("sink %d holds partition %d (%d bytes), sent to the other sink", i, p, fi.Size())
			}
		}
	}
}

func clusterTestLine(scen, sys string, vals ...float64) ClusterLine {
	r := Rounds{}
	for _, v := range vals {
		r.Add(map[string]float64{"mb_per_s": v})
	}
	return ClusterLine{Entry: r.Entry(scen, sys, "params"), Rounds: r}
}

// The cluster benchmark's JSONL: one self-contained line per system and
// scenario, each with the header; malformed lines are refused and nothing
// is written.
func TestWriteClusterLines(t *testing.T) {
	dir := t.TempDir()
	h := ClusterHeader{Date: "2026-12-01T22:00Z", Commit: "abc123", Command: "make bench-cluster", Machine: DescribeMachine(dir)}
	lines := []ClusterLine{clusterTestLine("cluster-produce-raw", "kafka", 100, 120, 110), clusterTestLine("cluster-produce-raw", "verbatim", 200, 180, 220)}
	name, err := WriteClusterLines(dir, h, lines)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(name, "-abc123-cluster.jsonl") {
		t.Errorf("file name %s", name)
	}
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []ClusterLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l ClusterLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		got = append(got, l)
	}
	if len(got) != 2 || got[0].Commit != "abc123" || got[1].Date != h.Date || got[1].System != "verbatim" ||
		got[1].Metrics["mb_per_s"].Median != 200 || len(got[1].Rounds["mb_per_s"]) != 3 || got[0].Rounds["mb_per_s"][1] != 120 {
		t.Fatalf("read back %+v", got)
	}

	bad := clusterTestLine("cluster-failover", "verbatim", 1, 2)
	bad.Rounds["mb_per_s"] = bad.Rounds["mb_per_s"][:1]
	inf := clusterTestLine("cluster-failover", "kafka", math.Inf(1))
	for _, l := range []ClusterLine{bad, inf, {Entry: Entry{Scenario: "x"}}} {
		dir := t.TempDir()
		if _, err := WriteClusterLines(dir, h, []ClusterLine{lines[0], l}); err == nil {
			t.Errorf("line %+v accepted", l)
		}
		if files, _ := os.ReadDir(dir); len(files) != 0 {
			t.Errorf("a refused report left %d files", len(files))
		}
	}
}
