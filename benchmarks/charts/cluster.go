package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"gonum.org/v1/plot/vg"
)

// A cluster benchmark report (`make bench-cluster`,
// <date>-<commit>-cluster.jsonl) is one JSON object per line, each one
// system's figures in one scenario (cluster-produce-raw,
// cluster-produce-perf, cluster-failover); it gets its own charts and
// leaves the README's generated results section alone.

const clusterSuffix = "-cluster.jsonl"

func isClusterReport(path string) bool { return strings.HasSuffix(path, clusterSuffix) }

// readClusterReport reads the lines into a report (scenarios only; the
// header fields of the first line).
func readClusterReport(path string) (report, error) {
	f, err := os.Open(path)
	if err != nil {
		return report{}, err
	}
	defer f.Close()
	var r report
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var l struct {
			entry
			Date   string `json:"date"`
			Commit string `json:"commit"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return report{}, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		r.Date, r.Commit = l.Date, l.Commit
		r.Scenarios = append(r.Scenarios, l.entry)
	}
	if err := sc.Err(); err != nil {
		return report{}, err
	}
	if len(r.Scenarios) == 0 {
		return report{}, fmt.Errorf("%s: no lines", path)
	}
	return r, nil
}

var clusterRows = []struct{ scenario, label string }{
	{"cluster-produce-raw", "raw generator"},
	{"cluster-produce-perf", "ProducerPerformance"},
}

// clusterCharts renders <base>-throughput.svg (MB/s), <base>-p99.svg
// (p99 latency, ms) and <base>-failover.svg (seconds from the SIGKILL of a
// leader to the next acknowledged write) next to the report.
func clusterCharts(path string, png bool) error {
	r, err := readClusterReport(path)
	if err != nil {
		return err
	}
	base := strings.TrimSuffix(path, ".jsonl")
	charts := []struct {
		name string
		f    func(report, string) error
	}{
		{"throughput", func(r report, out string) error {
			return clusterChart(r, "mb_per_s", "acks=all, RF 3: Kafka 4.4 vs Verbatim, 3 brokers each (median, min-max)", "MB/s", out)
		}},
		{"p99", func(r report, out string) error {
			return clusterChart(r, "p99_ms", "acks=all, RF 3: p99 latency (median, min-max)", "ms", out)
		}},
		{"failover", failoverChart},
	}
	for _, c := range charts {
		out := base + "-" + c.name + ".svg"
		err := c.f(r, out)
		if errors.Is(err, errNoData) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s chart: %w", c.name, err)
		}
		if png {
			if err := c.f(r, strings.TrimSuffix(out, ".svg")+".png"); err != nil {
				return err
			}
		}
	}
	return nil
}

func clusterChart(r report, metric, title, ylabel, out string) error {
	var labels []string
	var kafka, verb []stat
	for _, row := range clusterRows {
		k, ok1 := find(r, row.scenario, "kafka")
		v, ok2 := find(r, row.scenario, "verbatim")
		if !ok1 || !ok2 {
			continue
		}
		labels = append(labels, row.label)
		kafka, verb = append(kafka, k.Metrics[metric]), append(verb, v.Metrics[metric])
	}
	return groupedN(title, ylabel, labels, []series{{"kafka", colPeer, kafka}, {"verbatim", colVerbatim, verb}}, out, 14*vg.Centimeter)
}

func failoverChart(r report, out string) error {
	k, ok1 := find(r, "cluster-failover", "kafka")
	v, ok2 := find(r, "cluster-failover", "verbatim")
	if !ok1 || !ok2 {
		return errNoData
	}
	return groupedN("Leader SIGKILL to the next acknowledged write (median, min-max)", "seconds",
		[]string{"failover"}, []series{{"kafka", colPeer, []stat{scaled(k.Metrics["failover_ms"], 1e-3)}},
			{"verbatim", colVerbatim, []stat{scaled(v.Metrics["failover_ms"], 1e-3)}}}, out, 10*vg.Centimeter)
}

func scaled(s stat, f float64) stat {
	return stat{Median: s.Median * f, Min: s.Min * f, Max: s.Max * f, N: s.N}
}
