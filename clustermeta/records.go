package clustermeta

import (
	"fmt"
	"strings"
)

// The record space: named, versioned records of kinds other packages own
// (ACLs, SCRAM credentials, mirror state, links, broker configs), stored
// at records/<kind>/<name> with the owner's bytes as the value.

// keyRecords is the record space's directory under the prefix.
const keyRecords = "records/"

// Expected versions of PutRecord and DeleteRecord besides a stored
// version.
const (
	// MustNotExist: PutRecord only creates.
	MustNotExist int64 = 0
	// AnyVersion: the write does not compare the record's version.
	AnyVersion int64 = -1
)

// Record returns a record's key.
func (k Keys) Record(kind, name string) string {
	return k.Prefix + keyRecords + kind + "/" + name
}

// RecordKind is the prefix of a kind's records.
func (k Keys) RecordKind(kind string) string { return k.Prefix + keyRecords + kind + "/" }

// CheckRecord checks a record's kind and name, and the expected version
// (put: true for PutRecord, which alone may expect MustNotExist).
func CheckRecord(kind, name string, expectVersion int64, put bool) error {
	if kind == "" || strings.ContainsRune(kind, '/') {
		return fmt.Errorf("clustermeta: record kind %q", kind)
	}
	if name == "" {
		return fmt.Errorf("clustermeta: empty %s record name", kind)
	}
	if expectVersion < AnyVersion || expectVersion == MustNotExist && !put {
		return fmt.Errorf("clustermeta: %s record %q: expected version %d", kind, name, expectVersion)
	}
	return nil
}

// recordKey splits records/<kind>/<name>: the kind ends at the first
// '/', the name is the rest.
func recordKey(k Keys, key string) (kind, name string, err error) {
	tail, ok := keyTail(key, k.Prefix, keyRecords)
	if ok {
		kind, name, ok = strings.Cut(tail, "/")
	}
	if !ok || kind == "" || name == "" {
		return "", "", corrupt(key, fmt.Errorf("not a record key"))
	}
	return kind, name, nil
}
