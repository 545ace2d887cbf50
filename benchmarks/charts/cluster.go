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

// clusterRatios are the bars of the ratios chart: Verbatim/Kafka of the
// same round, median and min-max over the rounds.
var clusterRatios = []struct{ scenario, metric, label string }{
	{"cluster-produce-raw", "ratio_mb_per_s", "raw MB/s"},
	{"cluster-produce-raw", "ratio_p99_ms", "raw p99"},
	{"cluster-produce-perf", "ratio_mb_per_s", "ProducerPerformance MB/s"},
	{"cluster-produce-perf", "ratio_p99_ms", "ProducerPerformance p99"},
	{"cluster-failover", "ratio_failover_ms", "failover time"},
}

// clusterCharts renders <base>-ratios.svg (Verbatim/Kafka of MB/s, p99
// and failover time) and <base>-failover.svg (seconds from the SIGKILL
// of a leader to the next acknowledged write) next to the report.
func clusterCharts(path string, png bool) error {
	r, err := readClusterReport(path)
	if err != nil {
		return err
	}
	base := strings.TrimSuffix(path, ".jsonl")
	for name, f := range map[string]func(report, string) error{"ratios": ratiosChart, "failover": failoverChart} {
		out := base + "-" + name + ".svg"
		err := f(r, out)
		if errors.Is(err, errNoData) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s chart: %w", name, err)
		}
		if png {
			if err := f(r, strings.TrimSuffix(out, ".svg")+".png"); err != nil {
				return err
			}
		}
	}
	return nil
}

func ratiosChart(r report, out string) error {
	var labels []string
	var vals []stat
	for _, b := range clusterRatios {
		v, ok := find(r, b.scenario, "verbatim")
		if s, has := v.Metrics[b.metric]; ok && has {
			labels, vals = append(labels, b.label), append(vals, s)
		}
	}
	return groupedN("Verbatim / Kafka 4.4, 3 brokers each, acks=all, RF 3 (same round; median, min-max)", "Verbatim / Kafka",
		labels, []series{{"verbatim / kafka", colVerbatim, vals}}, out, 18*vg.Centimeter)
}

func failoverChart(r report, out string) error {
	k, ok1 := find(r, "cluster-failover", "kafka")
	v, ok2 := find(r, "cluster-failover", "verbatim")
	if !ok1 || !ok2 {
		return errNoData
	}
	return groupedN("SIGKILL of a leader to the next acknowledged write", "seconds (median, min-max)",
		[]string{"leader failover"}, []series{{"kafka", colPeer, []stat{scaled(k.Metrics["failover_ms"], 1e-3)}},
			{"verbatim", colVerbatim, []stat{scaled(v.Metrics["failover_ms"], 1e-3)}}}, out, 14*vg.Centimeter)
}

func scaled(s stat, f float64) stat {
	return stat{Median: s.Median * f, Min: s.Min * f, Max: s.Max * f, N: s.N}
}
