package broker

import (
	"bytes"
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/authz"
)

// FuzzAclRequests feeds arbitrary CreateAcls / DescribeAcls / DeleteAcls
// bodies (the first byte picks the API, the second the version) through
// kmsg's decoder, the handlers' conversion and the ACL store: nothing
// panics, every stored ACL is valid, the index agrees with the set, and
// the persisted file is the set (it loads back to the same bytes).
func FuzzAclRequests(f *testing.F) {
	keys := []int16{kmsg.CreateACLs.Int16(), kmsg.DescribeACLs.Int16(), kmsg.DeleteACLs.Int16()}
	for _, req := range aclSeedRequests() {
		for i, k := range keys {
			if k == req.Key() {
				f.Add(append([]byte{byte(i), byte(req.GetVersion() - 1)}, req.AppendTo(nil)...))
			}
		}
	}
	cfg := quietConfig(f.TempDir())
	cfg.Authorizer = true
	s, err := Open(cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		key := keys[int(data[0])%len(keys)]
		req := kmsg.RequestForKey(key)
		req.SetVersion(int16(1 + int(data[1])%3))
		if err := req.ReadFrom(data[2:]); err != nil {
			return
		}
		r := &Request{Key: key, Version: req.GetVersion(), Msg: req, Principal: AnonymousPrincipal, Host: "127.0.0.1"}
		h := registry[key].handler
		reply, err := h(context.Background(), s, r)
		if err != nil {
			t.Fatalf("handler error: %v", err)
		}
		_ = reply.AppendTo(nil)
		checkACLStore(t, s)
	})
}

// checkACLStore checks the authorizer's invariants.
func checkACLStore(t *testing.T, s *Server) {
	t.Helper()
	all := s.acl.Describe(authz.Filter{ResourceType: authz.ResourceAny, Pattern: authz.PatternAny, Operation: authz.OpAny, Permission: authz.PermAny})
	if len(all) != s.acl.Len() {
		t.Fatalf("describe-all finds %d of %d ACLs", len(all), s.acl.Len())
	}
	for _, b := range all {
		if err := b.Validate(); err != nil {
			t.Fatalf("stored ACL %s is invalid: %v", b, err)
		}
		// The index finds every stored ALLOW for its own principal.
		if b.Permission == authz.PermAllow && b.Host == "*" && b.Operation != authz.OpAll {
			name := b.Name
			if b.ResourceType != authz.ResourceCluster && b.Pattern == authz.PatternPrefixed {
				name += "x"
			}
			denied := len(s.acl.Describe(authz.Filter{ResourceType: b.ResourceType, Name: &name, Pattern: authz.PatternMatch,
				Principal: &b.Principal, Operation: b.Operation, Permission: authz.PermDeny})) > 0 ||
				len(s.acl.Describe(authz.Filter{ResourceType: b.ResourceType, Name: &name, Pattern: authz.PatternMatch,
					Principal: &b.Principal, Operation: authz.OpAll, Permission: authz.PermDeny})) > 0 ||
				b.Principal != authz.WildcardPrincipal && len(s.acl.Describe(authz.Filter{ResourceType: b.ResourceType, Name: &name, Pattern: authz.PatternMatch,
					Principal: sp(authz.WildcardPrincipal), Operation: authz.OpAny, Permission: authz.PermDeny})) > 0
			if !denied && !s.acl.Authorize(b.Principal, "10.1.1.1", b.Operation, b.ResourceType, name, false) {
				t.Fatalf("%s does not grant %s on %q", b, b.Operation, name)
			}
		}
	}
	data, err := readFile(s.fs, aclFile)
	if err != nil && s.acl.Len() > 0 {
		t.Fatalf("ACL file: %v", err)
	}
	if err == nil {
		re := authz.New(authz.Config{})
		if err := re.Load(data); err != nil {
			t.Fatalf("persisted ACLs do not load: %v", err)
		}
		if !bytes.Equal(re.Marshal(), s.acl.Marshal()) {
			t.Fatal("persisted ACLs differ from the set in memory")
		}
	}
}

// aclSeedRequests are valid ACL requests of every served version.
func aclSeedRequests() []kmsg.Request {
	var out []kmsg.Request
	for v := int16(1); v <= 3; v++ {
		c := kmsg.NewPtrCreateACLsRequest()
		c.Version = v
		c.Creations = []kmsg.CreateACLsRequestCreation{
			{ResourceType: 2, ResourceName: "t", ResourcePatternType: 3, Principal: "User:a", Host: "*", Operation: 3, PermissionType: 3},
			{ResourceType: 2, ResourceName: "p-", ResourcePatternType: 4, Principal: "User:*", Host: "10.0.0.1", Operation: 2, PermissionType: 2},
			{ResourceType: 4, ResourceName: "kafka-cluster", ResourcePatternType: 3, Principal: "User:m", Host: "*", Operation: 9, PermissionType: 3},
		}
		d := kmsg.NewPtrDescribeACLsRequest()
		d.Version, d.ResourceType, d.ResourceName, d.ResourcePatternType, d.Operation, d.PermissionType = v, 2, sp("p-x"), 2, 1, 1
		x := kmsg.NewPtrDeleteACLsRequest()
		x.Version = v
		x.Filters = []kmsg.DeleteACLsRequestFilter{{ResourceType: 1, ResourcePatternType: 1, Principal: sp("User:a"), Operation: 1, PermissionType: 1}}
		out = append(out, c, d, x)
	}
	return out
}
