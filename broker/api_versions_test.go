package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestApiVersionsFromKgo(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	cl := b.client()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "verbatim-test", "1.0"
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("error code %d", resp.ErrorCode)
	}
	got := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	if got[18] != [2]int16{0, 4} {
		t.Fatalf("ApiVersions range %v, want [0 4]; all: %v", got[18], got)
	}
	for _, e := range registry {
		if e == nil {
			continue
		}
		if got[e.key] != [2]int16{e.minVersion, e.maxVersion} {
			t.Errorf("key %d advertised %v, registered %d-%d", e.key, got[e.key], e.minVersion, e.maxVersion)
		}
	}
}
