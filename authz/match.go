package authz

import (
	"sort"
	"strings"
	"sync"
)

// Authorizer holds an ACL set and answers whether a principal connecting
// from a host may perform an operation on a resource, as Kafka's
// StandardAuthorizer does. Safe for concurrent use: checks take a read
// lock, changes the write lock (held across the persist callback, so the
// persisted set is always the one in memory).
type Authorizer struct {
	mu sync.RWMutex
	// super are the super.users principals: allowed everything.
	super map[string]bool
	// allowIfNoACL is allow.everyone.if.no.acl.found: a resource that no
	// ACL matches is allowed to everyone (never for the checks that ask
	// for it not to be, the mirror permission).
	allowIfNoACL bool
	// all is the ACL set; idx the same bindings indexed by resource type.
	all map[Binding]struct{}
	idx [numResourceTypes]typeIndex
	// persist, when set, is called with the whole set (Marshal) after
	// every change and before it is visible; an error undoes the change.
	persist func([]byte) error
}

// typeIndex is one resource type's ACLs: literal names (the literal "*"
// among them) in a map, prefixed patterns by prefix with the distinct
// prefix lengths sorted, so a lookup costs one map access per distinct
// prefix length that fits the name.
type typeIndex struct {
	literal  map[string][]Binding
	prefixed map[string][]Binding
	lens     []int
}

// Config is what an Authorizer is built from.
type Config struct {
	// SuperUsers are principals ("User:admin") allowed everything.
	SuperUsers []string
	// AllowEveryoneIfNoACLFound is Kafka's allow.everyone.if.no.acl.found.
	AllowEveryoneIfNoACLFound bool
	// Persist, if set, receives the marshalled ACL set after each change.
	Persist func([]byte) error
}

// New returns an Authorizer with no ACLs.
func New(cfg Config) *Authorizer {
	a := &Authorizer{super: map[string]bool{}, allowIfNoACL: cfg.AllowEveryoneIfNoACLFound, all: map[Binding]struct{}{}, persist: cfg.Persist}
	for _, p := range cfg.SuperUsers {
		a.super[p] = true
	}
	return a
}

