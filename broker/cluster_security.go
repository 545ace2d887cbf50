package broker

// Cluster mode's ACLs and SCRAM credentials (owner: the cluster-state
// work; see cluster_config.go): both live in the cluster store as
// records, none in verbatim-meta. Kind "acl" holds one record per ACL
// binding (authz.RecordName: a digest of the binding), so CreateAcls on
// two brokers at once never rewrites the same record and neither loses
// the other's; kind "scram" one record per user and mechanism
// (authn.RecordName). Every broker's authorizer and credential store
// follow the snapshots its reconciler applies (applySecurity, before the
// snapshot counts as applied), so an admin call that waited for its
// write's revision (awaitRevision) returns once this broker enforces it,
// and the others enforce it once their snapshots have it.
//
// The single node keeps its files (authorize.go, sasl_config.go).

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/authn"
	"github.com/verbatim-kafka/verbatim/authz"
	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// The record kinds of the cluster store this file owns.
const (
	aclKind   = "acl"
	scramKind = "scram"
)

// recordsMark tells whether a kind's records changed between two
// snapshots: every write gets a revision above every stored record's, so
// any change of the set changes its count or its highest version.
type recordsMark struct {
	n   int
	max int64
}

func markOf(recs map[string]clustermeta.Record) recordsMark {
	m := recordsMark{n: len(recs)}
	for _, r := range recs {
		m.max = max(m.max, r.Version)
	}
	return m
}

// securityState is what the reconciler last gave the authorizer and the
// credential store (reconciler-only after Open).
type securityState struct {
	acl, scram recordsMark
}

// applySecurity hands the snapshot's ACLs and SCRAM credentials to the
// authorizer and the credential store when they changed (the reconciler,
// for every snapshot).
func (cm *clusterMode) applySecurity(snap *clustermeta.Snapshot) {
	if m := markOf(snap.Records[aclKind]); cm.s.acl != nil && m != cm.sec.acl {
		cm.loadACLs(cm.s.acl, snap)
	}
	if m := markOf(snap.Records[scramKind]); cm.s.scram != nil && m != cm.sec.scram {
		cm.loadSCRAM(cm.s.scram, snap)
	}
}

// loadACLs makes the snapshot's ACL records the authorizer's set. A
// record that does not decode is logged and left out (it grants and
// denies nothing) rather than stopping the broker.
func (cm *clusterMode) loadACLs(a *authz.Authorizer, snap *clustermeta.Snapshot) {
	recs := snap.Records[aclKind]
	bs := make([]authz.Binding, 0, len(recs))
	for _, name := range slices.Sorted(maps.Keys(recs)) {
		b, err := authz.DecodeRecord(recs[name].Value)
		if err != nil {
			cm.s.log.Error("ACL record in the cluster store not applied", "record", name, "err", err)
			continue
		}
		bs = append(bs, b)
	}
	if err := a.Set(bs); err != nil { // DecodeRecord validated every one
		cm.s.log.Error("ACLs from the cluster store not applied", "err", err)
		return
	}
	cm.sec.acl = markOf(recs)
}

// loadSCRAM makes the snapshot's credential records the store's
// credentials; a record that does not decode is logged and left out.
func (cm *clusterMode) loadSCRAM(st *authn.Store, snap *clustermeta.Snapshot) {
	recs := snap.Records[scramKind]
	users := map[string]map[string]authn.Credential{}
	for _, name := range slices.Sorted(maps.Keys(recs)) {
		user, m, c, err := authn.DecodeRecord(name, recs[name].Value)
		if err != nil {
			cm.s.log.Error("SCRAM credential record in the cluster store not applied", "record", printable(name), "err", err)
			continue
		}
		if users[user] == nil {
			users[user] = map[string]authn.Credential{}
		}
		users[user][m.Name] = c
	}
	st.Set(users)
	cm.sec.scram = markOf(recs)
}

// openAuthorizer is openAuthorizer's cluster mode: no file, the set of
// the snapshot Open read (the reconciler follows the later ones).
func (cm *clusterMode) openAuthorizer(cfg authz.Config) *authz.Authorizer {
	a := authz.New(cfg)
	cm.loadACLs(a, cm.snap.Load())
	return a
}

