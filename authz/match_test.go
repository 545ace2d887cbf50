package authz

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// refAuthorize is a brute-force statement of Kafka's StandardAuthorizer
// over a list of bindings, written independently of the index: every
// binding is looked at.
func refAuthorize(acls []Binding, super map[string]bool, allowEveryone bool, principal, host string, op Operation, rt ResourceType, name string, useNoACL bool) bool {
	if super[principal] {
		return true
	}
	applies := func(b Binding) bool {
		if b.ResourceType != rt {
			return false
		}
		if b.Pattern == PatternLiteral {
			return b.Name == name || b.Name == "*"
		}
		return len(name) >= len(b.Name) && name[:len(b.Name)] == b.Name
	}
	any := false
	for _, b := range acls {
		if !applies(b) {
			continue
		}
		any = true
		if b.Permission == PermDeny && (b.Principal == principal || b.Principal == "User:*") &&
			(b.Host == host || b.Host == "*") && (b.Operation == op || b.Operation == OpAll) {
			return false
		}
	}
	for _, b := range acls {
		if !applies(b) || b.Permission != PermAllow {
			continue
		}
		if b.Principal != principal && b.Principal != "User:*" || b.Host != host && b.Host != "*" {
			continue
		}
		grants := b.Operation == op || b.Operation == OpAll ||
			op == OpDescribe && (b.Operation == OpRead || b.Operation == OpWrite || b.Operation == OpDelete || b.Operation == OpAlter) ||
			op == OpDescribeConfigs && b.Operation == OpAlterConfigs
		if grants {
			return true
		}
	}
	return !any && useNoACL && allowEveryone
}

var (
	testNames      = []string{"a", "ab", "abc", "b", "*", "abd", "x-1"}
	testPrincipals = []string{"User:alice", "User:bob", "User:*"}
	testHosts      = []string{"*", "10.0.0.1", "10.0.0.2"}
	testOps        = []Operation{OpAll, OpRead, OpWrite, OpCreate, OpDelete, OpAlter, OpDescribe, OpClusterAction, OpDescribeConfigs, OpAlterConfigs, OpIdempotentWrite}
)

// randomBinding draws a binding from the small universe above, so that
// random sets collide and overlap.
func randomBinding(next func(int) int) Binding {
	b := Binding{
		ResourceType: []ResourceType{ResourceTopic, ResourceGroup, ResourceCluster}[next(3)],
		Name:         testNames[next(len(testNames))],
		Pattern:      []PatternType{PatternLiteral, PatternPrefixed}[next(2)],
		Principal:    testPrincipals[next(len(testPrincipals))],
		Host:         testHosts[next(len(testHosts))],
		Operation:    testOps[next(len(testOps))],
		Permission:   []Permission{PermAllow, PermDeny}[next(2)],
	}
	if b.ResourceType == ResourceCluster {
		b.Name, b.Pattern = ClusterName, PatternLiteral
	}
	if b.Pattern == PatternPrefixed && b.Name == "*" {
		b.Name = "a"
	}
	return b
}

// checkAgainstReference compares every query of the universe.
func checkAgainstReference(t *testing.T, a *Authorizer, acls []Binding, allowEveryone bool) {
	t.Helper()
	super := map[string]bool{}
	for _, rt := range []ResourceType{ResourceTopic, ResourceGroup, ResourceCluster} {
		names := append(append([]string{}, testNames...), "abcd", "", "zz")
		if rt == ResourceCluster {
			names = []string{ClusterName}
		}
		for _, n := range names {
			for _, p := range []string{"User:alice", "User:bob", "User:carol"} {
				for _, h := range []string{"10.0.0.1", "10.0.0.2"} {
					for _, op := range testOps[1:] {
						for _, noACL := range []bool{true, false} {
							got := a.Authorize(p, h, op, rt, n, noACL)
							want := refAuthorize(acls, super, allowEveryone, p, h, op, rt, n, noACL)
							if got != want {
								t.Fatalf("Authorize(%s, %s, %s, %s %q, noACL=%v) = %v, reference %v; ACLs:\n%s",
									p, h, op, rt, n, noACL, got, want, dump(acls))
							}
						}
					}
				}
			}
		}
	}
}

