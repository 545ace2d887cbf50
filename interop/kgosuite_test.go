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
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{filepath.Join(root, "interop", "kgo-suite.sh"), "-timeout", "30m"}
	if p := os.Getenv("KGO_SUITE_RUN"); p != "" {
		args = append(args, "-run", p)
	}
	if p := os.Getenv("KGO_SUITE_SKIP"); p != "" {
		args = append(args, "-skip", p)
	}
	args = append(args, k.Bootstrap())
	res, err := RunTool(t, Cmd{Timeout: 35 * time.Minute}, args...)
	t.Logf("%s", tail(res.Stdout, 30))
	if err != nil {
		t.Fatalf("kgo suite against Kafka 4.4 failed: %v", err)
	}
	if !strings.Contains(res.Stdout, " 0 failed") {
		t.Fatalf("kgo suite summary does not say 0 failed")
	}
}
