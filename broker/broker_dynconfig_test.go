package broker

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func describeBrokerConfig(t *testing.T, adm *kadm.Client, node int32, name string) (string, kmsg.ConfigSource) {
	t.Helper()
	rcs, err := adm.DescribeBrokerConfigs(ctxT(t), node)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			t.Fatal(rc.Err)
		}
		for _, c := range rc.Configs {
			if c.Key == name {
				return c.MaybeValue(), c.Source
			}
		}
	}
	t.Fatalf("broker %d does not describe %s", node, name)
	return "", 0
}

// The replication throttles are dynamic broker configs: set on the node or
// as the cluster default, described with their source, deleted back to
// unthrottled; other names and bad values are INVALID_CONFIG.
func TestDynamicBrokerThrottleConfigs(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	adm := b.admin()
	ctx := ctxT(t)
	node := b.srv.cfg.NodeID
	if v, src := describeBrokerConfig(t, adm, node, cfgLeaderThrottleRate); v != "9223372036854775807" || src != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("default: %s %v", v, src)
	}
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: cfgLeaderThrottleRate, Value: sp("1000")}, {Op: kadm.SetConfig, Name: cfgFollowerThrottleRate, Value: sp("2000")}}, node)
	if err != nil || rs[0].Err != nil {
		t.Fatalf("set: %v %+v", err, rs)
	}
	if v, src := describeBrokerConfig(t, adm, node, cfgLeaderThrottleRate); v != "1000" || src != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Fatalf("set: %s %v", v, src)
	}
	if got := b.srv.throttleRate(cfgFollowerThrottleRate); got != 2000 {
		t.Fatalf("follower rate %d", got)
	}
	// The cluster default applies where the node has none.
	if rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: cfgAlterLogDirsRate, Value: sp("5")}}); err != nil || rs[0].Err != nil {
		t.Fatalf("set default: %v %+v", err, rs)
	}
	if v, src := describeBrokerConfig(t, adm, node, cfgAlterLogDirsRate); v != "5" || src != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("default: %s %v", v, src)
	}
	for _, bad := range []kadm.AlterConfig{{Op: kadm.SetConfig, Name: cfgLeaderThrottleRate, Value: sp("-1")}, {Op: kadm.SetConfig, Name: "num.io.threads", Value: sp("4")}, {Op: kadm.AppendConfig, Name: cfgLeaderThrottleRate, Value: sp("4")}} {
		rs, _ := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{bad}, node)
		if len(rs) != 1 || !errors.Is(rs[0].Err, kerr.InvalidConfig) {
			t.Fatalf("%+v: %+v", bad, rs)
		}
	}
	// Deleting (what kafka-reassign-partitions.sh --verify sends) clears.
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: cfgLeaderThrottleRate}, {Op: kadm.DeleteConfig, Name: cfgFollowerThrottleRate}, {Op: kadm.DeleteConfig, Name: cfgAlterLogDirsRate}}, node)
	if err != nil || rs[0].Err != nil {
		t.Fatalf("delete: %v %+v", err, rs)
	}
	if got := b.srv.throttleRate(cfgLeaderThrottleRate); got != unthrottled {
		t.Fatalf("leader rate after delete %d", got)
	}
}

// In cluster mode the configs are records in the cluster store, seen by
// every broker.
func TestDynamicBrokerConfigsInTheStore(t *testing.T) {
	c := newReplCluster(t, 2, nil)
	adm := c.nodes[1].b.admin()
	ctx := ctxT(t)
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: cfgFollowerThrottleRate, Value: sp("777")}})
	if err != nil || rs[0].Err != nil {
		t.Fatalf("set default: %v %+v", err, rs)
	}
	snap := mustSnapshot(t, c)
	if _, ok := snap.Record(brokerConfigKind, defaultBrokerRecord); !ok {
		t.Fatal("no broker-config record in the store")
	}
	c.sync(snap.Revision)
	if got := c.nodes[2].srv().throttleRate(cfgFollowerThrottleRate); got != 777 {
		t.Fatalf("node 2's follower rate %d", got)
	}
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: cfgFollowerThrottleRate}})
	if err != nil || rs[0].Err != nil {
		t.Fatalf("delete: %v %+v", err, rs)
	}
	if _, ok := mustSnapshot(t, c).Record(brokerConfigKind, defaultBrokerRecord); ok {
		t.Fatal("the record is left after every config was deleted")
	}
}
