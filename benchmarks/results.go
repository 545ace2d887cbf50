package benchmarks

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Report is the machine-readable result of `make bench`
// (benchmarks/results/<date>-<commit>.json).
type Report struct {
	Date      string         `json:"date"`
	Commit    string         `json:"commit"`
	Profile   string         `json:"profile"`
	Command   string         `json:"command"`
	Machine   Machine        `json:"machine"`
	Scenarios []Entry        `json:"scenarios"`
	Ingest    []IngestResult `json:"ingest"`
	Gaps      []string       `json:"gaps,omitempty"`
}

// Entry is one system's figures in one scenario: each metric's median and
// spread over the rounds.
type Entry struct {
	Scenario string          `json:"scenario"`
	System   string          `json:"system"` // verbatim, kafka, ...
	Params   string          `json:"params"`
	Metrics  map[string]Stat `json:"metrics"`
	Notes    string          `json:"notes,omitempty"`
}

// Stat is the median, minimum and maximum of a metric over N rounds.
type Stat struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
}

// NewStat summarises the values of one metric.
func NewStat(vals []float64) Stat {
	if len(vals) == 0 {
		return Stat{}
	}
	return Stat{Median: round2(Median(vals)), Min: round2(slices.Min(vals)), Max: round2(slices.Max(vals)), N: len(vals)}
}

// Rounds collects per-round metric values of one system in one scenario.
type Rounds map[string][]float64

// Add appends one round's metrics.
func (r Rounds) Add(m map[string]float64) {
	for k, v := range m {
		r[k] = append(r[k], v)
	}
}

// Entry summarises the rounds.
func (r Rounds) Entry(scenario, system, params string) Entry {
	e := Entry{Scenario: scenario, System: system, Params: params, Metrics: map[string]Stat{}}
	for k, v := range r {
		e.Metrics[k] = NewStat(v)
	}
	return e
}

// Validate checks that a report is well formed: a date and commit, a
// machine description, at least one scenario, every entry with a scenario,
// a system and metrics whose spread brackets the median.
func (r *Report) Validate() error {
	if r.Date == "" || r.Commit == "" || r.Machine.CPUs <= 0 || r.Machine.Kernel == "" {
		return fmt.Errorf("report lacks date, commit or machine description")
	}
	if len(r.Scenarios) == 0 && len(r.Ingest) == 0 {
		return fmt.Errorf("report has no scenarios")
	}
	for _, e := range r.Scenarios {
		if e.Scenario == "" || e.System == "" || len(e.Metrics) == 0 {
			return fmt.Errorf("entry %+v is incomplete", e)
		}
		for k, s := range e.Metrics {
			if s.N <= 0 || s.Min > s.Median || s.Median > s.Max {
				return fmt.Errorf("%s/%s: metric %s is malformed: %+v", e.Scenario, e.System, k, s)
			}
		}
	}
	for _, i := range r.Ingest {
		if i.Scenario == "" || i.MBps <= 0 || i.RefMBps <= 0 || i.Rounds <= 0 {
			return fmt.Errorf("ingest line %+v is incomplete", i)
		}
	}
	return nil
}

// Write notes the load average at the end beside the one at the start
// (loadDir: the disk DescribeMachine looks at), validates the report and
// writes it to dir as <date>-<commit><suffix>.json, returning the path.
func (r *Report) Write(loadDir, dir, suffix string) (string, error) {
	r.Machine.LoadAvg = DescribeMachine(loadDir).LoadAvg + " (at the end; " + r.Machine.LoadAvg + " at the start)"
	if err := r.Validate(); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	name := filepath.Join(dir, time.Now().UTC().Format("2006-01-02")+"-"+r.Commit+suffix+".json")
	return name, os.WriteFile(name, append(b, '\n'), 0o644)
}

// Median of xs (0 for none).
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func round2(x float64) float64 { return float64(int64(x*100+0.5)) / 100 }

func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// WriteJSONLine writes v as one line of JSON.
func WriteJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
