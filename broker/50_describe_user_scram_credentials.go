package broker

// DescribeUserScramCredentials (key 50), version 0.
//
// Behaviour (as Kafka's KRaft broker): the users listed, or every user
// with a SCRAM credential when the list is null or empty, each with its
// mechanisms and iterations (never a salt or a key), in the order asked;
// a user without a credential: RESOURCE_NOT_FOUND; a user listed twice:
// DUPLICATE_RESOURCE (one result for it).

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/authz"
)

func init() {
	register(kmsg.DescribeUserSCRAMCredentials.Int16(), 0, 0, handleDescribeUserScramCredentials)
}

func handleDescribeUserScramCredentials(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !s.authorizedCluster(r, authz.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		resp.ErrorMessage = kmsgString(kerr.ClusterAuthorizationFailed.Message)
		return resp, nil
	}
	var users []string
	dup := map[string]bool{}
	if len(req.Users) == 0 {
		users = s.scram.Users()
	} else {
		for _, u := range req.Users {
			if _, seen := dup[u.Name]; seen {
				dup[u.Name] = true
				continue
			}
			dup[u.Name] = false
			users = append(users, u.Name)
		}
	}
	for _, u := range users {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = u
		switch infos := s.scram.Describe(u); {
		case dup[u]:
			res.ErrorCode = kerr.DuplicateResource.Code
			res.ErrorMessage = kmsgString(fmt.Sprintf("Cannot describe SCRAM credentials for the same user twice in a single request: %s", u))
		case len(infos) == 0:
			res.ErrorCode = kerr.ResourceNotFound.Code
			res.ErrorMessage = kmsgString(fmt.Sprintf("Attempt to describe a user credential that does not exist: %s", u))
		default:
			for _, in := range infos {
				ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				ci.Mechanism, ci.Iterations = in.Mechanism.Type, int32(in.Iterations)
				res.CredentialInfos = append(res.CredentialInfos, ci)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

func kmsgString(s string) *string { return &s }
