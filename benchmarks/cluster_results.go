package benchmarks

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ClusterHeader is what every line of a cluster benchmark's results
// (`make bench-cluster`, benchmarks/results/<date>-<commit>-cluster.jsonl)
// repeats, so each line stands alone.
type ClusterHeader struct {
	Date     string  `json:"date"`
	Commit   string  `json:"commit"`
	Command  string  `json:"command"`
	Profile  string  `json:"profile"`
	Settings string  `json:"settings"`
	Machine  Machine `json:"machine"`
	// LoadAvgEnd is the load average when the run ended (Machine has the
	// one at its start).
	LoadAvgEnd string `json:"load_avg_end"`
}

// ClusterLine is one system's figures in one scenario of the cluster
// benchmark: the medians and spreads (Entry) and every round's values in
// round order (Rounds).
type ClusterLine struct {
	ClusterHeader
	Entry
	Rounds Rounds `json:"rounds"`
}

// Validate checks one line: the header, a scenario, a system, and metrics
// that are finite with a spread bracketing the median and as many rounds
// as values.
func (l ClusterLine) Validate() error {
	if l.Date == "" || l.Commit == "" || l.Machine.CPUs <= 0 || l.Machine.Kernel == "" {
		return fmt.Errorf("cluster line lacks date, commit or machine description")
	}
	if l.Scenario == "" || l.System == "" || len(l.Metrics) == 0 {
		return fmt.Errorf("cluster line %s/%s is incomplete", l.Scenario, l.System)
	}
	for k, s := range l.Metrics {
		if s.N <= 0 || s.Min > s.Median || s.Median > s.Max {
			return fmt.Errorf("%s/%s: metric %s is malformed: %+v", l.Scenario, l.System, k, s)
		}
		if len(l.Rounds[k]) != s.N {
			return fmt.Errorf("%s/%s: metric %s has %d round values for n=%d", l.Scenario, l.System, k, len(l.Rounds[k]), s.N)
		}
		for _, v := range l.Rounds[k] {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("%s/%s: metric %s has a round value %v", l.Scenario, l.System, k, v)
			}
		}
	}
	return nil
}

// summary is the line's main figures for a log.
func (l ClusterLine) summary() string {
	keys := make([]string, 0, len(l.Metrics))
	for k := range l.Metrics {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		s := l.Metrics[k]
		fmt.Fprintf(&b, "%s %.2f (%.2f-%.2f) ", k, s.Median, s.Min, s.Max)
	}
	return strings.TrimSpace(b.String())
}

// WriteClusterLines writes lines, each with the header, to dir as
// <date>-<commit>-cluster.jsonl and returns the path. Every line is
// validated first; nothing is written when one is malformed.
func WriteClusterLines(dir string, h ClusterHeader, lines []ClusterLine) (string, error) {
	if len(lines) == 0 {
		return "", fmt.Errorf("no cluster benchmark lines")
	}
	var buf bytes.Buffer
	for _, l := range lines {
		l.ClusterHeader = h
		if err := l.Validate(); err != nil {
			return "", err
		}
		if err := WriteJSONLine(&buf, l); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	name := filepath.Join(dir, time.Now().UTC().Format("2006-01-02")+"-"+h.Commit+"-cluster.jsonl")
	return name, os.WriteFile(name, buf.Bytes(), 0o644)
}
