package broker

// DescribeLogDirs (key 35), versions 1-4 (Kafka 4.x serves 1 and up).
//
// Behaviour: one log dir, the data dir (its absolute path), listing the
// asked partitions (all when Topics is null) with their size on disk
// (storage.Log.Size), OffsetLag 0 and IsFuture false. v4 adds the file
// system's total and usable bytes. Partitions that do not exist are left
// out, as Kafka leaves them out; a partition whose log is offline is left
// out too and the dir's error is KAFKA_STORAGE_ERROR.
//
// Authorization (with the authorizer on, authorize.go): DESCRIBE on
// CLUSTER (CLUSTER_AUTHORIZATION_FAILED, no directories).
//
// Deviations from Apache Kafka: none known (a single log dir).

import (
	"context"
	"path/filepath"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/verbatim-kafka/verbatim/authz"
)

func init() { register(kmsg.DescribeLogDirs.Int16(), 1, 4, handleDescribeLogDirs) }

func handleDescribeLogDirs(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !s.authorizedCluster(r, authz.OpDescribe) {
		// Kafka: no directories, and (v3+) CLUSTER_AUTHORIZATION_FAILED.
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	dir := kmsg.NewDescribeLogDirsResponseDir()
	if abs, err := filepath.Abs(s.cfg.DataDir); err == nil {
		dir.Dir = abs
	} else {
		dir.Dir = s.cfg.DataDir
	}
	dir.TotalBytes, dir.UsableBytes = -1, -1
	if req.Version >= 4 {
		var st syscall.Statfs_t
		if err := syscall.Statfs(s.cfg.DataDir, &st); err == nil {
			dir.TotalBytes = int64(st.Blocks) * int64(st.Bsize)
			dir.UsableBytes = int64(st.Bavail) * int64(st.Bsize)
		}
	}
	add := func(t *Topic, parts []*Partition) {
		dt := kmsg.NewDescribeLogDirsResponseDirTopic()
		dt.Topic = t.Name
		for _, p := range parts {
			l, err := partitionLog(p)
			if err != nil {
				dir.ErrorCode = kerr.KafkaStorageError.Code
				continue
			}
			dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			dp.Partition, dp.Size = p.Index, l.Size()
			dt.Partitions = append(dt.Partitions, dp)
		}
		if len(dt.Partitions) > 0 {
			dir.Topics = append(dir.Topics, dt)
		}
	}
	if req.Topics == nil {
		for _, t := range s.cluster.topics() {
			add(t, t.Partitions())
		}
	} else {
		for _, rt := range req.Topics {
			t := s.cluster.topic(rt.Topic)
			if t == nil {
				continue
			}
			var parts []*Partition
			for _, i := range rt.Partitions {
				if p := t.Partition(i); p != nil {
					parts = append(parts, p)
				}
			}
			add(t, parts)
		}
	}
	resp.Dirs = append(resp.Dirs, dir)
	return resp, nil
}
