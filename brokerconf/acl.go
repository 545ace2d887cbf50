package brokerconf

// The authorizer's properties (Kafka's names): authorizer.class.name,
// super.users, allow.everyone.if.no.acl.found.

import (
	"fmt"
	"strings"

	"github.com/verbatim-kafka/verbatim/authz"
	"github.com/verbatim-kafka/verbatim/broker"
)

// StandardAuthorizer is the authorizer class Kafka's KRaft brokers use;
// Verbatim implements its semantics (package authz).
const StandardAuthorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

func init() {
	Register(Property{
		Name: "authorizer.class.name",
		Doc:  "ACLs on (" + StandardAuthorizer + ") or off (empty, the default)",
		Apply: func(cfg *broker.Config, _, _, v string) error {
			switch strings.TrimSpace(v) {
			case "":
				cfg.Authorizer = false
			case StandardAuthorizer:
				cfg.Authorizer = true
			default:
				return fmt.Errorf("authorizer.class.name %q is not supported: Verbatim implements %s (ACLs managed with kafka-acls.sh) or none (empty)", v, StandardAuthorizer)
			}
			return nil
		},
	})
	Register(Property{
		Name: "super.users",
		Doc:  "principals allowed everything, separated by semicolons (User:admin;User:ops)",
		Apply: func(cfg *broker.Config, _, _, v string) error {
			su, err := authz.ParseSuperUsers(v)
			if err != nil {
				return fmt.Errorf("super.users: %v", err)
			}
			cfg.SuperUsers = su
			return nil
		},
	})
	Register(Property{
		Name: "allow.everyone.if.no.acl.found",
		Doc:  "allow a resource no ACL matches to everyone (default false; never grants the mirror permission)",
		Apply: func(cfg *broker.Config, _, _, v string) error {
			switch strings.ToLower(strings.TrimSpace(v)) {
			case "true":
				cfg.AllowEveryoneIfNoACLFound = true
			case "false":
				cfg.AllowEveryoneIfNoACLFound = false
			default:
				return fmt.Errorf("allow.everyone.if.no.acl.found must be true or false, got %q", v)
			}
			return nil
		},
	})
}
