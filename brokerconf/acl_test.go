package brokerconf

import (
	"strings"
	"testing"

	"github.com/verbatim-kafka/verbatim/broker"
)

func applyACL(t *testing.T, cfg *broker.Config, name, value string) error {
	t.Helper()
	p, ok := Lookup(name)
	if !ok {
		t.Fatalf("%s is not registered", name)
	}
	return p.Apply(cfg, "", "", value)
}

func TestACLProperties(t *testing.T) {
	var cfg broker.Config
	if err := applyACL(t, &cfg, "authorizer.class.name", StandardAuthorizer); err != nil || !cfg.Authorizer {
		t.Fatalf("StandardAuthorizer: %v %v", err, cfg.Authorizer)
	}
	if err := applyACL(t, &cfg, "authorizer.class.name", ""); err != nil || cfg.Authorizer {
		t.Fatalf("empty: %v %v", err, cfg.Authorizer)
	}
	err := applyACL(t, &cfg, "authorizer.class.name", "kafka.security.authorizer.AclAuthorizer")
	if err == nil || !strings.Contains(err.Error(), StandardAuthorizer) {
		t.Fatalf("another authorizer: %v", err)
	}
	if err := applyACL(t, &cfg, "super.users", "User:admin; User:ops"); err != nil || len(cfg.SuperUsers) != 2 || cfg.SuperUsers[1] != "User:ops" {
		t.Fatalf("super.users: %v %v", err, cfg.SuperUsers)
	}
	if err := applyACL(t, &cfg, "super.users", "admin"); err == nil {
		t.Fatal("super.users without a principal type was accepted")
	}
	if err := applyACL(t, &cfg, "allow.everyone.if.no.acl.found", "true"); err != nil || !cfg.AllowEveryoneIfNoACLFound {
		t.Fatalf("allow.everyone: %v", err)
	}
	if err := applyACL(t, &cfg, "allow.everyone.if.no.acl.found", "yes"); err == nil {
		t.Fatal("allow.everyone.if.no.acl.found=yes was accepted")
	}
}
