package broker

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/authz"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// Test principals: connections from these loopback addresses get them
// (Config.testPrincipals). admin is a super user.
const (
	adminIP   = "127.0.0.1"
	malloryIP = "127.0.0.2"
	mallory   = "User:mallory"
)

func withACLs(extra func(*Config)) func(*Config) {
	return func(c *Config) {
		c.Authorizer = true
		c.SuperUsers = []string{"User:admin"}
		c.testPrincipals = map[string]string{adminIP: "User:admin", malloryIP: mallory}
		if extra != nil {
			extra(c)
		}
	}
}

// rawAs sends req from the loopback address from and decodes the answer.
func rawAs[R kmsg.Response](t *testing.T, b *testBroker, from string, req kmsg.Request) R {
	t.Helper()
	resp, err := rawRoundTripFrom(b.addr, from, req)
	if err != nil {
		t.Fatalf("%T v%d from %s: %v", req, req.GetVersion(), from, err)
	}
	return resp.(R)
}

// grant creates ALLOW ACLs for principal (as the super user), each
// "TYPE:name:OP" with a literal pattern, or "TYPE:name*:OP" prefixed.
func grant(t *testing.T, b *testBroker, principal string, perm authz.Permission, specs ...string) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	req.Version = 3
	for _, sp := range specs {
		f := strings.Split(sp, ":")
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType = map[string]kmsg.ACLResourceType{"TOPIC": 2, "GROUP": 3, "CLUSTER": 4, "TXN": 5}[f[0]]
		c.ResourceName, c.ResourcePatternType = f[1], kmsg.ACLResourcePatternTypeLiteral
		if strings.HasSuffix(f[1], "*") && f[1] != "*" {
			c.ResourceName, c.ResourcePatternType = strings.TrimSuffix(f[1], "*"), kmsg.ACLResourcePatternTypePrefixed
		}
		c.Principal, c.Host = principal, "*"
		op, err := kmsg.ParseACLOperation(f[2])
		if err != nil {
			t.Fatal(err)
		}
		c.Operation, c.PermissionType = op, kmsg.ACLPermissionType(perm)
		req.Creations = append(req.Creations, c)
	}
	resp := rawAs[*kmsg.CreateACLsResponse](t, b, adminIP, req)
	for i, r := range resp.Results {
		if r.ErrorCode != 0 {
			t.Fatalf("creating %s: %v %v", specs[i], kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
		}
	}
}

// mirrorGapProduce is a forged mirror produce: a batch at offset 100 into
// an empty partition, as writer epoch we.
func mirrorGapProduce(t *testing.T, b *testBroker, from string, topic string) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := mirrorProduce(11, topic, 0, data(100, 1, 2).encode(t), 0, -1)
	return rawAs[*kmsg.ProduceResponse](t, b, from, req).Topics[0].Partitions[0]
}

