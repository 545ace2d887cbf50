package broker

import (
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/authz"
	"github.com/verbatim-kafka/verbatim/storage"
)

// TestAttackGroups: committing to and deleting someone's group need READ
// and DELETE on it (and READ on the topic for the commit).
func TestAttackGroups(t *testing.T) {
	b := startBroker(t, t.TempDir(), withACLs(nil))
	createTopic(t, b, "t", 1, nil)
	commit := func(from string) int16 {
		return rawAs[*kmsg.OffsetCommitResponse](t, b, from, offsetCommitReq("g", "t", 42)).Topics[0].Partitions[0].ErrorCode
	}
	deleteGroup := func(from string) int16 {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Version, req.Groups = 2, []string{"g"}
		return rawAs[*kmsg.DeleteGroupsResponse](t, b, from, req).Groups[0].ErrorCode
	}
	wantCode(t, "admin commit", commit(adminIP), errNone)
	wantCode(t, "commit", commit(malloryIP), kerr.GroupAuthorizationFailed)
	wantCode(t, "delete group", deleteGroup(malloryIP), kerr.GroupAuthorizationFailed)
	grant(t, b, mallory, authz.PermAllow, "GROUP:g:READ")
	wantCode(t, "commit without READ on the topic", commit(malloryIP), kerr.TopicAuthorizationFailed)
	grant(t, b, mallory, authz.PermAllow, "TOPIC:t:READ")
	wantCode(t, "commit with READ on group and topic", commit(malloryIP), errNone)
	wantCode(t, "delete group with READ", deleteGroup(malloryIP), kerr.GroupAuthorizationFailed)

	// Others' groups stay invisible: ListGroups lists only what the
	// principal may describe.
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 8, "secret", -1
	rawAs[*kmsg.OffsetCommitResponse](t, b, adminIP, req)
	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version = 4
	groups := rawAs[*kmsg.ListGroupsResponse](t, b, malloryIP, lg).Groups
	if len(groups) != 1 || groups[0].Group != "g" {
		t.Fatalf("mallory lists %v, want only g", groups)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups, dg.IncludeAuthorizedOperations = 5, []string{"g", "secret"}, true
	dr := rawAs[*kmsg.DescribeGroupsResponse](t, b, malloryIP, dg)
	// READ implies DESCRIBE: bits READ (3) and DESCRIBE (8).
	if dr.Groups[0].ErrorCode != 0 || dr.Groups[0].AuthorizedOperations != 1<<3|1<<8 {
		t.Fatalf("describe g: %v ops %b", kerr.ErrorForCode(dr.Groups[0].ErrorCode), dr.Groups[0].AuthorizedOperations)
	}
	wantCode(t, "describe secret", dr.Groups[1].ErrorCode, kerr.GroupAuthorizationFailed)

	grant(t, b, mallory, authz.PermAllow, "GROUP:g:DELETE")
	wantCode(t, "delete group with DELETE", deleteGroup(malloryIP), errNone)
}

// TestAttackReadEveryTopic: without ACLs a principal sees no topic in
// Metadata and reads none; a prefixed READ opens exactly those topics.
func TestAttackReadEveryTopic(t *testing.T) {
	b := startBroker(t, t.TempDir(), withACLs(nil))
	for _, n := range []string{"pay-1", "pay-2", "hr"} {
		createTopic(t, b, n, 1, nil)
		produceOne(t, b, 9, n, 0, encodeBatch(t, 0, -1, -1, []byte("secret")))
	}
	md := func(topics ...string) *kmsg.MetadataResponse {
		req := kmsg.NewPtrMetadataRequest()
		req.Version, req.IncludeTopicAuthorizedOperations = 12, true
		if topics != nil {
			for _, n := range topics {
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = sp(n)
				req.Topics = append(req.Topics, rt)
			}
		} else {
			req.Topics = nil
		}
		return rawAs[*kmsg.MetadataResponse](t, b, malloryIP, req)
	}
	fetch := func(topic string) int16 {
		return rawAs[*kmsg.FetchResponse](t, b, malloryIP, fetchReq(12, topic, 0, 0)).Topics[0].Partitions[0].ErrorCode
	}
	if got := md().Topics; len(got) != 0 {
		t.Fatalf("mallory sees %d topics", len(got))
	}
	wantCode(t, "metadata hr", md("hr").Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)
	wantCode(t, "metadata of a missing topic", md("nope").Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)
	wantCode(t, "fetch hr", fetch("hr"), kerr.TopicAuthorizationFailed)
	wantCode(t, "list offsets hr", listOffsetsPartAs(t, b, malloryIP, "hr").ErrorCode, kerr.TopicAuthorizationFailed)

	grant(t, b, mallory, authz.PermAllow, "TOPIC:pay-*:READ")
	all := md().Topics
	if len(all) != 2 || *all[0].Topic != "pay-1" || *all[1].Topic != "pay-2" {
		t.Fatalf("mallory sees %d topics, want pay-1 and pay-2", len(all))
	}
	// READ implies DESCRIBE: bits READ (3) and DESCRIBE (8).
	if ops := all[0].AuthorizedOperations; ops != 1<<3|1<<8 {
		t.Fatalf("authorized operations %b", ops)
	}
	wantCode(t, "fetch pay-1", fetch("pay-1"), errNone)
	wantCode(t, "fetch hr", fetch("hr"), kerr.TopicAuthorizationFailed)
	// A DENY for one of them wins over the prefixed ALLOW.
	grant(t, b, mallory, authz.PermDeny, "TOPIC:pay-2:READ")
	wantCode(t, "fetch pay-2 denied", fetch("pay-2"), kerr.TopicAuthorizationFailed)
	// A follower fetch needs CLUSTER_ACTION.
	f := fetchReq(12, "pay-1", 0, 0)
	f.ReplicaID = 2
	wantCode(t, "follower fetch", rawAs[*kmsg.FetchResponse](t, b, malloryIP, f).Topics[0].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)
}

func listOffsetsPartAs(t *testing.T, b *testBroker, from, topic string) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 7
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return rawAs[*kmsg.ListOffsetsResponse](t, b, from, req).Topics[0].Partitions[0]
}

