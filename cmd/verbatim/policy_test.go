package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/kbatch/kbatchtest"
)

func runPolicy(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := policyMain(args, &out, &errb)
	return code, out.String(), errb.String()
}

func countBatches(t *testing.T, data []byte) int {
	n := 0
	for rest := data; len(rest) > 0; n++ {
		var err error
		if _, rest, err = kbatch.Next(rest); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// TestPolicyRunRealKafkaSegments: unmodified Kafka 4.4 segments of a
// transactional and a compacted topic pass the default mirror policies
// (and producer-ids), one accept line per batch.
func TestPolicyRunRealKafkaSegments(t *testing.T) {
	segs, _ := filepath.Glob("testdata/kafka-4.4/*.log")
	if len(segs) != 3 {
		t.Fatalf("found %d segments", len(segs))
	}
	for _, seg := range segs {
		data, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		want := countBatches(t, data)
		for _, list := range []string{"epoch-monotonic,control-records", "producer-ids"} {
			code, out, errs := runPolicy(t, "run", list, "--batches", seg)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if code != 0 || len(lines) != want || errs != "" {
				t.Fatalf("%s with %s: exit %d, %d lines for %d batches, stderr %q, first rejection %q", seg, list, code, len(lines), want, errs, firstReject(out))
			}
			base, _ := kbatch.ParseHeader(data)
			if lines[0] != "offset="+strconv.FormatInt(base.BaseOffset, 10)+" verdict=accept reason=" {
				t.Fatalf("first line %q", lines[0])
			}
		}
	}
}

func firstReject(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "verdict=reject") {
			return l
		}
	}
	return ""
}

func TestPolicyRunRejectsRewind(t *testing.T) {
	var set []byte
	for i, epoch := range []int32{3, 5, 4, 5} {
		b := kbatch.NewBatch(1, kbatch.Record{Value: []byte("v")})
		b.BaseOffset, b.LeaderEpoch = int64(100+i), epoch
		enc := kbatchtest.Encode(t, b)
		set = append(set, enc...)
	}
	path := filepath.Join(t.TempDir(), "set.bin")
	if err := os.WriteFile(path, set, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runPolicy(t, "run", "--batches", path, "epoch-monotonic")
	want := "offset=100 verdict=accept reason=\n" +
		"offset=101 verdict=accept reason=\n" +
		"offset=102 verdict=reject reason=epoch-monotonic: leader epoch 4 rewinds below 5\n" +
		"offset=103 verdict=accept reason=\n"
	if code != 1 || out != want {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
	// A WAT module file works as well as a built-in name.
	code, out, _ = runPolicy(t, "run", "../../policies/examples/epoch-monotonic-wat/policy.wasm", "--batches", path)
	if code != 1 || !strings.Contains(out, "offset=102 verdict=reject reason=epoch-monotonic-wat: leader epoch rewinds") {
		t.Fatalf("WAT: exit %d, output:\n%s", code, out)
	}
	// Torn input is a usage-class failure, not a verdict.
	if err := os.WriteFile(path, set[:len(set)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runPolicy(t, "run", "epoch-monotonic", "--batches", path); code != 2 || !strings.Contains(errs, "truncated") {
		t.Fatalf("torn file: exit %d, %q", code, errs)
	}
}

func TestPolicyCheck(t *testing.T) {
	code, out, _ := runPolicy(t, "check", "../../policies/examples/epoch-monotonic-wat/policy.wasm")
	if code != 0 || !strings.Contains(out, "name: epoch-monotonic-wat") || !strings.Contains(out, "verbatim_judge(i32, i32) -> (i64)") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	code, out, _ = runPolicy(t, "check", "../../wasmpolicy/testdata/wat/noexport.wasm")
	if code != 1 || !strings.Contains(out, "lacks export verbatim_judge") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, args := range [][]string{{"check"}, {"check", "/nonexistent.wasm"}, {"run", "epoch-monotonic"}, {"run", "nope", "--batches", "policy_test.go"}, {"frob"}, {}} {
		if code, _, _ := runPolicy(t, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}
