package authz

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
)

// storeVersion is the version of the persisted ACL file.
const storeVersion = 1

// storeFile is the persisted form of an ACL set: every binding, sorted so
// that the same set always gives the same bytes.
type storeFile struct {
	Version int       `json:"version"`
	ACLs    []Binding `json:"acls"`
}

// Marshal returns the persisted form of the ACL set.
func (a *Authorizer) Marshal() []byte {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.marshalLocked()
}

func (a *Authorizer) marshalLocked() []byte {
	f := storeFile{Version: storeVersion, ACLs: a.sortedLocked()}
	b, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		panic("authz: marshal: " + err.Error()) // plain structs: cannot fail
	}
	return append(b, '\n')
}

func (a *Authorizer) sortedLocked() []Binding {
	out := make([]Binding, 0, len(a.all))
	for b := range a.all {
		out = append(out, b)
	}
	sortBindings(out)
	return out
}

func sortBindings(bs []Binding) {
	slices.SortFunc(bs, func(x, y Binding) int {
		return cmp.Or(
			cmp.Compare(x.ResourceType, y.ResourceType),
			cmp.Compare(x.Pattern, y.Pattern),
			cmp.Compare(x.Name, y.Name),
			cmp.Compare(x.Principal, y.Principal),
			cmp.Compare(x.Host, y.Host),
			cmp.Compare(x.Operation, y.Operation),
			cmp.Compare(x.Permission, y.Permission),
		)
	})
}

// Load replaces the ACL set with the persisted form data (as Marshal
// wrote it). Every binding must be valid; nothing is persisted.
func (a *Authorizer) Load(data []byte) error {
	var f storeFile
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("authz: ACL file: %w", err)
	}
	if f.Version != storeVersion {
		return fmt.Errorf("authz: ACL file version %d, this broker knows %d", f.Version, storeVersion)
	}
	for _, b := range f.ACLs {
		if err := b.Validate(); err != nil {
			return fmt.Errorf("authz: ACL file: %s: %v", b, err)
		}
	}
	a.replace(f.ACLs)
	return nil
}

// replace makes bs (valid bindings; duplicates count once) the ACL set,
// without persisting it.
func (a *Authorizer) replace(bs []Binding) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.all = map[Binding]struct{}{}
	a.idx = [numResourceTypes]typeIndex{}
	for _, b := range bs {
		if _, dup := a.all[b]; !dup {
			a.addLocked(b)
		}
	}
}

// Len is the number of ACLs.
func (a *Authorizer) Len() int {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return len(a.all)
}

// Create adds the valid bindings (a binding already present is a success
// that changes nothing, as in Kafka) and persists the set once. errs[i]
// is bs[i]'s validation error (nil: created); err is the persist
// failure, in which case nothing was added.
func (a *Authorizer) Create(bs []Binding) (errs []error, err error) {
	errs = make([]error, len(bs))
	a.mu.Lock()
	defer a.mu.Unlock()
	var added []Binding
	for i, b := range bs {
		if errs[i] = b.Validate(); errs[i] != nil {
			continue
		}
		if _, ok := a.all[b]; ok {
			continue
		}
		a.addLocked(b)
		added = append(added, b)
	}
	if len(added) == 0 || a.persist == nil {
		return errs, nil
	}
	if err := a.persist(a.marshalLocked()); err != nil {
		for _, b := range added {
			a.removeLocked(b)
		}
		return errs, err
	}
	return errs, nil
}

// Describe returns the bindings f matches, sorted.
func (a *Authorizer) Describe(f Filter) []Binding {
	a.mu.RLock()
	defer a.mu.RUnlock()
	var out []Binding
	for b := range a.all {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	sortBindings(out)
	return out
}

// Delete removes every binding each filter matches and persists the set
// once. matched[i] are the bindings filters[i] matched (sorted; a binding
// two filters match is reported under both, as Kafka does); a filter with
// an UNKNOWN code matches nothing (the caller answers it
// INVALID_REQUEST). err is the persist failure, in which case nothing was
// removed.
func (a *Authorizer) Delete(filters []Filter) (matched [][]Binding, err error) {
	matched = make([][]Binding, len(filters))
	a.mu.Lock()
	defer a.mu.Unlock()
	gone := map[Binding]struct{}{}
	for i, f := range filters {
		if f.Unknown() {
			continue
		}
		for b := range a.all {
			if f.Matches(b) {
				matched[i] = append(matched[i], b)
				gone[b] = struct{}{}
			}
		}
		sortBindings(matched[i])
	}
	if len(gone) == 0 {
		return matched, nil
	}
	for b := range gone {
		a.removeLocked(b)
	}
	if a.persist != nil {
		if err := a.persist(a.marshalLocked()); err != nil {
			for b := range gone {
				a.addLocked(b)
			}
			return make([][]Binding, len(filters)), err
		}
	}
	return matched, nil
}
