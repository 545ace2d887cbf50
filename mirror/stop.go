package mirror

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/kbatch"
)

// StopResult is what mirror stop did to one partition.
type StopResult struct {
	Topic     string
	Partition int32
	// LastMirroredOffset is the last offset the mirror wrote (-1: none),
	// LastMirroredEpoch the leader epoch of that batch (-1: none).
	LastMirroredOffset int64
	LastMirroredEpoch  int32
	// NewEpoch is the partition's leader epoch after the stop.
	NewEpoch int32
	// AbortedTransactions counts the ABORT markers the stop wrote.
	AbortedTransactions int
	// Barrier is true when a MIRROR_PID_RESET (type 7) batch was found
	// after the mirrored data.
	Barrier bool
}

// Stop performs the failover of every partition of topics on the
// destination: an IncrementalAlterConfigs DELETE of mirror.mode, which the
// broker turns into the stop sequence (docs/mirroring.md), then reads back
// what it wrote.
// co secures and authenticates the connections (--dest-config).
func Stop(ctx context.Context, dest string, co client.Options, topics []string) ([]StopResult, error) {
	if dest == "" || len(topics) == 0 {
		return nil, Usage("--dest and --topics are required")
	}
	if co.ClientID == "" {
		co.ClientID = "verbatim-mirror-stop"
	}
	// authz: the broker checks ALTER_CONFIGS on each topic + CLUSTER_ACTION
	// or ALTER on CLUSTER for the DELETE of mirror.mode.
	cl, err := client.NewCluster(dest, co)
	if err != nil {
		return nil, Usage("--dest: %v", err)
	}
	defer cl.Close()
	md, err := cl.Metadata(ctx, topics)
	if err != nil {
		return nil, Usage("destination metadata: %v", err)
	}
	var out []StopResult
	for _, name := range topics {
		tm := md[name]
		if tm == nil || tm.Err != nil {
			return out, Usage("destination topic %s: %v", name, errOr(tm))
		}
		before := make([]StopResult, len(tm.Partitions))
		leos := make([]int64, len(tm.Partitions))
		for i := range tm.Partitions {
			// On a cluster a partition's leader may be failing over:
			// its successor is asked after a back-off.
			var r StopResult
			var leo int64
			err := stopRetry(ctx, func() error {
				var err error
				r, leo, err = lastBatch(ctx, cl, name, int32(i))
				return err
			})
			if err != nil {
				return out, Usage("%s/%d: %v", name, i, err)
			}
			before[i], leos[i] = r, leo
		}
		if err := deleteMirrorMode(ctx, cl, name); err != nil {
			return out, err
		}
		md2, err := cl.Metadata(ctx, []string{name})
		if err != nil || md2[name] == nil || md2[name].Err != nil {
			return out, Usage("destination metadata after stopping %s: %v", name, err)
		}
		for i := range before {
			r := before[i]
			r.NewEpoch = md2[name].Partitions[i].LeaderEpoch
			if err := stopRetry(ctx, func() error {
				r.AbortedTransactions, r.Barrier = 0, false
				return countStopMarkers(ctx, cl, name, int32(i), leos[i], &r)
			}); err != nil {
				return out, Usage("%s/%d: reading back the stop markers: %v", name, i, err)
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// stopRetryFor bounds stopRetry: about a cluster's failover.
const stopRetryFor = 30 * time.Second

// stopRetry runs a read of the stop again after transient failures (a
// leader that died, NOT_LEADER_OR_FOLLOWER before the metadata moved).
func stopRetry(ctx context.Context, fn func() error) error {
	return client.Retry(ctx, client.SystemClock{}, stopRetryFor, fn, nil)
}

// lastBatch reads a partition's log end and the epoch of its last batch.
func lastBatch(ctx context.Context, cl *client.Cluster, topic string, part int32) (StopResult, int64, error) {
	r := StopResult{Topic: topic, Partition: part, LastMirroredOffset: -1, LastMirroredEpoch: -1}
	cn, _, err := cl.Leader(ctx, topic, part)
	if err != nil {
		return r, 0, err
	}
	end, err := client.ListOffset(ctx, cn, topic, part, client.Latest, client.ReadUncommitted)
	if err != nil {
		return r, 0, err
	}
	start, err := client.ListOffset(ctx, cn, topic, part, client.Earliest, client.ReadUncommitted)
	if err != nil {
		return r, 0, err
	}
	if end.Offset > start.Offset {
		res, err := client.FetchPartition(ctx, cn, client.FetchArgs{Topic: topic, Partition: part, Offset: end.Offset - 1, MaxBytes: 1 << 20, CurrentEpoch: -1, LastFetchedEpoch: -1})
		if err == nil {
			err = res.Err
		}
		if err != nil {
			return r, 0, err
		}
		bs, _, _, err := Split(res.Records, end.Offset-1)
		if err != nil {
			return r, 0, err
		}
		if len(bs) > 0 {
			r.LastMirroredOffset, r.LastMirroredEpoch = LastOffset(bs[0]), kbatch.LeaderEpoch(bs[0])
			if typ, ok := kbatch.ControlType(bs[0]); ok && typ == kbatch.ControlMirrorPidReset {
				// Stopped already (a stop run again after it answered
				// REQUEST_TIMED_OUT on a cluster): report the mirrored
				// data before the stop's own batches.
				if last, epoch, ok := beforeStop(ctx, cn, topic, part, start.Offset, bs[0]); ok {
					r.LastMirroredOffset, r.LastMirroredEpoch = last, epoch
					return r, last + 1, nil
				}
			}
		}
	}
	return r, end.Offset, nil
}

// stopLookback bounds how far before a barrier beforeStop looks for the
// last mirrored batch (the stop's ABORT markers, one per open
// transaction, come between).
const stopLookback = 1000

// beforeStop finds, below the stop's barrier, the last mirrored batch:
// the last one whose leader epoch is below the barrier's (the stop's
// batches carry the epoch it raised above every mirrored one). It
// returns that batch's last offset and epoch, false when none is within
// stopLookback.
func beforeStop(ctx context.Context, cn *client.Conn, topic string, part int32, logStart int64, barrier []byte) (last int64, epoch int32, found bool) {
	stopEpoch, at := kbatch.LeaderEpoch(barrier), kbatch.BaseOffset(barrier)
	last, epoch = -1, -1
	for next := max(logStart, at-stopLookback); next < at; {
		res, err := client.FetchPartition(ctx, cn, client.FetchArgs{Topic: topic, Partition: part, Offset: next, MaxBytes: 1 << 20, CurrentEpoch: -1, LastFetchedEpoch: -1})
		if err != nil || res.Err != nil {
			return -1, -1, false
		}
		bs, _, _, err := Split(res.Records, next)
		if err != nil || len(bs) == 0 {
			return -1, -1, false
		}
		for _, b := range bs {
			if kbatch.BaseOffset(b) >= at {
				return last, epoch, found
			}
			if kbatch.LeaderEpoch(b) < stopEpoch {
				last, epoch, found = LastOffset(b), kbatch.LeaderEpoch(b), true
			}
			next = LastOffset(b) + 1
		}
	}
	return last, epoch, found
}

func deleteMirrorMode(ctx context.Context, cl *client.Cluster, topic string) error {
	err := client.AlterTopicConfigs(ctx, cl, topic, []client.ConfigOp{{Name: "mirror.mode"}})
	var refused *client.AlterError
	switch {
	case errors.As(err, &refused):
		return Refusal("the destination refused to stop mirror topic %s: %v", topic, refused)
	case err != nil:
		return Usage("stopping %s: %v", topic, err)
	}
	return nil
}

// countStopMarkers reads the partition from the pre-stop log end and counts
// the ABORT markers and the MIRROR_PID_RESET barrier the stop appended.
func countStopMarkers(ctx context.Context, cl *client.Cluster, topic string, part int32, from int64, r *StopResult) error {
	cn, _, err := cl.Leader(ctx, topic, part)
	if err != nil {
		return err
	}
	end, err := client.ListOffset(ctx, cn, topic, part, client.Latest, client.ReadUncommitted)
	if err != nil {
		return err
	}
	for next := from; next < end.Offset; {
		res, err := client.FetchPartition(ctx, cn, client.FetchArgs{Topic: topic, Partition: part, Offset: next, MaxBytes: 1 << 20, CurrentEpoch: -1, LastFetchedEpoch: -1})
		if err == nil {
			err = res.Err
		}
		if err != nil {
			return err
		}
		bs, _, _, err := Split(res.Records, next)
		if err != nil {
			return err
		}
		if len(bs) == 0 {
			return errors.New("no batch below the log end")
		}
		for _, b := range bs {
			if typ, ok := kbatch.ControlType(b); ok {
				switch typ {
				case 0:
					r.AbortedTransactions++
				case 7:
					r.Barrier = true
				}
			}
			next = LastOffset(b) + 1
		}
	}
	return nil
}

// String renders a stop result as one line.
func (r StopResult) String() string {
	return fmt.Sprintf("%s/%d: last mirrored offset %d (epoch %d), new leader epoch %d, %d transactions aborted, barrier %v",
		r.Topic, r.Partition, r.LastMirroredOffset, r.LastMirroredEpoch, r.NewEpoch, r.AbortedTransactions, r.Barrier)
}
