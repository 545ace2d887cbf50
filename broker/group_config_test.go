package broker

import (
	"testing"
	"time"
)

// TestGroupInitialRebalanceDelayFromConfig: the serve flag
// --group-initial-rebalance-delay reaches the group coordinator, and an
// unset value keeps Kafka's default of 3 s.
func TestGroupInitialRebalanceDelayFromConfig(t *testing.T) {
	def := startBroker(t, t.TempDir(), nil)
	if got := def.srv.groups.InitialRebalanceDelay(); got != initialRebalanceDelay {
		t.Fatalf("default delay %s, want %s", got, initialRebalanceDelay)
	}
	zero := time.Duration(0)
	b := startBroker(t, t.TempDir(), func(c *Config) { c.GroupInitialRebalanceDelay = &zero })
	if got := b.srv.groups.InitialRebalanceDelay(); got != 0 {
		t.Fatalf("configured delay 0, coordinator uses %s", got)
	}
}
