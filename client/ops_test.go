package client

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestListOffsets: one request answers several partitions of two topics
// at their own timestamps, in the order asked, with a partition's error
// (a topic the broker does not have) kept to that partition.
func TestListOffsets(t *testing.T) {
	s := startSessionSource(t, 3) // t/0 and t/1 hold 3 records each, t/2 none
	var asked []*kmsg.ListOffsetsRequest
	s.c.ControlKey(kmsg.ListOffsets.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		s.c.KeepControl()
		asked = append(asked, r.(*kmsg.ListOffsetsRequest))
		return nil, nil, false
	})
	ctx, cn := s.dial(t)
	qs := []OffsetQuery{
		{TopicPartition{"t", 1}, Latest},
		{TopicPartition{"missing", 0}, Latest},
		{TopicPartition{"t", 0}, Earliest},
		{TopicPartition{"t", 2}, Latest},
	}
	as, errs, err := ListOffsets(ctx, cn, ReadUncommitted, qs)
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{3, 0, 0, 0}
	for i, q := range qs {
		if q.Topic == "missing" {
			if !errors.Is(errs[i], kerr.UnknownTopicOrPartition) {
				t.Errorf("%s/%d: error %v, want UNKNOWN_TOPIC_OR_PARTITION", q.Topic, q.Partition, errs[i])
			}
			continue
		}
		if errs[i] != nil || as[i].Offset != want[i] {
			t.Errorf("%s/%d at %d: %+v %v, want offset %d", q.Topic, q.Partition, q.Timestamp, as[i], errs[i], want[i])
		}
	}
	if len(asked) != 1 || len(asked[0].Topics) != 2 {
		t.Fatalf("%d ListOffsets requests (%+v), want one naming both topics", len(asked), asked)
	}
	// The one-partition form is the same request with one partition.
	a, err := ListOffset(ctx, cn, "t", 0, Latest, ReadUncommitted)
	if err != nil || a.Offset != 3 {
		t.Fatalf("ListOffset t/0: %+v %v, want offset 3", a, err)
	}
}
