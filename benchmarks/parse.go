package benchmarks

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

var ppRe = regexp.MustCompile(`(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th`)

// parseProducerPerf reads ProducerPerformance's summary line.
func parseProducerPerf(out string) (map[string]float64, error) {
	ms := ppRe.FindAllStringSubmatch(out, -1)
	if len(ms) == 0 {
		return nil, fmt.Errorf("no ProducerPerformance summary")
	}
	m := ms[len(ms)-1]
	f := func(i int) float64 { v, _ := strconv.ParseFloat(m[i], 64); return v }
	// The tool's MB is 2^20 bytes; report 10^6 like everything else.
	return map[string]float64{"records_per_s": f(2), "mb_per_s": f(3) * (1 << 20) / 1e6, "avg_ms": f(4),
		"p50_ms": f(6), "p99_ms": f(8), "p999_ms": f(9)}, nil
}

// parseConsumerPerf reads ConsumerPerformance's CSV line.
func parseConsumerPerf(out string, want int) (map[string]float64, error) {
	var header []string
	for _, l := range strings.Split(out, "\n") {
		cols := strings.Split(strings.TrimSpace(l), ", ")
		if header == nil {
			if len(cols) > 1 && cols[0] == "start.time" {
				header = cols
			}
			continue
		}
		if len(cols) != len(header) {
			continue
		}
		m := map[string]float64{}
		for i, h := range header {
			v, err := strconv.ParseFloat(strings.TrimSpace(cols[i]), 64)
			if err == nil {
				m[h] = v
			}
		}
		if int(m["data.consumed.in.nMsg"]) != want {
			return nil, fmt.Errorf("consumed %v records, want %d", m["data.consumed.in.nMsg"], want)
		}
		out := map[string]float64{"mb_per_s": m["MB.sec"] * (1 << 20) / 1e6, "records_per_s": m["nMsg.sec"]}
		// Kafka 4.x also reports the group join and the fetch-only rate.
		if v, ok := m["rebalance.time.ms"]; ok {
			out["rebalance_ms"] = v
		}
		if v, ok := m["fetch.MB.sec"]; ok {
			out["fetch_mb_per_s"] = v * (1 << 20) / 1e6
		}
		return out, nil
	}
	return nil, fmt.Errorf("no ConsumerPerformance result line")
}

var (
	e2eAvgRe = regexp.MustCompile(`Avg latency: ([\d.]+) ms`)
	e2ePctRe = regexp.MustCompile(`Percentiles: 50th = (\d+), 99th = (\d+), 99.9th = (\d+)`)
)

// parseE2E reads EndToEndLatency's summary.
func parseE2E(out string) (map[string]float64, error) {
	a := e2eAvgRe.FindStringSubmatch(out)
	p := e2ePctRe.FindStringSubmatch(out)
	if a == nil || p == nil {
		return nil, fmt.Errorf("no EndToEndLatency summary")
	}
	f := func(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v }
	return map[string]float64{"avg_ms": f(a[1]), "p50_ms": f(p[1]), "p99_ms": f(p[2]), "p999_ms": f(p[3])}, nil
}
