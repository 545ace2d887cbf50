// Package authz is Kafka's ACL model and its authorizer: resource types,
// pattern types, operations and permissions with Kafka's wire codes
// (acl.go), ACL bindings and the filters of DescribeAcls/DeleteAcls, the
// matcher with the semantics of Kafka's StandardAuthorizer (match.go:
// DENY wins, ALL matches every operation, the implied DESCRIBE and
// DESCRIBE_CONFIGS, the literal "*" resource, prefixed patterns, super
// users, allow.everyone.if.no.acl.found and authorizeByResourceType), an
// index per resource type (literal names in a map, prefixed patterns by
// prefix and the distinct prefix lengths), the ACL set's persisted form
// (store.go: JSON, written by whoever holds the set through a callback,
// so that it survives restarts), and its form as records of a shared
// store (records.go: one record per binding, named by a digest of it, for
// a cluster's brokers; the holder writes them and hands the whole set to
// Set).
//
// It is a leaf: it must not import the broker, do I/O itself, or know the
// wire protocol's encoding (the broker's ACL handlers translate kmsg
// requests into Bindings and Filters).
package authz
