package verify

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/client"
)

// batches walks one partition's batches from an offset up to an end,
// fetching as a consumer.
type batches struct {
	cn        *client.Conn
	topic     string
	partition int32
	isolation int8
	next, end int64
	maxBytes  int32
	buf       [][]byte
	done      bool
	// aborted collects the aborted-transaction entries of read_committed
	// responses, deduplicated.
	aborted []kmsg.FetchResponseTopicPartitionAbortedTransaction
	seen    map[[2]int64]bool
}

func newBatches(cn *client.Conn, topic string, partition int32, from, end int64, isolation int8) *batches {
	return &batches{cn: cn, topic: topic, partition: partition, isolation: isolation, next: from, end: end, maxBytes: 4 << 20, seen: map[[2]int64]bool{}}
}

// Next returns the next batch whose base offset is below end, or nil.
func (b *batches) Next(ctx context.Context) ([]byte, error) {
	for len(b.buf) == 0 {
		if b.done || b.next >= b.end {
			return nil, nil
		}
		res, err := client.FetchPartition(ctx, b.cn, client.FetchArgs{Topic: b.topic, Partition: b.partition, Offset: b.next,
			MaxBytes: b.maxBytes, Isolation: b.isolation, CurrentEpoch: -1, LastFetchedEpoch: -1})
		if err == nil {
			err = res.Err
		}
		if err != nil {
			return nil, fmt.Errorf("fetching %s/%d at %d from %s: %w", b.topic, b.partition, b.next, b.cn.Addr(), err)
		}
		for _, a := range res.Aborted {
			k := [2]int64{a.ProducerID, a.FirstOffset}
			if !b.seen[k] {
				b.seen[k] = true
				b.aborted = append(b.aborted, a)
			}
		}
		bs, partial, err := splitRecordSet(res.Records, b.next)
		if err != nil {
			return nil, fmt.Errorf("%s/%d on %s: %w", b.topic, b.partition, b.cn.Addr(), err)
		}
		if len(bs) == 0 {
			if partial && b.maxBytes < 1<<30 {
				b.maxBytes *= 2
				continue
			}
			b.done = true
			return nil, nil
		}
		b.maxBytes = 4 << 20
		b.buf = bs
		b.next = batchLastOffset(bs[len(bs)-1]) + 1
	}
	out := b.buf[0]
	b.buf = b.buf[1:]
	if baseOffset(out) >= b.end {
		b.done, b.buf = true, nil
		return nil, nil
	}
	return out, nil
}