func dump(acls []Binding) string {
	var b strings.Builder
	for _, x := range acls {
		fmt.Fprintln(&b, x)
	}
	return b.String()
}

// TestAuthorizeMatchesReference: random ACL sets, added and deleted,
// answer every query as the brute-force reference does.
func TestAuthorizeMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		allow := round%2 == 0
		a := New(Config{AllowEveryoneIfNoACLFound: allow})
		n := 1 + r.IntN(12)
		acls := addRandomACLs(t, a, func() bool { n--; return n >= 0 }, r.IntN)
		checkAgainstReference(t, a, acls, allow)
		// Delete a random filter's matches and check again.
		victim := acls[r.IntN(len(acls))]
		name := victim.Name
		matched, err := a.Delete([]Filter{{ResourceType: victim.ResourceType, Name: &name, Pattern: PatternAny, Operation: OpAny, Permission: PermAny}})
		if err != nil {
			t.Fatal(err)
		}
		kept := acls[:0]
		for _, b := range acls {
			if b.ResourceType == victim.ResourceType && b.Name == victim.Name {
				continue
			}
			kept = append(kept, b)
		}
		if len(matched[0]) != len(acls)-len(kept) {
			t.Fatalf("deleted %d, want %d", len(matched[0]), len(acls)-len(kept))
		}
		acls = kept
		checkAgainstReference(t, a, acls, allow)
	}
}

func TestSuperUsersAndParse(t *testing.T) {
	su, err := ParseSuperUsers(" User:admin ;User:ops;; ")
	if err != nil || len(su) != 2 || su[1] != "User:ops" {
		t.Fatalf("ParseSuperUsers: %v %v", su, err)
	}
	if _, err := ParseSuperUsers("admin"); err == nil {
		t.Fatal("a principal without a type was accepted")
	}
	a := New(Config{SuperUsers: su})
	deny := Binding{ResourceType: ResourceCluster, Name: ClusterName, Pattern: PatternLiteral, Principal: "User:*", Host: "*", Operation: OpAll, Permission: PermDeny}
	if _, err := a.Create([]Binding{deny}); err != nil {
		t.Fatal(err)
	}
	if !a.Authorize("User:admin", "1.2.3.4", OpClusterAction, ResourceCluster, ClusterName, false) {
		t.Fatal("a super user was denied")
	}
	if a.Authorize("User:x", "1.2.3.4", OpClusterAction, ResourceCluster, ClusterName, true) {
		t.Fatal("DENY ALL did not deny")
	}
}

// TestAuthorizeByResourceType follows Kafka's authorizeByResourceType:
// an ALLOW pattern not covered by a DENY grants; a literal "*" DENY
// denies all.
func TestAuthorizeByResourceType(t *testing.T) {
	w := func(name string, pt PatternType, perm Permission) Binding {
		return Binding{ResourceType: ResourceTopic, Name: name, Pattern: pt, Principal: "User:p", Host: "*", Operation: OpWrite, Permission: perm}
	}
	for _, c := range []struct {
		acls []Binding
		want bool
	}{
		{nil, false},
		{[]Binding{w("t", PatternLiteral, PermAllow)}, true},
		{[]Binding{w("t", PatternLiteral, PermAllow), w("t", PatternLiteral, PermDeny)}, false},
		{[]Binding{w("t", PatternLiteral, PermAllow), w("t", PatternPrefixed, PermDeny)}, false},
		{[]Binding{w("tx", PatternPrefixed, PermAllow), w("t", PatternPrefixed, PermDeny)}, false},
		{[]Binding{w("t", PatternPrefixed, PermAllow), w("tx", PatternPrefixed, PermDeny)}, true},
		{[]Binding{w("t", PatternLiteral, PermAllow), w("*", PatternLiteral, PermDeny)}, false},
		{[]Binding{w("*", PatternLiteral, PermAllow)}, true},
	} {
		a := New(Config{})
		if _, err := a.Create(c.acls); err != nil {
			t.Fatal(err)
		}
		if got := a.AuthorizeByResourceType("User:p", "h", OpWrite, ResourceTopic); got != c.want {
			t.Fatalf("%s: %v, want %v", dump(c.acls), got, c.want)
		}
	}
	if !New(Config{AllowEveryoneIfNoACLFound: true}).AuthorizeByResourceType("User:p", "h", OpWrite, ResourceTopic) {
		t.Fatal("allow.everyone.if.no.acl.found without ACLs did not grant")
	}
}