// TestProduceAuthorization: WRITE on the topic; a transactional produce
// WRITE on its transactional id; InitProducerId of an idempotent producer
// IDEMPOTENT_WRITE on CLUSTER or WRITE on some topic.
func TestProduceAuthorization(t *testing.T) {
	b := startBroker(t, t.TempDir(), withACLs(nil))
	createTopic(t, b, "t", 1, nil)
	produce := func(set []byte, txn *string) int16 {
		req := produceRequest(9, "t", 0, set)
		req.TransactionID = txn
		return rawAs[*kmsg.ProduceResponse](t, b, malloryIP, req).Topics[0].Partitions[0].ErrorCode
	}
	plain := encodeBatch(t, 0, -1, -1, []byte("v"))
	wantCode(t, "produce", produce(plain, nil), kerr.TopicAuthorizationFailed)
	initPID := func(txn *string) int16 {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version, req.TransactionalID, req.TransactionTimeoutMillis = 4, txn, 60000
		return rawAs[*kmsg.InitProducerIDResponse](t, b, malloryIP, req).ErrorCode
	}
	wantCode(t, "idempotent InitProducerId", initPID(nil), kerr.ClusterAuthorizationFailed)
	wantCode(t, "transactional InitProducerId", initPID(sp("tx")), kerr.TransactionalIDAuthorizationFailed)
	grant(t, b, mallory, authz.PermAllow, "TOPIC:t:WRITE")
	wantCode(t, "produce with WRITE", produce(plain, nil), errNone)
	wantCode(t, "idempotent InitProducerId with WRITE on a topic", initPID(nil), errNone)
	txnSet := stopBatch(t, 0, 0, 7, 0, 1, true)
	wantCode(t, "transactional produce", produce(txnSet, sp("tx")), kerr.TransactionalIDAuthorizationFailed)
	wantCode(t, "transactional produce without id", produce(txnSet, nil), kerr.TransactionalIDAuthorizationFailed)
}

