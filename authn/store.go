package authn

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// Credential is one user's salted SCRAM credential for one mechanism, as
// Kafka stores it (UserScramCredentialRecord): never the password, nor
// the salted password.
type Credential struct {
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
}

// Store holds the SCRAM credentials of every user: read by every
// authentication, changed by AlterUserScramCredentials, persisted by its
// caller (the persist function given to NewStore or DecodeStore) before a
// change becomes visible.
type Store struct {
	mu      sync.RWMutex
	users   map[string]map[string]Credential
	persist func(data []byte) error
}

// storeFile is the encoding: {"version":1,"users":{name:{mechanism:credential}}}.
type storeFile struct {
	Version int                              `json:"version"`
	Users   map[string]map[string]Credential `json:"users"`
}

const storeVersion = 1

// NewStore returns an empty store; persist (nil: none) is called with the
// store's encoding whenever it changes, and a change it fails is undone.
func NewStore(persist func(data []byte) error) *Store {
	return &Store{users: map[string]map[string]Credential{}, persist: persist}
}

// DecodeStore reads a store's encoding (Encode), checking every
// credential.
func DecodeStore(data []byte, persist func(data []byte) error) (*Store, error) {
	var f storeFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("authn: SCRAM credentials: %w", err)
	}
	if f.Version != storeVersion {
		return nil, fmt.Errorf("authn: SCRAM credentials: version %d, this build reads version %d", f.Version, storeVersion)
	}
	s := NewStore(persist)
	for user, mechs := range f.Users {
		if user == "" {
			return nil, fmt.Errorf("authn: SCRAM credentials: a user with an empty name")
		}
		for name, c := range mechs {
			m, ok := ScramMechanismByName(name)
			if !ok {
				return nil, fmt.Errorf("authn: SCRAM credentials of %q: unknown mechanism %q", user, name)
			}
			if err := m.check(c); err != nil {
				return nil, fmt.Errorf("authn: SCRAM credentials of %q: %s: %w", user, name, err)
			}
		}
		if len(mechs) > 0 {
			s.users[user] = mechs
		}
	}
	return s, nil
}

// check validates a stored credential.
func (m ScramMechanism) check(c Credential) error {
	if len(c.StoredKey) != m.size || len(c.ServerKey) != m.size {
		return fmt.Errorf("keys of %d and %d bytes, want %d", len(c.StoredKey), len(c.ServerKey), m.size)
	}
	if len(c.Salt) == 0 {
		return fmt.Errorf("empty salt")
	}
	if c.Iterations < MinIterations || c.Iterations > MaxIterations {
		return fmt.Errorf("iterations %d outside %d..%d", c.Iterations, MinIterations, MaxIterations)
	}
	return nil
}

// Encode returns the store's encoding.
func (s *Store) Encode() ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return encodeUsers(s.users)
}

func encodeUsers(users map[string]map[string]Credential) ([]byte, error) {
	data, err := json.MarshalIndent(storeFile{Version: storeVersion, Users: users}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// Lookup returns user's credential for mechanism.
func (s *Store) Lookup(user, mechanism string) (Credential, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.users[user][mechanism]
	return c, ok
}

// Users lists the users with at least one credential, sorted.
func (s *Store) Users() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Sorted(maps.Keys(s.users))
}

// CredentialInfo is what DescribeUserScramCredentials tells about a
// credential.
type CredentialInfo struct {
	Mechanism  ScramMechanism
	Iterations int
}

// Describe lists user's credentials in mechanism type order (none: the
// user has no credential).
func (s *Store) Describe(user string) []CredentialInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []CredentialInfo
	for _, m := range scramMechanisms {
		if c, ok := s.users[user][m.Name]; ok {
			out = append(out, CredentialInfo{Mechanism: m, Iterations: c.Iterations})
		}
	}
	return out
}

// Tx is a change being prepared by Update, on a copy of the store.
type Tx struct {
	users map[string]map[string]Credential
}

// Has reports whether user has a credential for mechanism.
func (t *Tx) Has(user, mechanism string) bool {
	_, ok := t.users[user][mechanism]
	return ok
}

// Put sets user's credential for mechanism.
func (t *Tx) Put(user, mechanism string, c Credential) {
	m := maps.Clone(t.users[user])
	if m == nil {
		m = map[string]Credential{}
	}
	m[mechanism] = c
	t.users[user] = m
}

// Delete removes user's credential for mechanism.
func (t *Tx) Delete(user, mechanism string) {
	if _, ok := t.users[user][mechanism]; !ok {
		return
	}
	m := maps.Clone(t.users[user])
	delete(m, mechanism)
	if len(m) == 0 {
		delete(t.users, user)
	} else {
		t.users[user] = m
	}
}

// Update runs fn on a copy of the store; if fn succeeds the copy is
// persisted and then replaces the store, all under the store's lock, so
// changes are applied one at a time and never half. fn must not call the
// store.
func (s *Store) Update(fn func(tx *Tx) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx := &Tx{users: maps.Clone(s.users)}
	if err := fn(tx); err != nil {
		return err
	}
	if s.persist != nil {
		data, err := encodeUsers(tx.users)
		if err != nil {
			return err
		}
		if err := s.persist(data); err != nil {
			return err
		}
	}
	s.users = tx.users
	return nil
}