// ParseSuperUsers splits Kafka's super.users value: principals separated
// by semicolons, blanks around them ignored.
func ParseSuperUsers(v string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(v, ";") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if err := ValidPrincipal(p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// IsSuperUser reports whether principal is in super.users.
func (a *Authorizer) IsSuperUser(principal string) bool { return a.super[principal] }

// Authorize reports whether principal from host may perform op on the
// resource (rt, name). useNoACLRule false makes a resource without any
// matching ACL a denial even under allow.everyone.if.no.acl.found.
func (a *Authorizer) Authorize(principal, host string, op Operation, rt ResourceType, name string, useNoACLRule bool) bool {
	if a.super[principal] {
		return true
	}
	if rt < 0 || int(rt) >= numResourceTypes {
		return false
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	found, deny, allow := false, false, false
	check := func(bs []Binding) {
		for i := range bs {
			b := &bs[i]
			found = true
			if !principalMatches(b.Principal, principal) || (b.Host != Wildcard && b.Host != host) {
				continue
			}
			if b.Permission == PermDeny {
				if b.Operation == OpAll || b.Operation == op {
					deny = true
				}
			} else if implies(b.Operation, op) {
				allow = true
			}
		}
	}
	ix := &a.idx[rt]
	check(ix.literal[name])
	if name != Wildcard {
		check(ix.literal[Wildcard])
	}
	for _, l := range ix.lens {
		if l > len(name) {
			break
		}
		check(ix.prefixed[name[:l]])
	}
	switch {
	case deny:
		return false
	case allow:
		return true
	}
	return !found && useNoACLRule && a.allowIfNoACL
}

func principalMatches(acl, p string) bool { return acl == p || acl == WildcardPrincipal }

// implies reports whether an ALLOW ACL for aclOp grants op: ALL grants
// everything; READ, WRITE, DELETE and ALTER grant DESCRIBE; ALTER_CONFIGS
// grants DESCRIBE_CONFIGS.
func implies(aclOp, op Operation) bool {
	if aclOp == op || aclOp == OpAll {
		return true
	}
	switch op {
	case OpDescribe:
		return aclOp == OpRead || aclOp == OpWrite || aclOp == OpDelete || aclOp == OpAlter
	case OpDescribeConfigs:
		return aclOp == OpAlterConfigs
	}
	return false
}

// hardcodedName is the resource name authorizeByResourceType first asks
// about, as Kafka's Authorizer does: super users, a wildcard ALLOW and
// allow.everyone.if.no.acl.found grant through it.
const hardcodedName = "hardcode"

// AuthorizeByResourceType reports whether principal from host may perform
// op on at least one resource of type rt, as Kafka's
// Authorizer.authorizeByResourceType decides it (InitProducerId of an
// idempotent producer asks it for WRITE on any topic): allowed when a
// name would be allowed ("hardcode" is asked first) or some ALLOW pattern
// is not covered by a DENY (a literal "*" DENY denies all; a DENY prefix
// covers every pattern it is a prefix of, a DENY literal its own name).
func (a *Authorizer) AuthorizeByResourceType(principal, host string, op Operation, rt ResourceType) bool {
	if a.Authorize(principal, host, op, rt, hardcodedName, true) {
		return true
	}
	if rt < 0 || int(rt) >= numResourceTypes {
		return false
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	var denyLit, denyPre, allowLit, allowPre []string
	ix := &a.idx[rt]
	visit := func(m map[string][]Binding) bool {
		for _, bs := range m {
			for _, b := range bs {
				if !principalMatches(b.Principal, principal) || (b.Host != Wildcard && b.Host != host) {
					continue
				}
				if b.Operation != op && b.Operation != OpAll {
					continue
				}
				switch {
				case b.Permission == PermDeny && b.Pattern == PatternLiteral:
					if b.Name == Wildcard {
						return false
					}
					denyLit = append(denyLit, b.Name)
				case b.Permission == PermDeny:
					denyPre = append(denyPre, b.Name)
				case b.Pattern == PatternLiteral:
					allowLit = append(allowLit, b.Name)
				default:
					allowPre = append(allowPre, b.Name)
				}
			}
		}
		return true
	}
	if !visit(ix.literal) || !visit(ix.prefixed) {
		return false
	}
	covered := func(n string) bool {
		for _, d := range denyPre {
			if strings.HasPrefix(n, d) {
				return true
			}
		}
		return false
	}
	for _, p := range allowPre {
		if !covered(p) {
			return true
		}
	}
	for _, l := range allowLit {
		if l == Wildcard || covered(l) {
			continue
		}
		denied := false
		for _, d := range denyLit {
			if d == l {
				denied = true
				break
			}
		}
		if !denied {
			return true
		}
	}
	return false
}

// AuthorizedOperations is the bit set (1 << code) of the operations
// Kafka supports on rt that principal from host may perform on the
// resource (Metadata's, DescribeGroups' and DescribeCluster's authorized
// operations).
func (a *Authorizer) AuthorizedOperations(principal, host string, rt ResourceType, name string) int32 {
	var bits int32
	for _, op := range SupportedOperations(rt) {
		if a.Authorize(principal, host, op, rt, name, true) {
			bits |= 1 << uint(op)
		}
	}
	return bits
}

// addLocked indexes b. REQUIRES: a.mu held for writing, b not present.
func (a *Authorizer) addLocked(b Binding) {
	a.all[b] = struct{}{}
	ix := &a.idx[b.ResourceType]
	if b.Pattern == PatternLiteral {
		if ix.literal == nil {
			ix.literal = map[string][]Binding{}
		}
		ix.literal[b.Name] = append(ix.literal[b.Name], b)
		return
	}
	if ix.prefixed == nil {
		ix.prefixed = map[string][]Binding{}
	}
	if _, ok := ix.prefixed[b.Name]; !ok {
		l := len(b.Name)
		i := sort.SearchInts(ix.lens, l)
		if i == len(ix.lens) || ix.lens[i] != l {
			ix.lens = append(ix.lens, 0)
			copy(ix.lens[i+1:], ix.lens[i:])
			ix.lens[i] = l
		}
	}
	ix.prefixed[b.Name] = append(ix.prefixed[b.Name], b)
}

// removeLocked drops b from the index. REQUIRES: a.mu held for writing.
func (a *Authorizer) removeLocked(b Binding) {
	if _, ok := a.all[b]; !ok {
		return
	}
	delete(a.all, b)
	ix := &a.idx[b.ResourceType]
	m := ix.literal
	if b.Pattern == PatternPrefixed {
		m = ix.prefixed
	}
	bs := m[b.Name]
	for i := range bs {
		if bs[i] == b {
			bs = append(bs[:i:i], bs[i+1:]...)
			break
		}
	}
	if len(bs) > 0 {
		m[b.Name] = bs
		return
	}
	delete(m, b.Name)
	if b.Pattern != PatternPrefixed {
		return
	}
	l := len(b.Name)
	for n := range ix.prefixed {
		if len(n) == l {
			return
		}
	}
	if i := sort.SearchInts(ix.lens, l); i < len(ix.lens) && ix.lens[i] == l {
		ix.lens = append(ix.lens[:i], ix.lens[i+1:]...)
	}
}