// openSCRAM is the credential store of cluster mode: the snapshot's
// credentials, after importing those of the data dir's credential file
// (`verbatim format --add-scram`, the way to give a cluster whose
// listeners all need SASL its first administrator). The import creates
// only what the cluster lacks, and renames the file (suffix ".imported")
// so it is imported once: a credential deleted later does not come back
// with the next start.
func (cm *clusterMode) openSCRAM() (*authn.Store, error) {
	local, err := openSCRAMStore(cm.s.fs)
	if err != nil {
		return nil, err
	}
	snap := cm.snap.Load()
	if users := local.Users(); len(users) > 0 {
		if snap, err = cm.importSCRAM(local, users); err != nil {
			return nil, err
		}
	}
	st := authn.NewStore(nil)
	cm.loadSCRAM(st, snap)
	return st, nil
}

// importSCRAM writes the local credentials the cluster lacks and returns
// a snapshot that has them.
func (cm *clusterMode) importSCRAM(local *authn.Store, users []string) (*clustermeta.Snapshot, error) {
	ctx, cancel := cm.writeCtx()
	defer cancel()
	for _, u := range users {
		for _, info := range local.Describe(u) {
			c, _ := local.Lookup(u, info.Mechanism.Name)
			_, err := cm.store.PutRecord(ctx, clustermeta.Fence{}, scramKind, authn.RecordName(info.Mechanism.Name, u), authn.EncodeRecord(c), clustermeta.MustNotExist)
			switch {
			case errors.Is(err, clustermeta.ErrConflict):
				cm.s.log.Info("SCRAM credential of the data dir not imported: the cluster has one", "user", printable(u), "mechanism", info.Mechanism.Name)
			case err != nil:
				return nil, fmt.Errorf("broker: importing the SCRAM credentials of %s/%s into the cluster: %w", metaDirName, scramCredentialsFile, err)
			default:
				cm.s.log.Info("SCRAM credential of the data dir imported into the cluster", "user", printable(u), "mechanism", info.Mechanism.Name)
			}
		}
	}
	snap, err := cm.store.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("broker: reading the cluster state: %w", err)
	}
	from := metaDirName + "/" + scramCredentialsFile
	if err := cm.s.fs.Rename(from, from+".imported"); err != nil {
		return nil, fmt.Errorf("broker: renaming %s after importing it: %w", from, err)
	}
	return snap, cm.s.fs.SyncDir(metaDirName)
}

// createAcls writes the bindings' records (CreateAcls in cluster mode)
// and waits until this broker applied them. errs[i] is bs[i]'s failure:
// its validation error (INVALID_REQUEST, aclCreationError) or the
// store's answer. An existing binding is written again (the same value):
// a success, as in Kafka.
func (cm *clusterMode) createAcls(bs []authz.Binding) []error {
	errs := make([]error, len(bs))
	ctx, cancel := cm.writeCtx()
	defer cancel()
	var rev int64
	var written []int
	for i, b := range bs {
		if errs[i] = b.Validate(); errs[i] != nil {
			continue
		}
		v, err := cm.store.PutRecord(ctx, clustermeta.Fence{}, aclKind, authz.RecordName(b), authz.EncodeRecord(b), clustermeta.AnyVersion)
		if err != nil {
			errs[i] = storeErr("creating ACL "+b.String(), err)
			continue
		}
		rev = max(rev, v)
		written = append(written, i)
	}
	if rev > 0 && !cm.awaitRevision(ctx, rev) {
		for _, i := range written {
			errs[i] = notSeenYet("creating ACL " + bs[i].String())
		}
	}
	return errs
}

// aclCreationError is a creation's result: a store failure's code and
// message, or INVALID_REQUEST with the validation error.
func aclCreationError(err error) (int16, string) {
	var ke *kafkaError
	if errors.As(err, &ke) {
		return ke.err.Code, ke.msg
	}
	return kerr.InvalidRequest.Code, err.Error()
}

