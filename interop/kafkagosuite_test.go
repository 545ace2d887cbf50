//go:build kafkagosuite

package interop

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

var summaryOK = regexp.MustCompile(`(?m)^kafkago-suite: \d+ passed, 0 failed, \d+ skipped$`)

// TestKafkaGoSuiteAgainstVerbatim builds verbatim and runs
// interop/kafkago-suite.sh with it: segmentio/kafka-go's own tests, less
// interop/kafkago-excluded.txt, in a network namespace where the broker owns
// localhost:9092. Built only with -tags kafkagosuite (minutes, root needed
// for the namespace; `make kafkago-suite` runs the script directly):
//
//	go test -tags kafkagosuite -run TestKafkaGoSuiteAgainstVerbatim -timeout 40m -v ./interop/
//
// KAFKAGO_SUITE_RUN / KAFKAGO_SUITE_SKIP pass -run / -skip patterns through;
// KAFKAGO_SUITE_KAFKA=1 serves with Apache Kafka 4.4 instead (a baseline).
func TestKafkaGoSuiteAgainstVerbatim(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{filepath.Join(root, "interop", "kafkago-suite.sh"), "-total-timeout", "30m"}
	if p := os.Getenv("KAFKAGO_SUITE_RUN"); p != "" {
		args = append(args, "-run", p)
	}
	if p := os.Getenv("KAFKAGO_SUITE_SKIP"); p != "" {
		args = append(args, "-skip", p)
	}
	if os.Getenv("KAFKAGO_SUITE_KAFKA") == "1" {
		args = append(args, "-kafka")
	} else {
		args = append(args, BuildVerbatim(t))
	}
	res, err := RunTool(t, Cmd{Timeout: 35 * time.Minute}, args...)
	t.Logf("%s", tail(res.Stdout, 40))
	if err != nil {
		t.Fatalf("kafka-go suite failed: %v", err)
	}
	if !summaryOK.MatchString(res.Stdout) {
		t.Fatalf("kafka-go suite summary does not say 0 failed")
	}
}
