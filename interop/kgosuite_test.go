//go:build kgosuite

package interop

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKgoSuiteAgainstKafka starts a real Kafka 4.4 single node and runs
// interop/kgo-suite.sh against it. It is built only with -tags kgosuite
// (the whole suite takes minutes, too slow for `make test`):
//
//	go test -tags kgosuite -run TestKgoSuiteAgainstKafka -timeout 40m -v ./interop/
//
// KGO_SUITE_RUN / KGO_SUITE_SKIP pass -run / -skip patterns through.
func TestKgoSuiteAgainstKafka(t *testing.T) {
	k := StartKafka(t, KafkaOptions{HeapMB: 768})
	runKgoSuite(t, "Kafka 4.4", k.Bootstrap())
}

// TestKgoSuiteRF3 runs the suite with KGO_TEST_RF=3 (its topics created
// with replication factor 3) against a 3-broker Verbatim cluster started by
// scripts/cluster.sh (`make kgo-rf3`).
func TestKgoSuiteRF3(t *testing.T) {
	c := StartVCluster(t, BuildVerbatim(t), 3, VClusterOptions{Props: []string{"group.initial.rebalance.delay.ms=0"}})
	runKgoSuite(t, "a 3-broker Verbatim cluster", c.Bootstrap(), "-rf", "3")
}

// runKgoSuite runs interop/kgo-suite.sh against seeds with extra flags
// and fails unless it passed with 0 failed.
func runKgoSuite(t *testing.T, against, seeds string, extra ...string) {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{filepath.Join(root, "interop", "kgo-suite.sh"), "-timeout", "30m"}, extra...)
	if p := os.Getenv("KGO_SUITE_RUN"); p != "" {
		args = append(args, "-run", p)
	}
	if p := os.Getenv("KGO_SUITE_SKIP"); p != "" {
		args = append(args, "-skip", p)
	}
	args = append(args, seeds)
	res, err := RunTool(t, Cmd{Timeout: 35 * time.Minute}, args...)
	t.Logf("%s", tail(res.Stdout, 30))
	if err != nil {
		t.Fatalf("kgo suite against %s failed: %v", against, err)
	}
	if !strings.Contains(res.Stdout, " 0 failed") {
		t.Fatalf("kgo suite summary does not say 0 failed")
	}
}
