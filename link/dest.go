package link

// The partition copy's destination in process: mirror.Dest and
// mirror.DestConn over the broker's data side (dataHost), so the copy
// appends through the broker's mirror append without a connection, a
// request or a copy of the fetched bytes.

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/mirror"
)

// dest is one pull-mode partition of link as a mirror.Dest; it is its own
// (never broken) connection.
type dest struct {
	h         dataHost
	link      string
	topic     string
	partition int32
}

// Leader returns d itself; the leader epoch -1 asks for no epoch check:
// an in-process writer has no stale view of the leader to be fenced from,
// its writer epoch fences it.
func (d *dest) Leader(context.Context) (mirror.DestConn, int32, error) { return d, -1, nil }

func (d *dest) ListOffset(_ context.Context, ts int64) (client.OffsetAnswer, error) {
	start, end, err := d.h.MirrorLogRange(d.topic, d.partition)
	if err != nil {
		return client.OffsetAnswer{}, err
	}
	switch ts {
	case client.Latest:
		return client.OffsetAnswer{Offset: end, LeaderEpoch: -1}, nil
	case client.Earliest:
		return client.OffsetAnswer{Offset: start, LeaderEpoch: -1}, nil
	}
	return client.OffsetAnswer{}, fmt.Errorf("link destination %s/%d: ListOffsets %d is not supported in process", d.topic, d.partition, ts)
}

// Fetch reads the destination's own log (the copy reads its last batch
// when it resumes).
func (d *dest) Fetch(_ context.Context, a client.FetchArgs) (client.FetchResult, error) {
	start, end, err := d.h.MirrorLogRange(d.topic, d.partition)
	if err != nil {
		return client.FetchResult{}, err
	}
	recs, err := d.h.ReadMirrorLog(d.topic, d.partition, a.Offset, int(a.MaxBytes))
	if err != nil {
		return client.FetchResult{}, err
	}
	return client.FetchResult{Records: recs, HighWatermark: end, LogStart: start, DivergingEpoch: client.EpochEnd{LeaderEpoch: -1, EndOffset: -1}}, nil
}

func (d *dest) SendProduce(ctx context.Context, w mirror.Writer, set []byte, expect int64, _ int32, sourceHW int64) (mirror.ProduceWait, error) {
	return produceWait{d.h.LinkMirrorAppend(ctx, d.link, d.topic, d.partition, broker.LinkWriter{Epoch: w.Epoch, ID: w.ID}, set, expect, sourceHW)}, nil
}

func (d *dest) DeleteRecords(_ context.Context, w mirror.Writer, offset int64) (int32, error) {
	if w.Epoch == mirror.RegisterEpoch {
		e, errs := d.h.RegisterLinkWriter(d.link, w.ID, []broker.LinkPartition{{Topic: d.topic, Partition: d.partition}})
		return e, errs[0]
	}
	_, err := d.h.LinkForwardLogStart(d.link, d.topic, d.partition, broker.LinkWriter{Epoch: w.Epoch, ID: w.ID}, offset, -1)
	return -1, err
}

// ForwardStartEpoch is the log-start forward carrying the source's
// leader epoch at offset (the in-process broker always takes it).
func (d *dest) ForwardStartEpoch(_ context.Context, w mirror.Writer, offset int64, epoch int32) error {
	_, err := d.h.LinkForwardLogStart(d.link, d.topic, d.partition, broker.LinkWriter{Epoch: w.Epoch, ID: w.ID}, offset, epoch)
	return err
}

func (d *dest) Broken() bool { return false }

type produceWait struct{ w broker.AppendWaiter }

// Wait maps the broker's refusal to the *mirror.ProduceError a wire
// answer's partition error is, so the copy decides as it does for a
// pusher.
func (p produceWait) Wait(ctx context.Context) error {
	_, err := p.w.Wait(ctx)
	var ke *kerr.Error
	if err != nil && ctx.Err() == nil && errors.As(err, &ke) {
		return &mirror.ProduceError{Err: ke, Message: err.Error()}
	}
	return err
}