// TestAclAPIs: kafka-acls.sh's requests: refused without an authorizer
// (SECURITY_DISABLED) and without ALTER/DESCRIBE on CLUSTER; validation;
// filters; deletion answers the matching ACLs; the set survives a
// restart.
func TestAclAPIs(t *testing.T) {
	off := startBroker(t, t.TempDir(), nil)
	d := kmsg.NewPtrDescribeACLsRequest()
	d.Version, d.ResourceType, d.ResourcePatternType, d.Operation, d.PermissionType = 3, 1, 1, 1, 1
	wantCode(t, "describe without authorizer", rawRequest[*kmsg.DescribeACLsResponse](t, off, d).ErrorCode, kerr.SecurityDisabled)
	off.stop()

	dir := t.TempDir()
	b := startBroker(t, dir, withACLs(nil))
	wantCode(t, "describe as mallory", rawAs[*kmsg.DescribeACLsResponse](t, b, malloryIP, d).ErrorCode, kerr.ClusterAuthorizationFailed)
	grant(t, b, "User:alice", authz.PermAllow, "TOPIC:a:READ", "TOPIC:a*:WRITE", "GROUP:*:READ")
	grant(t, b, "User:alice", authz.PermDeny, "TOPIC:a:WRITE")

	bad := kmsg.NewPtrCreateACLsRequest()
	bad.Version = 3
	for _, c := range []kmsg.CreateACLsRequestCreation{
		{ResourceType: 2, ResourceName: "x", ResourcePatternType: 3, Principal: "User:a", Host: "*", Operation: 1, PermissionType: 3}, // ANY op
		{ResourceType: 1, ResourceName: "x", ResourcePatternType: 3, Principal: "User:a", Host: "*", Operation: 3, PermissionType: 3}, // ANY type
		{ResourceType: 2, ResourceName: "x", ResourcePatternType: 2, Principal: "User:a", Host: "*", Operation: 3, PermissionType: 3}, // MATCH
		{ResourceType: 4, ResourceName: "c", ResourcePatternType: 3, Principal: "User:a", Host: "*", Operation: 7, PermissionType: 3}, // cluster name
		{ResourceType: 2, ResourceName: "x", ResourcePatternType: 3, Principal: "alice", Host: "*", Operation: 3, PermissionType: 3},  // principal
		{ResourceType: 2, ResourceName: "ok", ResourcePatternType: 3, Principal: "User:a", Host: "10.0.0.1", Operation: 3, PermissionType: 3},
	} {
		bad.Creations = append(bad.Creations, c)
	}
	res := rawAs[*kmsg.CreateACLsResponse](t, b, adminIP, bad).Results
	for i := 0; i < 5; i++ {
		wantCode(t, "invalid creation", res[i].ErrorCode, kerr.InvalidRequest)
	}
	wantCode(t, "valid creation beside invalid ones", res[5].ErrorCode, errNone)

	// MATCH on topic "abc": literal "a" does not apply, prefixed "a" does.
	m := kmsg.NewPtrDescribeACLsRequest()
	m.Version, m.ResourceType, m.ResourceName, m.ResourcePatternType, m.Operation, m.PermissionType = 3, 2, sp("abc"), 2, 1, 1
	rs := rawAs[*kmsg.DescribeACLsResponse](t, b, adminIP, m).Resources
	if len(rs) != 1 || rs[0].ResourceName != "a" || rs[0].ResourcePatternType != kmsg.ACLResourcePatternTypePrefixed || len(rs[0].ACLs) != 1 {
		t.Fatalf("MATCH abc: %+v", rs)
	}
	b.stop()

	b = startBroker(t, dir, withACLs(nil))
	all := rawAs[*kmsg.DescribeACLsResponse](t, b, adminIP, d)
	n := 0
	for _, r := range all.Resources {
		n += len(r.ACLs)
	}
	if all.ErrorCode != 0 || n != 5 {
		t.Fatalf("after restart: %v, %d ACLs, want 5", kerr.ErrorForCode(all.ErrorCode), n)
	}
	del := kmsg.NewPtrDeleteACLsRequest()
	del.Version = 3
	del.Filters = []kmsg.DeleteACLsRequestFilter{
		{ResourceType: 2, ResourceName: sp("a"), ResourcePatternType: 1, Operation: 1, PermissionType: 1}, // both "a" patterns
		{ResourceType: 0, ResourcePatternType: 1, Operation: 1, PermissionType: 1},                        // UNKNOWN
	}
	dr := rawAs[*kmsg.DeleteACLsResponse](t, b, adminIP, del).Results
	if dr[0].ErrorCode != 0 || len(dr[0].MatchingACLs) != 3 {
		t.Fatalf("delete a: %v, %d matching", kerr.ErrorForCode(dr[0].ErrorCode), len(dr[0].MatchingACLs))
	}
	wantCode(t, "UNKNOWN filter", dr[1].ErrorCode, kerr.InvalidRequest)
	if got := b.srv.acl.Len(); got != 2 {
		t.Fatalf("%d ACLs left, want 2", got)
	}
}

