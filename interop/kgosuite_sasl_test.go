package interop

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKgoSuiteSASL runs franz-go's own SASL tests (TestSCRAMAuth,
// TestSCRAMAuthBadCredentials, TestOAuthAuth from the kgo integration
// suite, interop/kgo-suite.sh) against `verbatim serve --config` with a
// PLAINTEXT listener for the suite's seeds, a SASL_PLAINTEXT listener with
// SCRAM-SHA-512 (user bootstrapped by `verbatim format --add-scram`) and
// one with OAUTHBEARER (Kafka's unsecured validator, what kgo's test
// sends). The suite's verdict is franz-go's: 3 passed, 0 failed, 0
// skipped.
func TestKgoSuiteSASL(t *testing.T) {
	bin := BuildVerbatim(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	FormatSCRAM(t, bin, data, map[string]string{"kgo": "kgo-secret"})
	ports := FreePorts(t, 3)
	plain, scram, oauth := Addr(ports[0]), Addr(ports[1]), Addr(ports[2])
	ServeConfig(t, bin, dir, []string{
		"log.dirs=" + data,
		"listeners=PLAINTEXT://" + plain + ",SCRAM://" + scram + ",OAUTH://" + oauth,
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SCRAM:SASL_PLAINTEXT,OAUTH:SASL_PLAINTEXT",
		"listener.name.scram.sasl.enabled.mechanisms=SCRAM-SHA-512",
		"listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER",
		"auto.create.topics.enable=true",
		"group.initial.rebalance.delay.ms=0",
	}, []string{plain, scram, oauth})
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	res, err := RunTool(t, Cmd{Timeout: 8 * time.Minute, Env: []string{
		"KGO_TEST_SCRAM_SEEDS=" + scram, "KGO_TEST_SCRAM=kgo:kgo-secret:512", "KGO_TEST_OAUTH_SEEDS=" + oauth,
	}}, filepath.Join(root, "interop", "kgo-suite.sh"), "-run", "^(TestSCRAMAuth|TestSCRAMAuthBadCredentials|TestOAuthAuth)$", plain)
	t.Logf("%s", tail(res.Stdout, 10))
	if err != nil {
		t.Fatalf("kgo SASL tests against Verbatim: %v\n%s", err, res.describe())
	}
	if !strings.Contains(res.Stdout, "3 passed, 0 failed, 0 skipped") {
		t.Fatalf("kgo SASL tests: want 3 passed, 0 failed, 0 skipped:\n%s", res.Stdout)
	}
}
