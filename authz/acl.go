package authz

import (
	"fmt"
	"strings"
)

// ResourceType is Kafka's ResourceType, with its wire codes.
type ResourceType int8

// Kafka's resource types.
const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
)

// numResourceTypes bounds the codes of concrete resource types.
const numResourceTypes = 8

// ClusterName is the one name of the CLUSTER resource.
const ClusterName = "kafka-cluster"

// Wildcard is the literal resource name, principal and host that match
// every name, principal and host.
const Wildcard = "*"

// WildcardPrincipal matches every principal.
const WildcardPrincipal = "User:*"

// PatternType is Kafka's PatternType.
type PatternType int8

// Kafka's pattern types. MATCH and ANY are for filters only.
const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1
	PatternMatch    PatternType = 2
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

// Operation is Kafka's AclOperation.
type Operation int8

// Kafka's operations. ANY is for filters only.
const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
)

// Permission is Kafka's AclPermissionType.
type Permission int8

// Kafka's permission types. ANY is for filters only.
const (
	PermUnknown Permission = 0
	PermAny     Permission = 1
	PermDeny    Permission = 2
	PermAllow   Permission = 3
)

var resourceNames = [...]string{"UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"}
var patternNames = [...]string{"UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"}
var opNames = [...]string{"UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
	"CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS"}
var permNames = [...]string{"UNKNOWN", "ANY", "DENY", "ALLOW"}

func name(names []string, c int8) string {
	if c >= 0 && int(c) < len(names) {
		return names[c]
	}
	return "UNKNOWN"
}

func (r ResourceType) String() string { return name(resourceNames[:], int8(r)) }
func (p PatternType) String() string  { return name(patternNames[:], int8(p)) }
func (o Operation) String() string    { return name(opNames[:], int8(o)) }
func (p Permission) String() string   { return name(permNames[:], int8(p)) }

// Known reports whether r is a code Kafka defines (UNKNOWN and ANY
// included); codes beyond are read as UNKNOWN, as Kafka's fromCode does.
func (r ResourceType) Known() bool { return r >= 0 && int(r) < len(resourceNames) }
func (p PatternType) Known() bool  { return p >= 0 && int(p) < len(patternNames) }
func (o Operation) Known() bool    { return o >= 0 && int(o) < len(opNames) }
func (p Permission) Known() bool   { return p >= 0 && int(p) < len(permNames) }

// Normalize maps codes Kafka does not define to UNKNOWN.
func normResource(r ResourceType) ResourceType {
	if !r.Known() {
		return ResourceUnknown
	}
	return r
}

// supportedOps are the operations an ACL on each resource type can be
// about (Kafka's AclEntry.supportedOperations), which the
// authorized-operations bit sets are computed over.
var supportedOps = [numResourceTypes][]Operation{
	ResourceTopic:           {OpRead, OpWrite, OpCreate, OpDescribe, OpDelete, OpAlter, OpDescribeConfigs, OpAlterConfigs},
	ResourceGroup:           {OpRead, OpDescribe, OpDelete, OpDescribeConfigs, OpAlterConfigs},
	ResourceCluster:         {OpCreate, OpClusterAction, OpDescribeConfigs, OpAlterConfigs, OpIdempotentWrite, OpAlter, OpDescribe},
	ResourceTransactionalID: {OpDescribe, OpWrite},
	ResourceDelegationToken: {OpDescribe},
	ResourceUser:            {OpCreateTokens, OpDescribeTokens},
}

// SupportedOperations returns the operations Kafka supports on rt.
func SupportedOperations(rt ResourceType) []Operation {
	if rt < 0 || int(rt) >= numResourceTypes {
		return nil
	}
	return supportedOps[rt]
}

// Binding is one ACL: a resource pattern and an access control entry.
type Binding struct {
	ResourceType ResourceType `json:"resource_type"`
	Name         string       `json:"name"`
	Pattern      PatternType  `json:"pattern_type"`
	Principal    string       `json:"principal"`
	Host         string       `json:"host"`
	Operation    Operation    `json:"operation"`
	Permission   Permission   `json:"permission"`
}

func (b Binding) String() string {
	return fmt.Sprintf("(resourceType=%s, name=%s, patternType=%s, principal=%s, host=%s, operation=%s, permissionType=%s)",
		b.ResourceType, b.Name, b.Pattern, b.Principal, b.Host, b.Operation, b.Permission)
}

// Validate checks a binding to be created as Kafka's controller does: no
// UNKNOWN or ANY anywhere, a LITERAL or PREFIXED pattern, a non-empty
// resource name ("kafka-cluster" for CLUSTER), a "Type:name" principal.
// The error's text is what CreateAcls answers with INVALID_REQUEST.
func (b Binding) Validate() error {
	switch {
	case b.ResourceType == ResourceAny || normResource(b.ResourceType) == ResourceUnknown:
		return fmt.Errorf("Invalid resourceType %s", normResource(b.ResourceType))
	case b.Pattern != PatternLiteral && b.Pattern != PatternPrefixed:
		return fmt.Errorf("Invalid patternType %s", b.Pattern)
	case b.Operation == OpAny || !b.Operation.Known() || b.Operation == OpUnknown:
		return fmt.Errorf("Invalid operation %s", b.Operation)
	case b.Permission != PermAllow && b.Permission != PermDeny:
		return fmt.Errorf("Invalid permissionType %s", b.Permission)
	case b.Name == "":
		return fmt.Errorf("Invalid empty resource name")
	case b.ResourceType == ResourceCluster && b.Name != ClusterName:
		return fmt.Errorf("The only valid name for the CLUSTER resource is %s", ClusterName)
	}
	if err := ValidPrincipal(b.Principal); err != nil {
		return err
	}
	if b.Host == "" {
		return fmt.Errorf("Invalid empty host")
	}
	return nil
}

// ValidPrincipal checks Kafka's "Type:name" principal form.
func ValidPrincipal(p string) error {
	i := strings.IndexByte(p, ':')
	if i <= 0 || i == len(p)-1 {
		return fmt.Errorf("expected a string in format principalType:principalName but got %s", p)
	}
	return nil
}

// Filter selects bindings (DescribeAcls, DeleteAcls). Nil strings match
// anything; ANY matches every code; pattern MATCH matches every pattern
// that would apply to the filter's name (literal equal, the literal "*",
// and every prefix of it).
type Filter struct {
	ResourceType ResourceType
	Name         *string
	Pattern      PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// Unknown reports whether any code of f is UNKNOWN (or undefined): Kafka
// refuses such filters with INVALID_REQUEST.
func (f Filter) Unknown() bool {
	return normResource(f.ResourceType) == ResourceUnknown || !f.Pattern.Known() || f.Pattern == PatternUnknown ||
		!f.Operation.Known() || f.Operation == OpUnknown || !f.Permission.Known() || f.Permission == PermUnknown
}

// Matches reports whether b is selected by f.
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	if !f.matchesPattern(b) {
		return false
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != OpAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == PermAny || f.Permission == b.Permission
}

func (f Filter) matchesPattern(b Binding) bool {
	switch f.Pattern {
	case PatternAny:
		return f.Name == nil || *f.Name == b.Name
	case PatternMatch:
		if f.Name == nil {
			return true
		}
		n := *f.Name
		switch b.Pattern {
		case PatternLiteral:
			return b.Name == n || b.Name == Wildcard
		case PatternPrefixed:
			return strings.HasPrefix(n, b.Name)
		}
		return false
	default:
		return f.Pattern == b.Pattern && (f.Name == nil || *f.Name == b.Name)
	}
}
