package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/verbatim-kafka/verbatim/authn"
	"github.com/verbatim-kafka/verbatim/authz"
	"github.com/verbatim-kafka/verbatim/clustermeta"
	"github.com/verbatim-kafka/verbatim/clustermeta/memstore"
)

// Cluster mode's ACLs and SCRAM credentials live in the cluster store
// (cluster_security.go): these run brokers over one memstore.

func startSecureCluster(t *testing.T, n int, l *Listener, mod func(*Config)) *testCluster {
	t.Helper()
	tc := &testCluster{t: t, store: memstore.New(), brokers: map[int32]*testBroker{}, dirs: map[int32]string{}, modCfg: mod, listener: l}
	for id := int32(1); id <= int32(n); id++ {
		tc.start(id)
	}
	tc.awaitAll(func(s *clustermeta.Snapshot) bool { return len(s.Brokers) == n })
	return tc
}

// describeAclsAs is mallory's (or the admin's) DescribeAcls of every ACL.
func describeAclsAs(t *testing.T, b *testBroker, from string) *kmsg.DescribeACLsResponse {
	t.Helper()
	d := kmsg.NewPtrDescribeACLsRequest()
	d.Version, d.ResourceType, d.ResourcePatternType, d.Operation, d.PermissionType = 3, 1, 1, 1, 1
	return rawAs[*kmsg.DescribeACLsResponse](t, b, from, d)
}

func aclCount(r *kmsg.DescribeACLsResponse) int {
	n := 0
	for _, res := range r.Resources {
		n += len(res.ACLs)
	}
	return n
}

func noLocalFile(t *testing.T, dir, name string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, metaDirName, name)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s/%s in a cluster broker's data dir: %v", metaDirName, name, err)
	}
}

// TestClusterACLsCreatedOnOneEnforcedOnAnother: CreateAcls on broker 1
// answers once broker 1 enforces the ACL and broker 2 enforces it once
// its snapshot has it; DeleteAcls on broker 2 likewise; a restarted
// broker has the set from the store; no broker keeps an ACL file.
func TestClusterACLsCreatedOnOneEnforcedOnAnother(t *testing.T) {
	tc := startSecureCluster(t, 2, nil, withACLs(nil))
	one, two := tc.brokers[1], tc.brokers[2]
	for id, b := range tc.brokers {
		wantCode(t, fmt.Sprintf("mallory's DescribeAcls on broker %d before the grant", id), describeAclsAs(t, b, malloryIP).ErrorCode, kerr.ClusterAuthorizationFailed)
	}

	grant(t, one, mallory, authz.PermAllow, "CLUSTER:kafka-cluster:DESCRIBE", "TOPIC:logs*:READ")
	// Enforced on broker 1 as soon as CreateAcls answered.
	if r := describeAclsAs(t, one, malloryIP); r.ErrorCode != 0 || aclCount(r) != 2 {
		t.Fatalf("mallory's DescribeAcls on broker 1 right after the grant: %v, %d ACLs", kerr.ErrorForCode(r.ErrorCode), aclCount(r))
	}
	tc.awaitCurrent()
	if r := describeAclsAs(t, two, malloryIP); r.ErrorCode != 0 || aclCount(r) != 2 {
		t.Fatalf("mallory's DescribeAcls on broker 2: %v, %d ACLs", kerr.ErrorForCode(r.ErrorCode), aclCount(r))
	}
	if !two.srv.acl.Authorize(mallory, malloryIP, authz.OpRead, authz.ResourceTopic, "logs-eu", true) {
		t.Fatal("broker 2 does not grant the prefixed READ")
	}
	snap, _ := tc.store.Snapshot(ctxT(t))
	if n := len(snap.Records[aclKind]); n != 2 {
		t.Fatalf("%d ACL records in the store, want 2", n)
	}

	// Granting it again (through broker 2) is a success that adds nothing.
	grant(t, two, mallory, authz.PermAllow, "TOPIC:logs*:READ")
	if n := two.srv.acl.Len(); n != 2 {
		t.Fatalf("broker 2 holds %d ACLs after a repeated grant", n)
	}

	// DeleteAcls on broker 2, of an ACL broker 2 has not necessarily
	// applied yet: the filter matches the store's set.
	grant(t, one, mallory, authz.PermAllow, "GROUP:g:READ")
	del := kmsg.NewPtrDeleteACLsRequest()
	del.Version = 3
	del.Filters = []kmsg.DeleteACLsRequestFilter{
		{ResourceType: 2, ResourcePatternType: 1, Operation: 1, PermissionType: 1}, // every TOPIC ACL
		{ResourceType: 3, ResourcePatternType: 1, Operation: 1, PermissionType: 1}, // every GROUP ACL
	}
	dr := rawAs[*kmsg.DeleteACLsResponse](t, two, adminIP, del).Results
	if dr[0].ErrorCode != 0 || len(dr[0].MatchingACLs) != 1 || dr[0].MatchingACLs[0].ResourceName != "logs" ||
		dr[1].ErrorCode != 0 || len(dr[1].MatchingACLs) != 1 || dr[1].MatchingACLs[0].ResourceName != "g" {
		t.Fatalf("DeleteAcls on broker 2: %+v", dr)
	}
	if two.srv.acl.Authorize(mallory, malloryIP, authz.OpRead, authz.ResourceTopic, "logs-eu", true) {
		t.Fatal("broker 2 still grants a deleted ACL after DeleteAcls answered")
	}
	// Deleting again matches nothing.
	if dr := rawAs[*kmsg.DeleteACLsResponse](t, one, adminIP, del).Results; len(dr[0].MatchingACLs)+len(dr[1].MatchingACLs) != 0 {
		t.Fatalf("a second DeleteAcls matched %+v", dr)
	}
	tc.awaitCurrent()
	if one.srv.acl.Authorize(mallory, malloryIP, authz.OpRead, authz.ResourceTopic, "logs-eu", true) || one.srv.acl.Len() != 1 {
		t.Fatalf("broker 1 after the deletion: %d ACLs", one.srv.acl.Len())
	}

	// A restarted broker has the store's set from Open on.
	tc.stop(2)
	two = tc.start(2)
	if r := describeAclsAs(t, two, malloryIP); r.ErrorCode != 0 || aclCount(r) != 1 {
		t.Fatalf("mallory's DescribeAcls on the restarted broker 2: %v, %d ACLs", kerr.ErrorForCode(r.ErrorCode), aclCount(r))
	}
	for id := range tc.brokers {
		noLocalFile(t, tc.dirs[id], "acls.json")
	}
}

