package mirror

// The partition copy's Source and Dest over real clusters.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/client"
)

// ClusterSource is the Source of one partition of a Kafka cluster: each
// Leader call dials the current leader on a connection of its own.
type ClusterSource struct {
	Cluster   *client.Cluster
	Topic     string
	Partition int32
}

// Leader dials the partition's current leader.
func (s ClusterSource) Leader(ctx context.Context) (SourceConn, int32, error) {
	addr, epoch, err := s.Cluster.LeaderAddr(ctx, s.Topic, s.Partition)
	if err != nil {
		return nil, -1, err
	}
	cn, err := client.Dial(ctx, addr, s.Cluster.Options())
	if err != nil {
		return nil, -1, err
	}
	return &srcConn{cn: cn, topic: s.Topic, partition: s.Partition}, epoch, nil
}

type srcConn struct {
	cn        *client.Conn
	topic     string
	partition int32
}

func (s *srcConn) Fetch(ctx context.Context, a client.FetchArgs) (client.FetchResult, error) {
	return client.FetchPartition(ctx, s.cn, a)
}

func (s *srcConn) ListOffset(ctx context.Context, ts int64) (client.OffsetAnswer, error) {
	return client.ListOffset(ctx, s.cn, s.topic, s.partition, ts, client.ReadUncommitted)
}

func (s *srcConn) OffsetForLeaderEpoch(ctx context.Context, epoch int32) (client.EpochEnd, error) {
	return client.OffsetForLeaderEpoch(ctx, s.cn, s.topic, s.partition, epoch)
}

func (s *srcConn) Broken() bool { return s.cn.Broken() }
func (s *srcConn) Close()       { s.cn.Close() }

// ClusterDest is the Dest of one partition of a Verbatim destination,
// over the cluster's shared connections.
type ClusterDest struct {
	Cluster   *client.Cluster
	Topic     string
	Partition int32
}

// Leader returns the cluster's connection to the partition's leader.
func (d ClusterDest) Leader(ctx context.Context) (DestConn, int32, error) {
	cn, epoch, err := d.Cluster.Leader(ctx, d.Topic, d.Partition)
	if err != nil {
		return nil, -1, err
	}
	return &destConn{cn: cn, topic: d.Topic, partition: d.Partition}, epoch, nil
}

type destConn struct {
	cn        *client.Conn
	topic     string
	partition int32
}

func (d *destConn) ListOffset(ctx context.Context, ts int64) (client.OffsetAnswer, error) {
	return client.ListOffset(ctx, d.cn, d.topic, d.partition, ts, client.ReadUncommitted)
}

func (d *destConn) Fetch(ctx context.Context, a client.FetchArgs) (client.FetchResult, error) {
	return client.FetchPartition(ctx, d.cn, a)
}

func (d *destConn) DeleteRecords(ctx context.Context, w Writer, offset int64) (int32, error) {
	return d.deleteRecords(ctx, w, offset)
}

func (d *destConn) Broken() bool { return d.cn.Broken() }

func (d *destConn) SendProduce(ctx context.Context, w Writer, set []byte, expect int64, epoch int32, sourceHW int64) (ProduceWait, error) {
	req := d.produceRequest(w, set, expect, epoch, sourceHW)
	p, err := d.cn.Send(ctx, req, 12)
	if err != nil {
		return nil, err
	}
	return &produceWait{d: d, req: req, p: p}, nil
}

type produceWait struct {
	d   *destConn
	req *kmsg.ProduceRequest
	p   *client.Pending
}

// Wait reads the answer: nil, a *ProduceError for a partition error, or
// the failure to get one.
func (w *produceWait) Wait(ctx context.Context) error {
	resp, err := w.p.Wait(ctx)
	if err != nil {
		return err
	}
	if w.req.Version < 9 {
		return Usage("destination %s negotiated Produce v%d: mirror produce needs v9+", w.d.cn.Addr(), w.req.Version)
	}
	r := resp.(*kmsg.ProduceResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return fmt.Errorf("mirror produce %s/%d: malformed answer", w.d.topic, w.d.partition)
	}
	pr := r.Topics[0].Partitions[0]
	perr := kerr.ErrorForCode(pr.ErrorCode)
	if perr == nil {
		return nil
	}
	msg := ""
	if pr.ErrorMessage != nil {
		msg = *pr.ErrorMessage
	}
	return &ProduceError{Err: perr, Message: msg}
}
