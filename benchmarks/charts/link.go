package main

import (
	"image/color"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot/vg"
)

// A cluster link report (`make bench-link`, <date>-<commit>-link.json)
// has scenarios link-<partitions> with the systems below; it gets its own
// charts and leaves the README's generated results section alone.

const linkSuffix = "-link.json"

func isLinkReport(path string) bool { return strings.HasSuffix(path, linkSuffix) }

var linkSystems = []struct {
	name  string
	color color.Color
}{
	{"reference", color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}},
	{"link", colVerbatim},
	{"push", color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}},
	{"push-old", color.RGBA{R: 0x98, G: 0xdf, B: 0x8a, A: 0xff}},
	{"mm2", colPeer},
}

// linkCharts renders <base>-throughput.svg (MB/s) and <base>-cpu.svg (CPU
// seconds per GB, copier + destination) next to the report.
func linkCharts(r report, path string, png bool) error {
	base := strings.TrimSuffix(path, ".json")
	for _, c := range []struct {
		name, metric, title, ylabel string
	}{
		{"throughput", "mb_per_s", "Cluster link vs reference copier, mirror push, MirrorMaker 2 (median, min-max)", "MB/s of source bytes"},
		{"cpu", "cpu_s_per_gb", "CPU seconds per GB, copier + destination (median, min-max)", "CPU s / GB"},
	} {
		out := base + "-" + c.name + ".svg"
		if err := linkChart(r, c.metric, c.title, c.ylabel, out); err != nil {
			return err
		}
		if png {
			if err := linkChart(r, c.metric, c.title, c.ylabel, strings.TrimSuffix(out, ".svg")+".png"); err != nil {
				return err
			}
		}
	}
	return nil
}

func linkChart(r report, metric, title, ylabel, out string) error {
	labels := scenarios(r, "link-")
	var ss []series
	for _, sys := range linkSystems {
		s := series{name: sys.name, color: sys.color}
		ran := false
		for _, scen := range labels {
			e, ok := find(r, scen, sys.name)
			ran = ran || ok
			s.vals = append(s.vals, e.Metrics[metric]) // zero where the system did not run
		}
		if ran { // a system no scenario ran (push-old without -linkbench.old-push) gets no bars
			ss = append(ss, s)
		}
	}
	for i, l := range labels {
		labels[i] = strings.TrimPrefix(l, "link-") + " partitions"
	}
	return groupedN(title, ylabel, labels, ss, filepath.Clean(out), 18*vg.Centimeter)
}
