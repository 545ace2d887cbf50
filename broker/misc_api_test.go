package broker

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestDescribeBrokerConfigs(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	adm := b.admin()
	ctx := ctxT(t)
	rcs, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(rcs) != 1 || rcs[0].Err != nil {
		t.Fatalf("%+v", rcs)
	}
	got := map[string]string{}
	for _, c := range rcs[0].Configs {
		got[c.Key] = c.MaybeValue()
	}
	for k, want := range map[string]string{"node.id": "1", "log.retention.ms": "604800000", "message.max.bytes": "1048588", "num.partitions": "1"} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
	// Another broker id is refused; the cluster default has no dynamic configs.
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, name := range []string{""} {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, name
		req.Resources = append(req.Resources, r)
	}
	lr := kmsg.NewDescribeConfigsRequestResource()
	lr.ResourceType, lr.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, "1"
	req.Resources = append(req.Resources, lr)
	tr := kmsg.NewDescribeConfigsRequestResource()
	tr.ResourceType, tr.ResourceName = kmsg.ConfigResourceTypeTopic, "nope"
	req.Resources = append(req.Resources, tr)
	resp, err := req.RequestWith(ctx, b.client())
	if err != nil {
		t.Fatal(err)
	}
	// kgo may reorder resources; match them by type.
	want := map[kmsg.ConfigResourceType]int16{
		kmsg.ConfigResourceTypeBroker:       0,
		kmsg.ConfigResourceTypeBrokerLogger: kerr.InvalidRequest.Code,
		kmsg.ConfigResourceTypeTopic:        kerr.UnknownTopicOrPartition.Code,
	}
	if len(resp.Resources) != 3 {
		t.Fatalf("%d resources", len(resp.Resources))
	}
	for _, r := range resp.Resources {
		if r.ErrorCode != want[r.ResourceType] {
			t.Errorf("resource %v %q: code %d want %d", r.ResourceType, r.ResourceName, r.ErrorCode, want[r.ResourceType])
		}
		if r.ResourceType == kmsg.ConfigResourceTypeBroker && len(r.Configs) != 0 {
			t.Errorf("cluster default lists %d configs", len(r.Configs))
		}
	}
	// Another broker id (kgo would route it elsewhere, so raw).
	other := kmsg.NewPtrDescribeConfigsRequest()
	other.Version = 4
	o := kmsg.NewDescribeConfigsRequestResource()
	o.ResourceType, o.ResourceName = kmsg.ConfigResourceTypeBroker, "2"
	other.Resources = append(other.Resources, o)
	c := dialRaw(t, b.addr)
	c.write(appendRequestFrame(nil, other, 1, "x"))
	body := c.readAnswer(1)
	oresp := kmsg.NewPtrDescribeConfigsResponse()
	oresp.Version = 4
	if err := oresp.ReadFrom(body[1:]); err != nil || oresp.Resources[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("broker 2: %v %+v", err, oresp.Resources)
	}
}

// topicConfigDocs describes the configs names of topic, documentation
// included.
func topicConfigDocs(t *testing.T, b *testBroker, topic string, names ...string) []kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeDocumentation = true
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	r.ConfigNames = names
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctxT(t), b.client())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Resources[0].Configs
}

func TestDescribeConfigsFilterAndDocs(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	if r, _ := b.admin().CreateTopic(ctxT(t), 1, 1, nil, "f"); r.Err != nil {
		t.Fatal(r.Err)
	}
	cs := topicConfigDocs(t, b, "f", "segment.ms", "not.a.config")
	if len(cs) != 1 || cs[0].Name != "segment.ms" || cs[0].ConfigType != kmsg.ConfigTypeLong || cs[0].Documentation == nil || *cs[0].Documentation == "" {
		t.Fatalf("%+v", cs)
	}
}

func TestDescribeCluster(t *testing.T) {
	b := startBroker(t, t.TempDir(), func(c *Config) { c.AdvertisedHost, c.AdvertisedPort = "broker.example", 19092 })
	cl := b.client()
	req := kmsg.NewPtrDescribeClusterRequest()
	req.EndpointType = 1
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 || resp.ClusterID != b.srv.ClusterID() || resp.ControllerID != 1 || len(resp.Brokers) != 1 {
		t.Fatalf("%+v", resp)
	}
	if br := resp.Brokers[0]; br.Host != "broker.example" || br.Port != 19092 || br.NodeID != 1 {
		t.Fatalf("broker %+v", br)
	}
	req.EndpointType = 2
	resp, err = req.RequestWith(ctxT(t), cl)
	if err != nil || resp.ErrorCode != kerr.UnsupportedEndpointType.Code {
		t.Fatalf("controller endpoint: %v %d", err, resp.ErrorCode)
	}
}

