package authn

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
)

// The SCRAM credentials as records of a shared store (a cluster's brokers
// keep them in etcd): one record per user and mechanism, named
// "<mechanism>/<user>" (the mechanism holds no '/'; the user name is the
// rest, whatever it holds), its value the credential. The holder of the
// records (the broker) writes them and gives the whole set to Set
// whenever it changes.

// RecordName is the name of user's credential record for mechanism.
func RecordName(mechanism, user string) string { return mechanism + "/" + user }

// EncodeRecord is a credential record's value (the credential file's
// form of one credential).
func EncodeRecord(c Credential) []byte {
	data, err := json.Marshal(c)
	if err != nil {
		panic("authn: marshal: " + err.Error()) // a plain struct: cannot fail
	}
	return data
}

// DecodeRecord reads a credential record: its name gives the mechanism
// (a known one) and the user (not empty), its value a credential the
// mechanism accepts.
func DecodeRecord(name string, data []byte) (user string, m ScramMechanism, c Credential, err error) {
	mech, user, ok := strings.Cut(name, "/")
	if !ok || user == "" {
		return "", m, c, fmt.Errorf("authn: SCRAM credential record %q: not <mechanism>/<user>", name)
	}
	if m, ok = ScramMechanismByName(mech); !ok {
		return "", m, c, fmt.Errorf("authn: SCRAM credential record %q: unknown mechanism %q", name, mech)
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return "", m, c, fmt.Errorf("authn: SCRAM credential record %q: %w", name, err)
	}
	if err := m.check(c); err != nil {
		return "", m, c, fmt.Errorf("authn: SCRAM credential record %q: %w", name, err)
	}
	return user, m, c, nil
}

// Set replaces every credential with users' (user -> mechanism ->
// credential, as DecodeRecord read them), without persisting; the next
// authentication uses them. The maps are copied.
func (s *Store) Set(users map[string]map[string]Credential) {
	next := make(map[string]map[string]Credential, len(users))
	for u, mechs := range users {
		if len(mechs) > 0 {
			next[u] = maps.Clone(mechs)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users = next
}