// TestStoreRoundTrip: Marshal and Load keep the set; Load refuses
// invalid bindings and versions.
func TestStoreRoundTrip(t *testing.T) {
	var persisted []byte
	a := New(Config{Persist: func(b []byte) error { persisted = b; return nil }})
	r := rand.New(rand.NewPCG(3, 4))
	var bs []Binding
	for range 50 {
		bs = append(bs, randomBinding(r.IntN))
	}
	if _, err := a.Create(bs); err != nil {
		t.Fatal(err)
	}
	b := New(Config{})
	if err := b.Load(persisted); err != nil {
		t.Fatal(err)
	}
	if string(b.Marshal()) != string(persisted) || b.Len() != a.Len() {
		t.Fatal("the loaded set differs")
	}
	if err := b.Load([]byte(`{"version":1,"acls":[{"resource_type":2,"name":"","pattern_type":3,"principal":"User:a","host":"*","operation":3,"permission":3}]}`)); err == nil {
		t.Fatal("an invalid binding was loaded")
	}
	if err := b.Load([]byte(`{"version":9,"acls":[]}`)); err == nil {
		t.Fatal("an unknown version was loaded")
	}
}

// FuzzAuthorize drives random ACL sets (from the fuzzer's bytes) through
// create and delete and compares every query with the reference.
func FuzzAuthorize(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 200})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 7*16 {
			data = data[:7*16]
		}
		i := 0
		next := func(n int) int {
			if i >= len(data) {
				return 0
			}
			v := int(data[i]) % n
			i++
			return v
		}
		allow := len(data) > 0 && data[0]&0x80 != 0
		a := New(Config{AllowEveryoneIfNoACLFound: allow})
		acls := addRandomACLs(t, a, func() bool { return i+7 <= len(data) }, next)
		checkAgainstReference(t, a, acls, allow)
		if len(acls) > 0 {
			v := acls[0]
			if _, err := a.Delete([]Filter{{ResourceType: ResourceAny, Pattern: PatternMatch, Name: &v.Name, Principal: &v.Principal, Operation: OpAny, Permission: PermAny}}); err != nil {
				t.Fatal(err)
			}
			kept := acls[:0]
			for _, b := range acls {
				if !(b.Principal == v.Principal && (b.Pattern == PatternLiteral && (b.Name == v.Name || b.Name == "*") || b.Pattern == PatternPrefixed && strings.HasPrefix(v.Name, b.Name))) {
					kept = append(kept, b)
				}
			}
			if a.Len() != len(kept) {
				t.Fatalf("%d ACLs after delete, want %d", a.Len(), len(kept))
			}
			checkAgainstReference(t, a, kept, allow)
		}
	})
}

// addRandomACLs creates random bindings one at a time while more says so
// and returns the distinct ones created.
func addRandomACLs(t *testing.T, a *Authorizer, more func() bool, next func(int) int) []Binding {
	t.Helper()
	var acls []Binding
	seen := map[Binding]bool{}
	for more() {
		b := randomBinding(next)
		if _, err := a.Create([]Binding{b}); err != nil {
			t.Fatal(err)
		}
		if !seen[b] {
			seen[b] = true
			acls = append(acls, b)
		}
	}
	return acls
}
