package metrics

import (
	"bytes"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"

	"github.com/verbatim-kafka/verbatim/wireext"
)

// exposition renders the families whose names start with one of prefixes
// in the text format.
func exposition(t *testing.T, r *Registry, prefixes ...string) string {
	t.Helper()
	mfs, err := r.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		for _, p := range prefixes {
			if strings.HasPrefix(mf.GetName(), p) {
				if err := enc.Encode(mf); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
	}
	return b.String()
}

// TestMirrorMetrics: a scrape exposes each mirror partition's lag, state
// and last mirrored point, and per link the largest lag and the count of
// partitions by state (push mirrors, link "", belong to no link); a link
// that has no partition any more disappears.
func TestMirrorMetrics(t *testing.T) {
	r := New()
	st := []wireext.MirrorPartitionStatus{
		{Topic: "orders", Partition: 0, Link: "east", State: wireext.StateMirroring, Lag: 12, LagMs: 1500, LastMirroredOffset: 99, LastMirroredEpoch: 3},
		{Topic: "orders", Partition: 1, Link: "east", State: wireext.StateFailed, Reason: "divergence", Lag: 40, LagMs: 250, LastMirroredOffset: 7, LastMirroredEpoch: 2},
		{Topic: "pay", Partition: 4100, Link: "west", State: wireext.StatePaused, Lag: 0, LastMirroredOffset: -1, LastMirroredEpoch: -1},
		{Topic: "pushed", Partition: 0, State: wireext.StateMirroring, Lag: 5, LastMirroredOffset: 4, LastMirroredEpoch: 0},
	}
	RegisterMirrors(r, func() []wireext.MirrorPartitionStatus { return st })
	got := exposition(t, r, "kafka_server_mirrorpartitionmetrics_", "kafka_server_link_clusterlinkfetchermanager_", "verbatim_mirror_status_")
	want := `# HELP kafka_server_link_clusterlinkfetchermanager_maxlag The largest lag in offsets over the link's mirror partitions (Confluent's kafka.server.link:type=ClusterLinkFetcherManager,name=MaxLag).
# TYPE kafka_server_link_clusterlinkfetchermanager_maxlag gauge
kafka_server_link_clusterlinkfetchermanager_maxlag{link="east"} 40
kafka_server_link_clusterlinkfetchermanager_maxlag{link="west"} 0
# HELP kafka_server_link_clusterlinkfetchermanager_maxlagseconds The largest lag in seconds over the link's mirror partitions (ClusterLinkFetcherManager,name=MaxLagSeconds).
# TYPE kafka_server_link_clusterlinkfetchermanager_maxlagseconds gauge
kafka_server_link_clusterlinkfetchermanager_maxlagseconds{link="east"} 1.5
kafka_server_link_clusterlinkfetchermanager_maxlagseconds{link="west"} 0
# HELP kafka_server_mirrorpartitionmetrics_lag Offsets the mirror partition is behind its source: the source high watermark last fetched minus the log end offset (kafka.server:type=MirrorPartitionMetrics,name=Lag).
# TYPE kafka_server_mirrorpartitionmetrics_lag gauge
kafka_server_mirrorpartitionmetrics_lag{link="",partition="0",topic="pushed"} 5
kafka_server_mirrorpartitionmetrics_lag{link="east",partition="0",topic="orders"} 12
kafka_server_mirrorpartitionmetrics_lag{link="east",partition="1",topic="orders"} 40
kafka_server_mirrorpartitionmetrics_lag{link="west",partition="4100",topic="pay"} 0
# HELP kafka_server_mirrorpartitionmetrics_lagseconds Seconds the mirror partition has been behind its source, 0 when caught up (MirrorPartitionMetrics,name=LagSeconds).
# TYPE kafka_server_mirrorpartitionmetrics_lagseconds gauge
kafka_server_mirrorpartitionmetrics_lagseconds{link="",partition="0",topic="pushed"} 0
kafka_server_mirrorpartitionmetrics_lagseconds{link="east",partition="0",topic="orders"} 1.5
kafka_server_mirrorpartitionmetrics_lagseconds{link="east",partition="1",topic="orders"} 0.25
kafka_server_mirrorpartitionmetrics_lagseconds{link="west",partition="4100",topic="pay"} 0
# HELP kafka_server_mirrorpartitionmetrics_lastmirroredepoch The leader epoch of the last batch written from the source, -1 none (MirrorPartitionMetrics,name=LastMirroredEpoch).
# TYPE kafka_server_mirrorpartitionmetrics_lastmirroredepoch gauge
kafka_server_mirrorpartitionmetrics_lastmirroredepoch{link="",partition="0",topic="pushed"} 0
kafka_server_mirrorpartitionmetrics_lastmirroredepoch{link="east",partition="0",topic="orders"} 3
kafka_server_mirrorpartitionmetrics_lastmirroredepoch{link="east",partition="1",topic="orders"} 2
kafka_server_mirrorpartitionmetrics_lastmirroredepoch{link="west",partition="4100",topic="pay"} -1
# HELP kafka_server_mirrorpartitionmetrics_lastmirroredoffset The last offset written from the source, -1 none (MirrorPartitionMetrics,name=LastMirroredOffset).
# TYPE kafka_server_mirrorpartitionmetrics_lastmirroredoffset gauge
kafka_server_mirrorpartitionmetrics_lastmirroredoffset{link="",partition="0",topic="pushed"} 4
kafka_server_mirrorpartitionmetrics_lastmirroredoffset{link="east",partition="0",topic="orders"} 99
kafka_server_mirrorpartitionmetrics_lastmirroredoffset{link="east",partition="1",topic="orders"} 7
kafka_server_mirrorpartitionmetrics_lastmirroredoffset{link="west",partition="4100",topic="pay"} -1
# HELP kafka_server_mirrorpartitionmetrics_state 1 for the mirror partition's current state (PREPARING, MIRRORING, PAUSED, STOPPING, STOPPED, FAILED; MirrorPartitionMetrics,name=State).
# TYPE kafka_server_mirrorpartitionmetrics_state gauge
kafka_server_mirrorpartitionmetrics_state{link="",partition="0",state="MIRRORING",topic="pushed"} 1
kafka_server_mirrorpartitionmetrics_state{link="east",partition="0",state="MIRRORING",topic="orders"} 1
kafka_server_mirrorpartitionmetrics_state{link="east",partition="1",state="FAILED",topic="orders"} 1
kafka_server_mirrorpartitionmetrics_state{link="west",partition="4100",state="PAUSED",topic="pay"} 1
# HELP verbatim_mirror_status_series_omitted Mirror partitions beyond the per-partition series bound whose MirrorPartitionMetrics are not exported (the per-link metrics count them).
# TYPE verbatim_mirror_status_series_omitted gauge
verbatim_mirror_status_series_omitted 0
`
	if got != want {
		t.Fatalf("exposition:\n%s\nwant:\n%s", got, want)
	}

	// Partitions by state: every state of every link, 0 included.
	counts := exposition(t, r, "kafka_server_link_clusterlinkmetrics_mirrorpartitioncount")
	for _, line := range []string{`{link="east",state="FAILED"} 1`, `{link="east",state="MIRRORING"} 1`, `{link="west",state="PAUSED"} 1`, `{link="west",state="FAILED"} 0`} {
		if !strings.Contains(counts, "kafka_server_link_clusterlinkmetrics_mirrorpartitioncount"+line+"\n") {
			t.Fatalf("partition counts lack %s:\n%s", line, counts)
		}
	}
	if n := strings.Count(counts, "\nkafka_server_link_clusterlinkmetrics_mirrorpartitioncount{"); n != 2*len(mirrorStates) {
		t.Fatalf("%d partition count series, want %d:\n%s", n, 2*len(mirrorStates), counts)
	}

	// The west link's partition went away: its series go with it.
	st = st[:2]
	got = exposition(t, r, "kafka_server_link_clusterlinkfetchermanager_maxlag")
	if strings.Contains(got, "west") || !strings.Contains(got, `maxlag{link="east"} 40`) {
		t.Fatalf("after west's partitions went:\n%s", got)
	}
}

// TestMirrorMetricsBound: past MaxPartitionSeries partitions, the
// per-partition series stop and are counted as omitted, while the link's
// aggregates still cover every partition.
func TestMirrorMetricsBound(t *testing.T) {
	r := New()
	st := make([]wireext.MirrorPartitionStatus, MaxPartitionSeries+3)
	for i := range st {
		st[i] = wireext.MirrorPartitionStatus{Topic: "t", Partition: int32(i), Link: "l", State: wireext.StateMirroring, Lag: int64(i)}
	}
	RegisterMirrors(r, func() []wireext.MirrorPartitionStatus { return st })
	mfs, err := r.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]float64{ // series, value of the first
		"kafka_server_mirrorpartitionmetrics_lag":            {MaxPartitionSeries, 0},
		"verbatim_mirror_status_series_omitted":              {1, 3},
		"kafka_server_link_clusterlinkfetchermanager_maxlag": {1, MaxPartitionSeries + 2},
	}
	for _, mf := range mfs {
		w, ok := want[mf.GetName()]
		if !ok {
			continue
		}
		delete(want, mf.GetName())
		if got := [2]float64{float64(len(mf.GetMetric())), mf.GetMetric()[0].GetGauge().GetValue()}; got != w {
			t.Fatalf("%s: %v series and first value, want %v", mf.GetName(), got, w)
		}
	}
	if len(want) != 0 {
		t.Fatalf("missing %v", want)
	}
}
