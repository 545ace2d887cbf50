package clustermeta

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// versionCmp is the comparison of a record write's expected version.
func versionCmp(key string, expect int64) []clientv3.Cmp {
	switch expect {
	case AnyVersion:
		return nil
	case MustNotExist:
		return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}
	default:
		return []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", expect)}
	}
}

// recordTxn runs op on key if fence and the expected version hold: one
// transaction whose Else reads the fence's key to tell ErrFenced from
// ErrConflict.
func (s *etcdStore) recordTxn(ctx context.Context, fence Fence, key string, expect int64, op clientv3.Op) (*clientv3.TxnResponse, error) {
	txn := s.cli.Txn(ctx).If(append(fenceCmp(fence), versionCmp(key, expect)...)...).Then(op)
	if fence.Key != "" {
		txn = txn.Else(clientv3.OpGet(fence.Key))
	}
	resp, err := txn.Commit()
	if err != nil {
		return nil, fmt.Errorf("clustermeta: writing %s: %w", key, err)
	}
	if !resp.Succeeded {
		return nil, failed(fence, resp)
	}
	return resp, nil
}

func (s *etcdStore) PutRecord(ctx context.Context, fence Fence, kind, name string, value []byte, expectVersion int64) (int64, error) {
	if err := CheckRecord(kind, name, expectVersion, true); err != nil {
		return 0, err
	}
	key := s.keys.Record(kind, name)
	resp, err := s.recordTxn(ctx, fence, key, expectVersion, clientv3.OpPut(key, string(value)))
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

func (s *etcdStore) DeleteRecord(ctx context.Context, fence Fence, kind, name string, expectVersion int64) (int64, error) {
	if err := CheckRecord(kind, name, expectVersion, false); err != nil {
		return 0, err
	}
	key := s.keys.Record(kind, name)
	resp, err := s.recordTxn(ctx, fence, key, expectVersion, clientv3.OpDelete(key))
	if err != nil {
		return 0, err
	}
	if resp.Responses[0].GetResponseDeleteRange().Deleted == 0 {
		return 0, ErrNotFound
	}
	return resp.Header.Revision, nil
}
