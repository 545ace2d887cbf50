package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/policies"
	"github.com/verbatim-kafka/verbatim/wasmpolicy"
)

// TestMain compiles the default mirror policies once for the package's
// brokers (a shared compilation cache), so no test pays for it inside a
// request.
func TestMain(m *testing.M) {
	os.Exit(func() int {
		// The cache outlives the run and is shared with the other
		// packages' tests (wasmpolicy's TestMain explains why).
		dir := filepath.Join(os.TempDir(), "verbatim-wasm-test-cache")
		testPolicyCacheDir = dir
		h, err := wasmpolicy.NewHost(wasmpolicy.Options{CacheDir: dir})
		if err == nil {
			err = h.Check(policies.BuiltinNames())
			h.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "compiling the built-in policies:", err)
			return 1
		}
		return m.Run()
	}())
}

func TestMirrorPoliciesConfig(t *testing.T) {
	dir := t.TempDir()
	wat, err := os.ReadFile("../policies/examples/epoch-monotonic-wat/policy.wasm")
	if err != nil {
		t.Fatal(err)
	}
	pdir := t.TempDir()
	if err := os.WriteFile(filepath.Join(pdir, "epoch-monotonic-wat.wasm"), wat, 0o644); err != nil {
		t.Fatal(err)
	}
	b := startBroker(t, dir, func(c *Config) { c.PolicyDir = pdir })
	adm := b.admin()
	ctx := ctxT(t)
	for _, c := range []struct{ value, want string }{
		{"nope", "unknown mirror policy \"nope\""},
		{"epoch-monotonic,epoch-monotonic", "listed twice"},
		{"../x", "unknown mirror policy"},
	} {
		// kadm returns the topic's error as err too.
		resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"mirror.mode": sp("push"), cfgMirrorPolicies: sp(c.value)}, "bad")
		if !errors.Is(err, kerr.InvalidConfig) || !errors.Is(resp.Err, kerr.InvalidConfig) || !strings.Contains(resp.ErrMessage, c.want) {
			t.Fatalf("mirror.policies=%s: %v %v %q", c.value, err, resp.Err, resp.ErrMessage)
		}
	}
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push"), cfgMirrorPolicies: sp("producer-ids, epoch-monotonic-wat")})
	rc, err := adm.DescribeTopicConfigs(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range rc[0].Configs {
		if c.Key == cfgMirrorPolicies {
			found = c.Value != nil && *c.Value == "producer-ids,epoch-monotonic-wat"
		}
	}
	if !found {
		t.Fatalf("mirror.policies not described as set: %+v", rc[0].Configs)
	}
	// Altering to an unknown module is refused; to a known one accepted.
	alter := func(v string) error {
		res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: cfgMirrorPolicies, Value: sp(v)}}, "m")
		if err != nil {
			return err
		}
		return res[0].Err
	}
	if err := alter("nope"); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("alter to nope: %v", err)
	}
	if err := alter("control-records"); err != nil {
		t.Fatalf("alter to control-records: %v", err)
	}
	if got := b.srv.policy.binding(b.srv.Topic("m")).b.Policies(); strings.Join(got, ",") != "control-records" {
		t.Fatalf("rebound to %v", got)
	}
}

// TestMirrorPoliciesJudge drives judgePolicies on a mirror topic with the
// defaults and on an ordinary topic without policies.
func TestMirrorPoliciesJudge(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push")})
	createTopic(t, b, "plain", 1, nil)
	if r := mirrorOne(t, b, "m", data(0, 5, 2).encode(t), 0, -1); r.ErrorCode != 0 {
		t.Fatalf("first mirror produce: %+v", r)
	}
	p := b.srv.Topic("m").Partition(0)
	h := mustHandle(t, p)
	if got := b.srv.policy.binding(p.Topic).b.Policies(); strings.Join(got, ",") != strings.Join(policies.DefaultMirror, ",") {
		t.Fatalf("mirror topic bound %v, want the defaults", got)
	}
	err := b.srv.judgePolicies(p, h.log, data(2, 3, 1).encode(t), 2)
	code, msg := dataErrorToKafka(err)
	if code != kerr.PolicyViolation.Code || !strings.Contains(msg, "mirror policy epoch-monotonic rejected the batch at offset 2: leader epoch 3 rewinds below 5") {
		t.Fatalf("epoch rewind: %d %q", code, msg)
	}
	if err := b.srv.judgePolicies(p, h.log, data(2, 5, 1).encode(t), 2); err != nil {
		t.Fatalf("same epoch: %v", err)
	}
	pp := b.srv.Topic("plain").Partition(0)
	if b.srv.policy.binding(pp.Topic).b != nil {
		t.Fatal("ordinary topic bound policies")
	}
}
