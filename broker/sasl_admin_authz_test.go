package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/authz"
)

// TestSCRAMAdminAPIsAuthorized: the SCRAM and quota APIs check what
// Kafka checks — DescribeUserScramCredentials DESCRIBE on CLUSTER,
// AlterUserScramCredentials ALTER on CLUSTER (every user refused),
// DescribeClientQuotas DESCRIBE_CONFIGS on CLUSTER — and a refused
// alteration changes nothing.
func TestSCRAMAdminAPIsAuthorized(t *testing.T) {
	b := startBroker(t, t.TempDir(), withACLs(nil))
	alter := func() *kmsg.AlterUserSCRAMCredentialsRequest {
		req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations = "carol", 2, 8192
		u.Salt, u.SaltedPassword = []byte("salt-salt-salt"), make([]byte, 64)
		req.Upsertions = append(req.Upsertions, u)
		return req
	}
	describe := func(from string) *kmsg.DescribeUserSCRAMCredentialsResponse {
		return rawAs[*kmsg.DescribeUserSCRAMCredentialsResponse](t, b, from, kmsg.NewPtrDescribeUserSCRAMCredentialsRequest())
	}
	quotas := func(from string) *kmsg.DescribeClientQuotasResponse {
		return rawAs[*kmsg.DescribeClientQuotasResponse](t, b, from, kmsg.NewPtrDescribeClientQuotasRequest())
	}

	ar := rawAs[*kmsg.AlterUserSCRAMCredentialsResponse](t, b, malloryIP, alter())
	if len(ar.Results) != 1 || ar.Results[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("mallory's AlterUserScramCredentials: %+v, want CLUSTER_AUTHORIZATION_FAILED", ar.Results)
	}
	if d := describe(adminIP); d.ErrorCode != 0 || len(d.Results) != 0 {
		t.Fatalf("after a refused alteration the admin sees %+v, want no users", d.Results)
	}
	if d := describe(malloryIP); d.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("mallory's DescribeUserScramCredentials: %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(d.ErrorCode))
	}
	if q := quotas(malloryIP); q.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("mallory's DescribeClientQuotas: %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(q.ErrorCode))
	}

	grant(t, b, mallory, authz.PermAllow, "CLUSTER:kafka-cluster:ALTER", "CLUSTER:kafka-cluster:DESCRIBE_CONFIGS")
	ar = rawAs[*kmsg.AlterUserSCRAMCredentialsResponse](t, b, malloryIP, alter())
	if len(ar.Results) != 1 || ar.Results[0].ErrorCode != 0 {
		t.Fatalf("AlterUserScramCredentials with ALTER on CLUSTER: %+v", ar.Results)
	}
	// ALTER implies DESCRIBE.
	if d := describe(malloryIP); d.ErrorCode != 0 || len(d.Results) != 1 || d.Results[0].User != "carol" {
		t.Errorf("DescribeUserScramCredentials with ALTER on CLUSTER: %v %+v", kerr.ErrorForCode(d.ErrorCode), d.Results)
	}
	if q := quotas(malloryIP); q.ErrorCode != 0 {
		t.Errorf("DescribeClientQuotas with DESCRIBE_CONFIGS on CLUSTER: %v", kerr.ErrorForCode(q.ErrorCode))
	}
}