// TestClusterConcurrentCreateAclsKeepsBoth: two brokers creating ACLs at
// the same time both keep theirs (no lost update), on every broker.
func TestClusterConcurrentCreateAclsKeepsBoth(t *testing.T) {
	tc := startSecureCluster(t, 2, nil, withACLs(nil))
	const perBroker = 12
	var wg sync.WaitGroup
	errs := make(chan error, 2*perBroker)
	for id, b := range tc.brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perBroker; i++ {
				req := kmsg.NewPtrCreateACLsRequest()
				req.Version = 3
				c := kmsg.NewCreateACLsRequestCreation()
				c.ResourceType, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral
				c.ResourceName = fmt.Sprintf("t%d", i)
				c.Principal, c.Host = fmt.Sprintf("User:u%d", id), "*"
				c.Operation, c.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
				req.Creations = append(req.Creations, c)
				resp, err := rawRoundTripFrom(b.addr, adminIP, req)
				if err != nil {
					errs <- err
					continue
				}
				if r := resp.(*kmsg.CreateACLsResponse).Results; len(r) != 1 || r[0].ErrorCode != 0 {
					errs <- fmt.Errorf("broker %d creation %d: %+v", id, i, r)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	tc.awaitCurrent()
	for id, b := range tc.brokers {
		if n := b.srv.acl.Len(); n != 2*perBroker {
			t.Fatalf("broker %d holds %d ACLs, want %d", id, n, 2*perBroker)
		}
		for u := 1; u <= 2; u++ {
			if !b.srv.acl.Authorize(fmt.Sprintf("User:u%d", u), "10.0.0.9", authz.OpRead, authz.ResourceTopic, "t11", false) {
				t.Fatalf("broker %d lost User:u%d's ACL", id, u)
			}
		}
	}
}

// TestClusterSCRAMCredentialOnOneAuthenticatesOnAnother: a credential
// AlterUserScramCredentials creates through broker 1 authenticates on
// broker 1 as soon as the call answered and on broker 2 once its snapshot
// has it; a deletion through broker 2 likewise; no broker keeps a
// credential file; a restarted broker authenticates from the store.
func TestClusterSCRAMCredentialOnOneAuthenticatesOnAnother(t *testing.T) {
	zero := time.Duration(0)
	tc := startSecureCluster(t, 2, &Listener{Name: "SASL_PLAINTEXT", Protocol: ProtocolSASLPlaintext}, func(cfg *Config) {
		cfg.SASL = map[string]*SASLListenerConfig{"SASL_PLAINTEXT": {
			Mechanisms: []string{authn.PLAIN, authn.SCRAMSHA256, authn.SCRAMSHA512},
			PlainUsers: map[string]string{testPlainUser: testPlainPass},
		}}
		cfg.FailedAuthenticationDelay = &zero
	})
	one, two := tc.brokers[1], tc.brokers[2]
	carol := scram.Auth{User: "carol", Pass: "carol-256"}.AsSha256Mechanism()
	// pingAs authenticates on b alone (a fresh client knows only its
	// seed).
	pingAs := func(b *testBroker) error {
		cl := b.saslClient(carol, kgo.SeedBrokers(b.addr))
		defer cl.Close()
		return cl.Ping(ctxT(t))
	}
	if err := pingAs(two); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("carol before her credential exists: %v", err)
	}

	addScramUser(t, kadm.NewClient(one.saslClient(plainMech(testPlainUser, testPlainPass))), "carol", "carol-256", kadm.ScramSha256)
	if err := pingAs(one); err != nil {
		t.Fatalf("carol on broker 1 right after AlterUserScramCredentials: %v", err)
	}
	tc.awaitCurrent()
	if err := pingAs(two); err != nil {
		t.Fatalf("carol on broker 2: %v", err)
	}
	adm2 := kadm.NewClient(two.saslClient(plainMech(testPlainUser, testPlainPass), kgo.SeedBrokers(two.addr)))
	described, err := adm2.DescribeUserSCRAMs(ctxT(t), "carol")
	if err != nil || described["carol"].Err != nil || len(described["carol"].CredInfos) != 1 {
		t.Fatalf("DescribeUserScramCredentials on broker 2: %v %+v", err, described)
	}

	// Deleted through broker 2: refused there at once, on broker 1 once
	// it applied the deletion; deleting again is RESOURCE_NOT_FOUND.
	del := func() kadm.AlteredUserSCRAMs {
		res, err := adm2.AlterUserSCRAMs(ctxT(t), []kadm.DeleteSCRAM{{User: "carol", Mechanism: kadm.ScramSha256}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if r := del()["carol"]; r.Err != nil {
		t.Fatalf("deleting carol's credential: %v", r.Err)
	}
	if err := pingAs(two); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("carol on broker 2 after the deletion: %v", err)
	}
	if r := del()["carol"]; !errors.Is(r.Err, kerr.ResourceNotFound) {
		t.Fatalf("deleting a deleted credential: %v", r.Err)
	}
	tc.awaitCurrent()
	if err := pingAs(one); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("carol on broker 1 after the deletion: %v", err)
	}

	// A restarted broker authenticates from the store at once.
	addScramUser(t, adm2, "dave", "dave-512", kadm.ScramSha512)
	tc.stop(1)
	one = tc.start(1)
	dave := one.saslClient(scram.Auth{User: "dave", Pass: "dave-512"}.AsSha512Mechanism(), kgo.SeedBrokers(one.addr))
	if err := dave.Ping(ctxT(t)); err != nil {
		t.Fatalf("dave on the restarted broker 1: %v", err)
	}
	dave.Close()
	for id := range tc.brokers {
		noLocalFile(t, tc.dirs[id], scramCredentialsFile)
	}
}

// TestClusterImportsFormattedSCRAM: the credentials `verbatim format
// --add-scram` wrote into a data dir reach the cluster at the broker's
// first start there (the cluster's own credential of a user wins), and
// only once: a credential deleted afterwards does not come back.
func TestClusterImportsFormattedSCRAM(t *testing.T) {
	dir := t.TempDir()
	store := memstore.New()
	entry := func(spec string) authn.ScramEntry {
		e, err := authn.ParseAddScram(spec)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	if err := Format(FormatOptions{DataDir: dir, NodeID: 1, ClusterID: store.ClusterID(), SCRAM: []authn.ScramEntry{
		entry("SCRAM-SHA-256=[name=admin,password=admin-secret]"),
		entry("SCRAM-SHA-512=[name=taken,password=local]"),
	}}); err != nil {
		t.Fatal(err)
	}
	tc := &testCluster{t: t, store: store, brokers: map[int32]*testBroker{}, dirs: map[int32]string{1: dir}}
	taken := entry("SCRAM-SHA-512=[name=taken,password=cluster]")
	if _, err := tc.store.PutRecord(ctxT(t), clustermeta.Fence{}, scramKind, authn.RecordName(taken.Mechanism.Name, "taken"), authn.EncodeRecord(taken.Credential), clustermeta.MustNotExist); err != nil {
		t.Fatal(err)
	}
	b := tc.start(1)
	if c, ok := b.srv.scram.Lookup("admin", authn.SCRAMSHA256); !ok || c.Iterations == 0 {
		t.Fatal("the formatted admin credential was not imported")
	}
	if c, _ := b.srv.scram.Lookup("taken", authn.SCRAMSHA512); string(c.StoredKey) != string(taken.Credential.StoredKey) {
		t.Fatal("the import replaced the cluster's credential")
	}
	noLocalFile(t, dir, scramCredentialsFile)
	snap, _ := tc.store.Snapshot(ctxT(t))
	r, ok := snap.Record(scramKind, authn.RecordName(authn.SCRAMSHA256, "admin"))
	if !ok {
		t.Fatal("no admin record in the store")
	}
	if _, err := tc.store.DeleteRecord(ctxT(t), clustermeta.Fence{}, scramKind, authn.RecordName(authn.SCRAMSHA256, "admin"), r.Version); err != nil {
		t.Fatal(err)
	}
	tc.stop(1)
	b = tc.start(1)
	if _, ok := b.srv.scram.Lookup("admin", authn.SCRAMSHA256); ok {
		t.Fatal("a deleted credential came back from the data dir at a restart")
	}
}