// deleteAcls removes the records of the bindings the filters match
// (DeleteAcls in cluster mode), matched against a fresh read of the
// store, not this broker's applied snapshot, so an ACL just created
// through another broker is found. A binding deleted meanwhile by
// someone else is not reported. A store failure midway answers every
// filter with it, though the bindings deleted before it stay deleted.
func (cm *clusterMode) deleteAcls(filters []authz.Filter) ([][]authz.Binding, error) {
	matched := make([][]authz.Binding, len(filters))
	ctx, cancel := cm.writeCtx()
	defer cancel()
	snap, err := cm.store.Snapshot(ctx)
	if err != nil {
		return matched, storeErr("deleting ACLs", err)
	}
	recs := snap.Records[aclKind]
	bindings := map[string]authz.Binding{}
	for name, r := range recs {
		if b, err := authz.DecodeRecord(r.Value); err == nil {
			bindings[name] = b
		}
	}
	// names[i] are the records filters[i] matches; deleted those this
	// request deleted.
	names := make([][]string, len(filters))
	deleted := map[string]bool{}
	for i, f := range filters {
		if f.Unknown() {
			continue
		}
		for name, b := range bindings {
			if f.Matches(b) {
				names[i] = append(names[i], name)
				deleted[name] = false
			}
		}
	}
	var rev int64
	for _, name := range slices.Sorted(maps.Keys(deleted)) {
		v, err := cm.store.DeleteRecord(ctx, clustermeta.Fence{}, aclKind, name, recs[name].Version)
		switch {
		case errors.Is(err, clustermeta.ErrConflict), errors.Is(err, clustermeta.ErrNotFound):
			// Deleted (and perhaps created again) since the read: not
			// this request's deletion.
		case err != nil:
			return matched, storeErr("deleting ACL "+bindings[name].String(), err)
		default:
			deleted[name] = true
			rev = max(rev, v)
		}
	}
	for i := range names {
		for _, name := range names[i] {
			if deleted[name] {
				matched[i] = append(matched[i], bindings[name])
			}
		}
		authz.SortBindings(matched[i])
	}
	if rev > 0 && !cm.awaitRevision(ctx, rev) {
		return make([][]authz.Binding, len(filters)), notSeenYet("deleting ACLs")
	}
	return matched, nil
}

// alterScram writes the accepted credential changes of an
// AlterUserScramCredentials (cluster mode), one record per user, and
// waits until this broker applied them. The result holds the users whose
// change failed: errScramGone for a deletion of a credential that is not
// there (deleted meanwhile), else the store's answer.
func (cm *clusterMode) alterScram(ok map[string]scramAlteration) map[string]error {
	failed := map[string]error{}
	ctx, cancel := cm.writeCtx()
	defer cancel()
	var rev int64
	var written []string
	for _, user := range slices.Sorted(maps.Keys(ok)) {
		a := ok[user]
		name := authn.RecordName(a.mech.Name, user)
		var v int64
		var err error
		if a.delete {
			v, err = cm.store.DeleteRecord(ctx, clustermeta.Fence{}, scramKind, name, clustermeta.AnyVersion)
		} else {
			v, err = cm.store.PutRecord(ctx, clustermeta.Fence{}, scramKind, name, authn.EncodeRecord(a.cred), clustermeta.AnyVersion)
		}
		switch {
		case errors.Is(err, clustermeta.ErrNotFound):
			failed[user] = errScramGone
		case err != nil:
			failed[user] = storeErr("altering the SCRAM credential of "+printable(user), err)
		default:
			rev = max(rev, v)
			written = append(written, user)
		}
	}
	if rev > 0 && !cm.awaitRevision(ctx, rev) {
		for _, user := range written {
			failed[user] = notSeenYet("altering the SCRAM credential of " + printable(user))
		}
	}
	return failed
}

// scramAlterFailure is a failed change's answer: RESOURCE_NOT_FOUND for a
// credential deleted meanwhile, else the store failure's code and message.
func scramAlterFailure(err error) (*kerr.Error, string) {
	if errors.Is(err, errScramGone) {
		return kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist"
	}
	var ke *kafkaError
	if errors.As(err, &ke) {
		return ke.err, ke.msg
	}
	return kerr.UnknownServerError, "the SCRAM credential could not be written to the cluster store"
}
