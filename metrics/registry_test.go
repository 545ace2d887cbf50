package metrics

import (
	"testing"
	"time"
)

func TestErrorNames(t *testing.T) {
	r := New()
	a := r.API("Produce")
	a.Error(0)
	a.Error(3)
	a.Error(3)
	a.Error(-1)
	a.Error(30000) // unknown code: its own name, the shared overflow slot
	want := map[string]float64{"NONE": 1, "UNKNOWN_TOPIC_OR_PARTITION": 2, "UNKNOWN_SERVER_ERROR": 1, "UNKNOWN_30000": 1}
	got := values(t, r, "kafka_network_requestmetrics_errors_total", "error")
	if len(got) != len(want) {
		t.Fatalf("errors %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("errors %v, want %v", got, want)
		}
	}
}

// values gathers family name's counters by the value of label.
func values(t *testing.T, r *Registry, name, label string) map[string]float64 {
	t.Helper()
	mfs, err := r.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label {
					out[lp.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

func TestDropTopic(t *testing.T) {
	r := New()
	m := r.Topic("a")
	if r.Topic("a") != m {
		t.Fatal("a topic's handles are not cached")
	}
	m.BytesIn.Add(10)
	r.Topic("b").BytesIn.Add(1)
	r.DropTopic("a")
	if got := values(t, r, "kafka_server_brokertopicmetrics_bytesin_total", "topic"); len(got) != 1 || got["b"] != 1 {
		t.Fatalf("bytesin after dropping a: %v, want only b", got)
	}
	if r.Topic("a") == m {
		t.Fatal("a recreated topic reuses the deleted one's handles")
	}
}

func TestNilListener(t *testing.T) {
	var l *Listener
	l.Opened()
	l.Closed()
	l.AuthFailed()
	l.AuthSucceeded()
}

// TestNilRegistry: a broker built without Open (fuzz targets) counts into
// nothing.
func TestNilRegistry(t *testing.T) {
	var r *Registry
	r.Topic("t").BytesIn.Add(1)
	r.DropTopic("t")
	r.LogFlush(time.Millisecond)
	r.API("Produce").Done(time.Millisecond, Phases{Local: time.Millisecond})
	r.API("Produce").Error(3)
	r.Listener("L", "PLAINTEXT").Opened()
	r.Policy("t").Accepted(time.Millisecond)
}
