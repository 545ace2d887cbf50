package verify

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/internal/testkit"
)

func createCompacted(t *testing.T, addr, topic string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 1
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name, cfg.Value = "cleanup.policy", kmsg.StringPtr("compact")
	rt.Configs = append(rt.Configs, cfg)
	req.Topics = append(req.Topics, rt)
	resp, err := testkit.Client(t, addr).Request(testkit.Ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; c != 0 {
		t.Fatalf("create %s: error %d", topic, c)
	}
}

// history writes one history's records [from, to) to a cluster, one batch
// per record, with fixed timestamps and no producer id, so two clusters
// fed the same rounds hold the same records at the same offsets. alter
// changes the value of the record at that index.
func history(t *testing.T, cl *kgo.Client, from, to int, alter int) {
	t.Helper()
	for i := from; i < to; i++ {
		r := &kgo.Record{Key: []byte(fmt.Sprintf("key-%d", i%5)), Value: []byte(fmt.Sprintf("value %d", i)),
			Timestamp: time.UnixMilli(histBase + int64(i))}
		if i == 0 {
			r.Key = []byte("once")
		}
		if i == alter {
			r.Value = []byte("altered")
		}
		produce(t, cl, r)
	}
}

// histBase keeps the histories' timestamps recent (retention would
// delete older ones) and equal on both clusters.
var histBase = time.Now().UnixMilli()

func kfakePair(t *testing.T) (src, dst *kfake.Cluster, sa, da string) {
	src = testkit.StartSource(t)
	dst = testkit.StartSource(t)
	sa, da = src.ListenAddrs()[0], dst.ListenAddrs()[0]
	createCompacted(t, sa, "c")
	createCompacted(t, da, "c")
	return src, dst, sa, da
}

func plainClient(t *testing.T, addr string) *kgo.Client {
	return testkit.Client(t, addr, kgo.DefaultProduceTopic("c"), kgo.DisableIdempotentWrite(), kgo.ProducerLinger(0))
}

// twoCompactions writes one history of 21 records to two kfake clusters,
// the source compacted after 11 and the destination after all 21 (its
// record alter changed), and verifies the pair.
func twoCompactions(t *testing.T, alter int) *Report {
	src, dst, sa, da := kfakePair(t)
	sc, dc := plainClient(t, sa), plainClient(t, da)
	history(t, sc, 0, 11, -1)
	src.Compact()
	history(t, sc, 11, 21, -1)
	history(t, dc, 0, 21, alter)
	dst.Compact()
	return run(t, sa, da, "c")
}

// TestVerifyCompactedEquivalent: source and destination hold one history
// of writes and each cleaned it at its own moment (the source half way,
// the destination at the end): neither is a superset of the other, and
// verify says compacted-equivalent, exit 0.
func TestVerifyCompactedEquivalent(t *testing.T) {
	rep := twoCompactions(t, -1)
	p := rep.Partitions[0]
	if !rep.Exact || rep.ExitCode() != 0 || p.Status != CompactedEquivalent {
		t.Fatalf("exact %v status %s mismatch %+v checks %v", rep.Exact, p.Status, p.FirstMismatch, p.Checks)
	}
}

// TestVerifyCompactedEquivalentAltered: the same, but the destination's
// copy of one surviving record has another value: a mismatch naming its
// offset and the field.
func TestVerifyCompactedEquivalentAltered(t *testing.T) {
	rep := twoCompactions(t, 18)
	p := rep.Partitions[0]
	if rep.Exact || rep.ExitCode() != 1 || p.Status != Mismatch || p.FirstMismatch == nil ||
		p.FirstMismatch.Offset != 18 || p.FirstMismatch.Field != "record.value" {
		t.Fatalf("exact %v status %s mismatch %+v", rep.Exact, p.Status, p.FirstMismatch)
	}
}

// TestOneSided: which records one side may hold alone.
func TestOneSided(t *testing.T) {
	ks := func(last, lastLive int64) *keyState { return &keyState{last: last, lastLive: lastLive} }
	own := map[string]*keyState{"k": ks(9, 9), "t": ks(5, 3)}
	other := map[string]*keyState{"t": ks(7, 7)}
	rec := func(off int64, key string, value *string) record {
		r := record{offset: off}
		if key != "" {
			r.rec.Key = []byte(key)
		}
		if value != nil {
			r.rec.Value = []byte(*value)
		}
		return r
	}
	v := "v"
	plain, aborted := &sideBatch{}, &sideBatch{aborted: true}
	for _, tc := range []struct {
		name string
		b    *sideBatch
		r    record
		ok   bool
	}{
		{"a later record of the key on its side", plain, rec(4, "k", &v), true},
		{"the key's last record", plain, rec(9, "k", &v), false},
		{"aborted", aborted, rec(9, "k", &v), true},
		{"keyless", plain, rec(2, "", &v), true},
		{"control", plain, record{offset: 3, control: true}, true},
		{"tombstone, a later live value on the other side", plain, rec(5, "t", nil), false},
		{"tombstone, no later value on either side", plain, rec(8, "u", nil), true},
	} {
		why := oneSided(tc.b, tc.r, own, other)
		if (why == "") != tc.ok {
			t.Errorf("%s: oneSided = %q, want ok=%v", tc.name, why, tc.ok)
		}
	}
}
