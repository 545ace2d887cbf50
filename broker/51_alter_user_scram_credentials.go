package broker

// AlterUserScramCredentials (key 51), version 0.
//
// Behaviour (as Kafka's controller, ScramControlManager): upsertions carry
// the salt, the iterations and the salted password (clients salt the
// password themselves, so it never reaches the broker); the broker keeps
// the salt, iterations, StoredKey and ServerKey derived from it. All
// accepted changes of one request are persisted together, atomically,
// before the answer (sasl_config.go), and take effect for the next
// authentication (sessions already authenticated are kept). In cluster
// mode each user's change is one record of the cluster store
// (cluster_security.go), written and answered on its own; the answer
// comes once this broker authenticates with it, the other brokers do once
// their snapshots have it.
// Per user, in the order users first appear:
//   - a user named twice in the request (whatever the mechanisms, in
//     deletions or upsertions): DUPLICATE_RESOURCE "A user credential
//     cannot be altered twice in the same request" (kafka-configs.sh sends
//     one mechanism per request);
//   - an empty user name: UNACCEPTABLE_CREDENTIAL; an unknown mechanism:
//     UNSUPPORTED_SASL_MECHANISM; iterations outside 4096..16384:
//     UNACCEPTABLE_CREDENTIAL ("Too few iterations" / "Too many
//     iterations"); deleting a credential that does not exist:
//     RESOURCE_NOT_FOUND.
//
// Deviations from Apache Kafka: an empty salt or salted password is
// UNACCEPTABLE_CREDENTIAL (Kafka stores an empty salt, and fails an empty
// salted password with UNKNOWN_SERVER_ERROR).

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/verbatim-kafka/verbatim/authn"
	"github.com/verbatim-kafka/verbatim/authz"
)

func init() {
	register(kmsg.AlterUserSCRAMCredentials.Int16(), 0, 0, handleAlterUserScramCredentials)
}

// scramAlteration is one user's accepted change.
type scramAlteration struct {
	mech   authn.ScramMechanism
	delete bool
	cred   authn.Credential
}

func handleAlterUserScramCredentials(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var order []string
	errs := map[string]*kerr.Error{}
	msgs := map[string]string{}
	ok := map[string]scramAlteration{}
	fail := func(user string, e *kerr.Error, msg string) {
		delete(ok, user)
		errs[user], msgs[user] = e, msg
	}
	seen := func(user string) bool {
		_, bad := errs[user]
		_, good := ok[user]
		if !bad && !good {
			order = append(order, user)
		}
		return bad || good
	}
	// first checks what every change of a user must pass; false: the
	// change is refused (a user already refused stays so).
	first := func(user string, mech int8) (authn.ScramMechanism, bool) {
		if _, bad := errs[user]; bad {
			return authn.ScramMechanism{}, false
		}
		if seen(user) {
			fail(user, kerr.DuplicateResource, "A user credential cannot be altered twice in the same request")
			return authn.ScramMechanism{}, false
		}
		m, e, msg := checkScramAlteration(user, mech)
		if e != nil {
			fail(user, e, msg)
			return m, false
		}
		return m, true
	}
	for _, d := range req.Deletions {
		m, good := first(d.Name, d.Mechanism)
		switch {
		case !good:
		// In cluster mode the store answers it (alterScram): this
		// broker's copy may lack a credential just created elsewhere.
		case s.cm == nil && !s.scramHas(d.Name, m.Name):
			fail(d.Name, kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist")
		default:
			ok[d.Name] = scramAlteration{mech: m, delete: true}
		}
	}
	for _, u := range req.Upsertions {
		m, good := first(u.Name, u.Mechanism)
		if !good {
			continue
		}
		var e *kerr.Error
		var msg string
		switch {
		case u.Iterations < authn.MinIterations:
			e, msg = kerr.UnacceptableCredential, "Too few iterations"
		case u.Iterations > authn.MaxIterations:
			e, msg = kerr.UnacceptableCredential, "Too many iterations"
		case len(u.Salt) == 0 || len(u.SaltedPassword) == 0:
			e, msg = kerr.UnacceptableCredential, "The salt and the salted password must not be empty"
		}
		if e != nil {
			fail(u.Name, e, msg)
			continue
		}
		ok[u.Name] = scramAlteration{mech: m, cred: m.Credential(u.Salt, u.SaltedPassword, int(u.Iterations))}
	}
	if !s.authorizedCluster(r, authz.OpAlter) {
		// Kafka's answer: every user CLUSTER_AUTHORIZATION_FAILED.
		for _, user := range order {
			fail(user, kerr.ClusterAuthorizationFailed, kerr.ClusterAuthorizationFailed.Message)
		}
	}
	if len(ok) > 0 && s.cm != nil {
		for user, err := range s.cm.alterScram(ok) { // cluster_security.go
			if !errors.Is(err, errScramGone) {
				s.log.Error("AlterUserScramCredentials failed", "err", err, "user", printable(user), "remote", clientOf(r).remoteString())
			}
			e, msg := scramAlterFailure(err)
			fail(user, e, msg)
		}
	} else if len(ok) > 0 {
		err := s.scram.Update(func(tx *authn.Tx) error {
			for user, a := range ok {
				if a.delete {
					if !tx.Has(user, a.mech.Name) {
						return errScramGone
					}
					tx.Delete(user, a.mech.Name)
				} else {
					tx.Put(user, a.mech.Name, a.cred)
				}
			}
			return nil
		})
		if err != nil {
			code, msg := kerr.UnknownServerError, "the SCRAM credentials could not be persisted"
			if errors.Is(err, errScramGone) {
				code, msg = kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist"
			}
			s.log.Error("AlterUserScramCredentials failed", "err", err, "remote", clientOf(r).remoteString())
			for user := range ok {
				fail(user, code, msg)
			}
		}
	}
	for _, user := range order {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = user
		if e := errs[user]; e != nil {
			res.ErrorCode = e.Code
			res.ErrorMessage = kmsgString(msgs[user])
			s.auditRecord(r, "alter scram credential", "USER", user, e.Code)
		} else {
			s.log.Info("SCRAM credential changed", "user", printable(user), "mechanism", ok[user].mech.Name, "deleted", ok[user].delete, "principal", r.Principal)
			s.auditRecord(r, "alter scram credential", "USER", user, 0, "mechanism", ok[user].mech.Name, "deleted", ok[user].delete)
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

// errScramGone: a credential to delete was deleted by a concurrent request.
var errScramGone = errors.New("credential deleted concurrently")

func (s *Server) scramHas(user, mech string) bool {
	_, ok := s.scram.Lookup(user, mech)
	return ok
}

// checkScramAlteration is Kafka's validateScramUsernameAndMechanism.
func checkScramAlteration(user string, mechanism int8) (authn.ScramMechanism, *kerr.Error, string) {
	if user == "" {
		return authn.ScramMechanism{}, kerr.UnacceptableCredential, "Username must not be empty"
	}
	m, ok := authn.ScramMechanismByType(mechanism)
	if !ok {
		return m, kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism"
	}
	return m, nil, ""
}