// TestAllowEveryoneAndAutoCreate: allow.everyone.if.no.acl.found grants
// what no ACL is about (and stops granting once an ACL for someone else
// names the resource); Metadata's auto-creation needs CREATE; the
// cluster's authorized operations are the principal's.
func TestAllowEveryoneAndAutoCreate(t *testing.T) {
	b := startBroker(t, t.TempDir(), withACLs(func(c *Config) { c.AllowEveryoneIfNoACLFound = true; c.AutoCreateTopics = true }))
	createTopic(t, b, "open", 1, nil)
	produce := func(topic string) int16 {
		req := produceRequest(9, topic, 0, encodeBatch(t, 0, -1, -1, []byte("v")))
		return rawAs[*kmsg.ProduceResponse](t, b, malloryIP, req).Topics[0].Partitions[0].ErrorCode
	}
	wantCode(t, "produce to a topic without ACLs", produce("open"), errNone)
	grant(t, b, "User:alice", authz.PermAllow, "TOPIC:open:WRITE")
	wantCode(t, "produce once alice has an ACL on it", produce("open"), kerr.TopicAuthorizationFailed)

	grant(t, b, "User:alice", authz.PermAllow, "CLUSTER:kafka-cluster:DESCRIBE")
	md := kmsg.NewPtrMetadataRequest()
	md.Version, md.AllowAutoTopicCreation = 9, true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = sp("auto")
	md.Topics = append(md.Topics, rt)
	md.IncludeClusterAuthorizedOperations = true
	// DESCRIBE on "auto" comes from allow.everyone; CREATE too, since no
	// ACL names the topic: mallory may auto-create it.
	resp := rawAs[*kmsg.MetadataResponse](t, b, malloryIP, md)
	wantCode(t, "auto-create without ACLs", resp.Topics[0].ErrorCode, errNone)
	// The cluster has an ACL (alice's): mallory holds none of its
	// operations.
	if resp.AuthorizedOperations != 0 {
		t.Fatalf("cluster authorized operations %b, want none", resp.AuthorizedOperations)
	}
	grant(t, b, "User:alice", authz.PermAllow, "TOPIC:auto2:DESCRIBE")
	grant(t, b, mallory, authz.PermAllow, "TOPIC:auto2:DESCRIBE")
	*md.Topics[0].Topic = "auto2"
	wantCode(t, "auto-create with DESCRIBE only", rawAs[*kmsg.MetadataResponse](t, b, malloryIP, md).Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)
	if b.srv.cluster.topic("auto2") != nil {
		t.Fatal("auto2 was created")
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeClusterAuthorizedOperations = true
	if ops := rawAs[*kmsg.DescribeClusterResponse](t, b, malloryIP, dc).ClusterAuthorizedOperations; ops != 0 {
		t.Fatalf("DescribeCluster authorized operations %b, want none", ops)
	}
}

// TestAclPersistFailure: when acls.json cannot be written, CreateAcls and
// DeleteAcls answer KAFKA_STORAGE_ERROR and the ACLs in force do not
// change.
func TestAclPersistFailure(t *testing.T) {
	ffs := &faultFS{FS: storage.OSFS{}}
	b := startBroker(t, t.TempDir(), withACLs(func(c *Config) { c.FS = ffs }))
	grant(t, b, mallory, authz.PermAllow, "TOPIC:t:READ")
	ffs.set("acls.json", syscall.EIO)
	req := kmsg.NewPtrCreateACLsRequest()
	req.Version = 3
	req.Creations = []kmsg.CreateACLsRequestCreation{{ResourceType: 2, ResourceName: "u", ResourcePatternType: 3, Principal: mallory, Host: "*", Operation: 3, PermissionType: 3}}
	wantCode(t, "create while the file cannot be written", rawAs[*kmsg.CreateACLsResponse](t, b, adminIP, req).Results[0].ErrorCode, kerr.KafkaStorageError)
	del := kmsg.NewPtrDeleteACLsRequest()
	del.Version = 3
	del.Filters = []kmsg.DeleteACLsRequestFilter{{ResourceType: 1, ResourcePatternType: 1, Operation: 1, PermissionType: 1}}
	wantCode(t, "delete while the file cannot be written", rawAs[*kmsg.DeleteACLsResponse](t, b, adminIP, del).Results[0].ErrorCode, kerr.KafkaStorageError)
	if ffs.hits.Load() == 0 {
		t.Fatal("the ACL file was never written")
	}
	a := b.srv.Authorizer()
	if a.Len() != 1 || !a.Authorize(mallory, "h", authz.OpRead, authz.ResourceTopic, "t", false) || a.Authorize(mallory, "h", authz.OpRead, authz.ResourceTopic, "u", false) {
		t.Fatalf("the ACLs changed under failed writes: %d", a.Len())
	}
	ffs.set("", nil)
	b.stop()
	b = startBroker(t, b.dir, withACLs(nil))
	if n := b.srv.Authorizer().Len(); n != 1 {
		t.Fatalf("%d ACLs after restart, want 1", n)
	}
}