func TestDescribeTopicPartitionsPaging(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	adm := b.admin()
	for name, n := range map[string]int32{"a": 3, "b": 2, "c": 1} {
		if r, _ := adm.CreateTopic(ctxT(t), n, 1, nil, name); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	cl := b.client()
	var got []string
	var cursor *kmsg.DescribeTopicPartitionsRequestCursor
	pages := 0
	for {
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		req.ResponsePartitionLimit = 2
		req.Cursor = cursor
		resp, err := req.RequestWith(ctxT(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, tp := range resp.Topics {
			if tp.ErrorCode != 0 || tp.TopicID == ([16]byte{}) {
				t.Fatalf("topic %+v", tp)
			}
			for _, p := range tp.Partitions {
				got = append(got, *tp.Topic+"-"+string(rune('0'+p.Partition)))
				if p.LeaderID != 1 || p.LeaderEpoch != 0 {
					t.Fatalf("partition %+v", p)
				}
			}
		}
		if resp.NextCursor == nil {
			break
		}
		cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
		if pages > 10 {
			t.Fatal("paging does not end")
		}
	}
	if strings.Join(got, ",") != "a-0,a-1,a-2,b-0,b-1,c-0" || pages != 3 {
		t.Fatalf("pages %d: %v", pages, got)
	}
	// Named topics, one unknown.
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "zz"}, {Topic: "b"}}
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 2 || *resp.Topics[0].Topic != "b" || resp.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("%+v", resp.Topics)
	}
}

func TestInitProducerID(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir, nil)
	cl := b.client()
	var last int64 = -1
	for range 3 {
		resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctxT(t), cl)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("%v %d", err, resp.ErrorCode)
		}
		if resp.ProducerID <= last || resp.ProducerEpoch != 0 {
			t.Fatalf("id %d epoch %d after %d", resp.ProducerID, resp.ProducerEpoch, last)
		}
		last = resp.ProducerID
	}
	// A transactional id sent straight to the broker (kgo would look up
	// the coordinator first, so raw).
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	req.TransactionalID = sp("txn")
	req.TransactionTimeoutMillis = 60000
	c := dialRaw(t, b.addr)
	c.write(appendRequestFrame(nil, req, 1, "x"))
	body := c.readAnswer(1)
	tresp := kmsg.NewPtrInitProducerIDResponse()
	tresp.Version = 4
	if err := tresp.ReadFrom(body[1:]); err != nil || tresp.ErrorCode != 0 || tresp.ProducerID <= last || tresp.ProducerEpoch != 0 {
		t.Fatalf("transactional: %v %+v", err, tresp)
	}
	last = tresp.ProducerID
	b.stop()
	b2 := startBroker(t, dir, nil)
	resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctxT(t), b2.client())
	if err != nil || resp.ProducerID <= last {
		t.Fatalf("after restart id %d (before %d): %v", resp.ProducerID, last, err)
	}
}

func TestFindCoordinatorAnswersThisNode(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	for _, typ := range []int8{0, 1} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = typ
		req.CoordinatorKeys = []string{"k1", "k2"}
		resp, err := req.RequestWith(ctxT(t), b.client())
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Coordinators) != 2 {
			t.Fatalf("%d coordinators", len(resp.Coordinators))
		}
		for _, c := range resp.Coordinators {
			if c.ErrorCode != 0 || c.NodeID != 1 || c.Port <= 0 {
				t.Fatalf("%+v", c)
			}
		}
	}
	// Share groups (type 2) are not served; an empty transactional id is
	// invalid.
	for _, tc := range []struct {
		typ int8
		key string
	}{{2, "share"}, {1, ""}} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = tc.typ
		req.CoordinatorKeys = []string{tc.key}
		resp, err := req.RequestWith(ctxT(t), b.client())
		if err != nil {
			t.Fatal(err)
		}
		if c := resp.Coordinators[0]; c.ErrorCode != kerr.InvalidRequest.Code || c.ErrorMessage == nil {
			t.Fatalf("type %d key %q: %+v", tc.typ, tc.key, c)
		}
	}
}

func TestErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int16
	}{
		{nil, 0},
		{errTopicExists, kerr.TopicAlreadyExists.Code},
		{errStorage, kerr.KafkaStorageError.Code},
		{kafkaErr(kerr.UnknownTopicID, "x"), kerr.UnknownTopicID.Code},
		{kerr.NotController, kerr.NotController.Code},
		{errors.New("surprise"), kerr.UnknownServerError.Code},
	} {
		code, msg := errorToKafka(tc.err)
		if code != tc.code {
			t.Errorf("%v: code %d want %d", tc.err, code, tc.code)
		}
		if tc.err != nil && tc.err != kerr.NotController && (msg == nil || strings.HasPrefix(*msg, "topic already exists:")) {
			t.Errorf("%v: message %v", tc.err, msg)
		}
	}
}
