package authz

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// The ACL set as records of a shared store (a cluster's brokers keep it
// in etcd): one record per binding, named by a digest of its encoding,
// so creating a binding never rewrites a record another binding lives
// in, and two brokers creating ACLs at once cannot lose one another's.
// The holder of the records (the broker) writes them and gives the whole
// set to Set whenever it changes.

// RecordName is the name of b's record: the hex SHA-256 of its encoding,
// the same for the same binding on every broker.
func RecordName(b Binding) string {
	sum := sha256.Sum256(EncodeRecord(b))
	return hex.EncodeToString(sum[:])
}

// EncodeRecord is b's record value: the binding as JSON (the fields of
// the ACL file's entries).
func EncodeRecord(b Binding) []byte {
	data, err := json.Marshal(b)
	if err != nil {
		panic("authz: marshal: " + err.Error()) // a plain struct: cannot fail
	}
	return data
}

// DecodeRecord reads a record value: a binding that Validate accepts.
func DecodeRecord(data []byte) (Binding, error) {
	var b Binding
	if err := json.Unmarshal(data, &b); err != nil {
		return b, fmt.Errorf("authz: ACL record: %w", err)
	}
	if err := b.Validate(); err != nil {
		return b, fmt.Errorf("authz: ACL record %s: %v", b, err)
	}
	return b, nil
}

// Set makes bs the ACL set (a binding listed twice counts once), as the
// holder of the records read it; nothing is persisted. Every binding must
// be valid, else nothing changes.
func (a *Authorizer) Set(bs []Binding) error {
	for _, b := range bs {
		if err := b.Validate(); err != nil {
			return fmt.Errorf("authz: %s: %v", b, err)
		}
	}
	a.replace(bs)
	return nil
}

// SortBindings sorts bindings in the order Describe lists them.
func SortBindings(bs []Binding) { sortBindings(bs) }
