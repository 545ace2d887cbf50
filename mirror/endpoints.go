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
	return &srcConn{partConn{cn: cn, topic: s.Topic, partition: s.Partition}}, epoch, nil
}

// partConn reads one partition over one connection: what the source's
// and the destination's connections read alike.
type partConn struct {
	cn        *client.Conn
	topic     string
	partition int32
}

func (c *partConn) Fetch(ctx context.Context, a client.FetchArgs) (client.FetchResult, error) {
	return client.FetchPartition(ctx, c.cn, a)
}

func (c *partConn) ListOffset(ctx context.Context, ts int64) (client.OffsetAnswer, error) {
	return client.ListOffset(ctx, c.cn, c.topic, c.partition, ts, client.ReadUncommitted)
}

func (c *partConn) Broken() bool { return c.cn.Broken() }

type srcConn struct{ partConn }

func (s *srcConn) OffsetForLeaderEpoch(ctx context.Context, epoch int32) (client.EpochEnd, error) {
	return client.OffsetForLeaderEpoch(ctx, s.cn, s.topic, s.partition, epoch)
}

func (s *srcConn) Close() { s.cn.Close() }

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
	return &destConn{partConn{cn: cn, topic: d.Topic, partition: d.Partition}}, epoch, nil
}

type destConn struct{ partConn }

func (d *destConn) DeleteRecords(ctx context.Context, w Writer, offset int64) (int32, error) {
	return d.deleteRecords(ctx, w, offset)
}

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