func mirrorForward(t *testing.T, b *testBroker, from, topic string, offset int64) kmsg.DeleteRecordsResponseTopicPartition {
	t.Helper()
	req := timedDelete(topic, offset, 10000)
	req.UnknownTags.Set(wireext.MirrorTag, writerTagID(testWriterEpoch, writerID{}))
	return rawAs[*kmsg.DeleteRecordsResponse](t, b, from, req).Topics[0].Partitions[0]
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	if got != want.Code {
		t.Fatalf("%s: got %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

// TestAttackForgedMirrorProduce: a mirror produce (writing at offsets of
// the sender's choosing, with gaps) needs WRITE on the topic and
// CLUSTER_ACTION on CLUSTER. WRITE alone, ALL on the topic, ALL on a
// prefix and allow.everyone.if.no.acl.found do not grant it.
func TestAttackForgedMirrorProduce(t *testing.T) {
	b := startBroker(t, t.TempDir(), withACLs(func(c *Config) { c.AllowEveryoneIfNoACLFound = true }))
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push")})

	// No ACL on the topic: allow.everyone grants WRITE, never the mirror
	// permission.
	pr := mirrorGapProduce(t, b, malloryIP, "m")
	wantCode(t, "mirror produce under allow.everyone", pr.ErrorCode, kerr.ClusterAuthorizationFailed)
	if m := strPtr(pr.ErrorMessage); !strings.Contains(m, "CLUSTER_ACTION") || !strings.Contains(m, mallory) {
		t.Fatalf("refusal does not name the missing ACL: %q", m)
	}
	grant(t, b, mallory, authz.PermAllow, "TOPIC:m:WRITE", "TOPIC:m:ALL", "TOPIC:*:ALL")
	pr = mirrorGapProduce(t, b, malloryIP, "m")
	wantCode(t, "mirror produce with WRITE and ALL on the topic", pr.ErrorCode, kerr.ClusterAuthorizationFailed)
	if got := listOffsetT(t, b, "m", 0, -1); got != 0 {
		t.Fatalf("log end %d after refused produces", got)
	}
	// An ALLOW on another cluster operation does not help either.
	grant(t, b, mallory, authz.PermAllow, "CLUSTER:kafka-cluster:ALTER")
	wantCode(t, "mirror produce with ALTER on CLUSTER", mirrorGapProduce(t, b, malloryIP, "m").ErrorCode, kerr.ClusterAuthorizationFailed)

	grant(t, b, mallory, authz.PermAllow, "CLUSTER:kafka-cluster:CLUSTER_ACTION")
	wantCode(t, "mirror produce with the mirror permission", mirrorGapProduce(t, b, malloryIP, "m").ErrorCode, errNone)
	if got := listOffsetT(t, b, "m", 0, -1); got != 102 {
		t.Fatalf("log end %d, want 102", got)
	}
}

// TestAttackForgedMirrorProduceNeedsTopicWrite: CLUSTER_ACTION alone does
// not write a topic: the per-topic WRITE is still checked.
func TestAttackForgedMirrorProduceNeedsTopicWrite(t *testing.T) {
	b := startBroker(t, t.TempDir(), withACLs(nil))
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push")})
	grant(t, b, mallory, authz.PermAllow, "CLUSTER:kafka-cluster:CLUSTER_ACTION", "TOPIC:other:WRITE")
	wantCode(t, "mirror produce without WRITE", mirrorGapProduce(t, b, malloryIP, "m").ErrorCode, kerr.TopicAuthorizationFailed)
	// A DENY wins over the ALLOW.
	grant(t, b, mallory, authz.PermAllow, "TOPIC:m:WRITE")
	grant(t, b, mallory, authz.PermDeny, "CLUSTER:kafka-cluster:CLUSTER_ACTION")
	wantCode(t, "mirror produce with CLUSTER_ACTION denied", mirrorGapProduce(t, b, malloryIP, "m").ErrorCode, kerr.ClusterAuthorizationFailed)
}

// TestAttackForgedMirrorForward: the log-start forward (and the writer
// registration, a forward to 0) needs the mirror permission.
func TestAttackForgedMirrorForward(t *testing.T) {
	b := startBroker(t, t.TempDir(), withACLs(nil))
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push")})
	if pr := mirrorOne(t, b, "m", data(0, 1, 10).encode(t), 0, -1); pr.ErrorCode != 0 {
		t.Fatalf("admin mirror produce: %v", kerr.ErrorForCode(pr.ErrorCode))
	}
	grant(t, b, mallory, authz.PermAllow, "TOPIC:m:ALL")
	wantCode(t, "registration", mirrorForward(t, b, malloryIP, "m", 0).ErrorCode, kerr.ClusterAuthorizationFailed)
	wantCode(t, "forward", mirrorForward(t, b, malloryIP, "m", 5).ErrorCode, kerr.ClusterAuthorizationFailed)
	if got := listOffsetT(t, b, "m", 0, -2); got != 0 {
		t.Fatalf("log start %d after refused forwards", got)
	}
	grant(t, b, mallory, authz.PermAllow, "CLUSTER:kafka-cluster:CLUSTER_ACTION")
	wantCode(t, "forward with the mirror permission", mirrorForward(t, b, malloryIP, "m", 5).ErrorCode, errNone)
	if got := listOffsetT(t, b, "m", 0, -2); got != 5 {
		t.Fatalf("log start %d, want 5", got)
	}
}

// iacRequest is an IncrementalAlterConfigs of topic.
func iacRequest(topic string, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) *kmsg.IncrementalAlterConfigsRequest {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Version = 1
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.Configs = kmsg.ConfigResourceTypeTopic, topic, ops
	req.Resources = append(req.Resources, rr)
	return req
}

// TestAttackMirrorLifecycle: stopping someone's mirror (the DELETE of
// mirror.mode that `verbatim mirror stop` sends), stripping its
// policies, adding partitions to it and deleting it need the topic
// operation and CLUSTER_ACTION or ALTER on CLUSTER.
func TestAttackMirrorLifecycle(t *testing.T) {
	b := startBroker(t, t.TempDir(), withACLs(nil))
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push")})
	stop := iacRequest("m", iacDelete("mirror.mode"))
	strip := iacRequest("m", iacSet("mirror.policies", ""))
	addParts := func() int16 {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.Version, req.TimeoutMillis = 3, 10000
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = "m", 3
		req.Topics = append(req.Topics, rt)
		return rawAs[*kmsg.CreatePartitionsResponse](t, b, malloryIP, req).Topics[0].ErrorCode
	}
	del := func() kmsg.DeleteTopicsResponseTopic {
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.Version, req.TimeoutMillis = 6, 10000
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = sp("m")
		req.Topics = append(req.Topics, rt)
		return rawAs[*kmsg.DeleteTopicsResponse](t, b, malloryIP, req).Topics[0]
	}
	alter := func(req *kmsg.IncrementalAlterConfigsRequest) kmsg.IncrementalAlterConfigsResponseResource {
		return rawAs[*kmsg.IncrementalAlterConfigsResponse](t, b, malloryIP, req).Resources[0]
	}

	// Nothing granted: the topic operations are missing.
	wantCode(t, "stop", alter(stop).ErrorCode, kerr.TopicAuthorizationFailed)
	wantCode(t, "strip policies", alter(strip).ErrorCode, kerr.TopicAuthorizationFailed)
	wantCode(t, "add partitions", addParts(), kerr.TopicAuthorizationFailed)
	wantCode(t, "delete", del().ErrorCode, kerr.TopicAuthorizationFailed)

	// Everything on the topic: still not the mirror's owner.
	grant(t, b, mallory, authz.PermAllow, "TOPIC:m*:ALL")
	r := alter(stop)
	wantCode(t, "stop with ALL on the topic", r.ErrorCode, kerr.ClusterAuthorizationFailed)
	if m := strPtr(r.ErrorMessage); !strings.Contains(m, "CLUSTER_ACTION or ALTER") {
		t.Fatalf("refusal does not name the missing ACL: %q", m)
	}
	wantCode(t, "strip policies with ALL on the topic", alter(strip).ErrorCode, kerr.ClusterAuthorizationFailed)
	wantCode(t, "add partitions with ALL on the topic", addParts(), kerr.ClusterAuthorizationFailed)
	wantCode(t, "delete with ALL on the topic", del().ErrorCode, kerr.ClusterAuthorizationFailed)
	if cfg := b.srv.cluster.topic("m"); cfg == nil || !cfg.Config().MirrorPush || len(cfg.Partitions()) != 1 {
		t.Fatal("the mirror topic changed under refused requests")
	}

	// ALTER on CLUSTER is the lifecycle permission: the stop works.
	grant(t, b, mallory, authz.PermAllow, "CLUSTER:kafka-cluster:ALTER")
	wantCode(t, "stop with ALTER on CLUSTER", alter(stop).ErrorCode, errNone)
	if b.srv.cluster.topic("m").Config().MirrorPush {
		t.Fatal("mirror.mode still set after the stop")
	}
}

// TestAttackMirrorDeleteWithClusterAction: CLUSTER_ACTION is the mirror
// lifecycle permission too; deleting needs DELETE on the topic besides.
func TestAttackMirrorDeleteWithClusterAction(t *testing.T) {
	b := startBroker(t, t.TempDir(), withACLs(nil))
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push")})
	grant(t, b, mallory, authz.PermAllow, "CLUSTER:kafka-cluster:CLUSTER_ACTION", "TOPIC:m:DELETE")
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version, req.TimeoutMillis, req.TopicNames = 5, 10000, []string{"m"}
	wantCode(t, "delete", rawAs[*kmsg.DeleteTopicsResponse](t, b, malloryIP, req).Topics[0].ErrorCode, errNone)
}

// TestAttackCreateMirrorTopic: creating a mirror topic needs CREATE and
// the mirror permission.
func TestAttackCreateMirrorTopic(t *testing.T) {
	b := startBroker(t, t.TempDir(), withACLs(nil))
	create := func(name string, mirror bool) kmsg.CreateTopicsResponseTopic {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version, req.TimeoutMillis = 7, 10000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
		if mirror {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = "mirror.mode", sp("push")
			rt.Configs = append(rt.Configs, c)
		}
		req.Topics = append(req.Topics, rt)
		return rawAs[*kmsg.CreateTopicsResponse](t, b, malloryIP, req).Topics[0]
	}
	wantCode(t, "create without CREATE", create("plain", false).ErrorCode, kerr.TopicAuthorizationFailed)
	grant(t, b, mallory, authz.PermAllow, "TOPIC:*:CREATE")
	st := create("plain", false)
	wantCode(t, "create with CREATE", st.ErrorCode, errNone)
	// Created, but DESCRIBE_CONFIGS is missing: no configs in the answer.
	if st.ConfigErrorCode != kerr.TopicAuthorizationFailed.Code || len(st.Configs) != 0 || st.NumPartitions != -1 {
		t.Fatalf("configs of a topic the principal may not describe: %v %d %d", kerr.ErrorForCode(st.ConfigErrorCode), len(st.Configs), st.NumPartitions)
	}
	wantCode(t, "create mirror with CREATE", create("m", true).ErrorCode, kerr.ClusterAuthorizationFailed)
	if b.srv.cluster.topic("m") != nil {
		t.Fatal("mirror topic created")
	}
	grant(t, b, mallory, authz.PermAllow, "CLUSTER:kafka-cluster:CLUSTER_ACTION")
	wantCode(t, "create mirror with the mirror permission", create("m", true).ErrorCode, errNone)
}

// errNone is the success code, for wantCode.
var errNone = &kerr.Error{Message: "NONE", Code: 0}
