package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"sort"
	"strings"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/kbatch"
)

// Statuses of a partition.
const (
	Identical            = "identical"
	SourceCompactedSince = "source-compacted-since"
	Mismatch             = "mismatch"
)

// Options configure a verification.
type Options struct {
	Source, Dest string
	// SourceClient and DestClient secure and authenticate the
	// connections to each side (--source-config, --dest-config); a zero
	// ClientID is "verbatim-verify".
	SourceClient, DestClient client.Options
	Topics                   []string
	// Groups, when set, selects consumer groups whose committed offsets
	// for the topics are compared.
	Groups *regexp.Regexp
	Logger *slog.Logger
}

// FirstMismatch locates the first difference found in a partition.
type FirstMismatch struct {
	Offset int64  `json:"offset"`
	Field  string `json:"field"`
	// Detail says what each side holds, for humans.
	Detail string `json:"detail,omitempty"`
}

// PartitionReport is one partition's verdict.
type PartitionReport struct {
	Topic         string         `json:"topic"`
	Partition     int32          `json:"partition"`
	Batches       int64          `json:"batches"`
	Bytes         int64          `json:"bytes"`
	Status        string         `json:"status"`
	FirstMismatch *FirstMismatch `json:"first_mismatch"`
	// CommonRange is [from, to) of offsets both sides hold.
	CommonRange [2]int64 `json:"common_range"`
	// Checks lists what was compared beyond the batch bytes.
	Checks []string `json:"checks"`
	// Undecodable lists (up to 16) identical compressed batches whose
	// records cannot be decompressed or read: the mirror holds the
	// source's bytes, but no consumer can read them.
	Undecodable []UndecodableBatch `json:"undecodable,omitempty"`
}

// GroupReport compares one committed group offset.
type GroupReport struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// SourceOffset is the source's commit, Expected that offset clamped
	// into the destination's range, DestOffset the destination's commit
	// (-1: none).
	SourceOffset int64  `json:"source_offset"`
	Expected     int64  `json:"expected_offset"`
	DestOffset   int64  `json:"dest_offset"`
	Status       string `json:"status"`
	// Field names the first difference: offset, leader_epoch, metadata.
	Field string `json:"field,omitempty"`
}

// Topic id verdicts (TopicReport.TopicIDs).
const (
	TopicIDsEqual     = "equal"
	TopicIDsDifferent = "different"
	TopicIDsMissing   = "missing" // the destination has no such topic
)

// TopicReport compares a topic's ids (KIP-516). It is informative: the
// id is the topic's identity, not its data, so a destination created
// without the source's id (by hand, or by a pusher or Verbatim from before
// topic ids were kept) can still hold the data exactly and Exact does not
// depend on it. `mirror push --create-topics` into a Verbatim that lists
// verbatim.client.topic.id always gives equal ids.
type TopicReport struct {
	Topic         string `json:"topic"`
	SourceTopicID string `json:"source_topic_id"`
	DestTopicID   string `json:"dest_topic_id"`
	TopicIDs      string `json:"topic_ids"`
}

// Report is the whole verdict.
type Report struct {
	Exact      bool              `json:"exact"`
	Partitions []PartitionReport `json:"partitions"`
	Groups     []GroupReport     `json:"groups,omitempty"`
	Topics     []TopicReport     `json:"topics"`
}

// Run verifies every partition of the topics. The error is non-nil only
// when the verification could not run (exit 2); mismatches are in the
// report.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Source == "" || o.Dest == "" || len(o.Topics) == 0 {
		return nil, errors.New("--source, --dest and --topics are required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	for _, co := range []*client.Options{&o.SourceClient, &o.DestClient} {
		if co.ClientID == "" {
			co.ClientID = "verbatim-verify"
		}
	}
	src, err := client.NewCluster(o.Source, o.SourceClient)
	if err != nil {
		return nil, fmt.Errorf("--source: %v", err)
	}
	defer src.Close()
	dst, err := client.NewCluster(o.Dest, o.DestClient)
	if err != nil {
		return nil, fmt.Errorf("--dest: %v", err)
	}
	defer dst.Close()
	smd, err := src.Metadata(ctx, o.Topics)
	if err != nil {
		return nil, fmt.Errorf("source metadata: %v", err)
	}
	dmd, err := dst.Metadata(ctx, o.Topics)
	if err != nil {
		return nil, fmt.Errorf("destination metadata: %v", err)
	}
	rep := &Report{Exact: true}
	for _, name := range o.Topics {
		st := smd[name]
		if st == nil || st.Err != nil {
			return nil, fmt.Errorf("source topic %s: %v", name, topicErr(st))
		}
		compacted, err := isCompacted(ctx, src, name)
		if err != nil {
			return nil, fmt.Errorf("source configs of %s: %v", name, err)
		}
		dt := dmd[name]
		destCompacted := false
		if compacted && dt != nil && dt.Err == nil {
			if destCompacted, err = isCompacted(ctx, dst, name); err != nil {
				return nil, fmt.Errorf("destination configs of %s: %v", name, err)
			}
		}
		tr := TopicReport{Topic: name, SourceTopicID: client.FormatTopicID(st.ID), TopicIDs: TopicIDsMissing}
		if dt != nil && dt.Err == nil {
			tr.DestTopicID = client.FormatTopicID(dt.ID)
			tr.TopicIDs = TopicIDsDifferent
			if dt.ID == st.ID {
				tr.TopicIDs = TopicIDsEqual
			}
		}
		rep.Topics = append(rep.Topics, tr)
		for i := range st.Partitions {
			pr := PartitionReport{Topic: name, Partition: int32(i), Status: Identical, Checks: []string{}}
			switch {
			case dt == nil || dt.Err != nil:
				pr.Status = Mismatch
				pr.FirstMismatch = &FirstMismatch{Offset: -1, Field: "topic", Detail: fmt.Sprintf("destination: %v", topicErr(dt))}
			case i >= len(dt.Partitions):
				pr.Status = Mismatch
				pr.FirstMismatch = &FirstMismatch{Offset: -1, Field: "partition", Detail: fmt.Sprintf("the destination has %d partitions", len(dt.Partitions))}
			default:
				// When both sides are compacted, either cleaner may
				// change its log between verify's reads (the batches
				// compared, then the offsets looked up), so a mismatch
				// there is confirmed only when it repeats: cleaning
				// only moves forward, and an altered record stays
				// altered.
				for attempt := 1; ; attempt++ {
					pr = PartitionReport{Topic: name, Partition: int32(i), Status: Identical, Checks: []string{}}
					v := &partitionCheck{src: src, dst: dst, topic: name, part: int32(i), compacted: compacted,
						bothCompacted: destCompacted, rep: &pr, log: o.Logger}
					if err := v.run(ctx); err != nil {
						return nil, fmt.Errorf("%s/%d: %v", name, i, err)
					}
					if pr.Status != Mismatch || !destCompacted || attempt == compactedAttempts {
						break
					}
					if o.Logger != nil && pr.FirstMismatch != nil {
						o.Logger.Debug("mismatch on a partition both sides compact; checking again", "topic", name, "partition", i,
							"field", pr.FirstMismatch.Field, "attempt", attempt)
					}
				}
			}
			if pr.Status == Mismatch {
				rep.Exact = false
			}
			rep.Partitions = append(rep.Partitions, pr)
		}
		if dt != nil && dt.Err == nil && len(dt.Partitions) > len(st.Partitions) {
			rep.Exact = false
			rep.Partitions = append(rep.Partitions, PartitionReport{Topic: name, Partition: int32(len(st.Partitions)), Status: Mismatch, Checks: []string{},
				FirstMismatch: &FirstMismatch{Offset: -1, Field: "partition", Detail: fmt.Sprintf("the destination has %d partitions, the source %d", len(dt.Partitions), len(st.Partitions))}})
		}
	}
	if o.Groups != nil {
		if err := compareGroups(ctx, src, dst, o, rep); err != nil {
			return nil, fmt.Errorf("groups: %v", err)
		}
	}
	return rep, nil
}

func topicErr(t *client.TopicMeta) error {
	if t == nil {
		return client.ErrTopicMissing
	}
	return t.Err
}

// compactedAttempts is how many times a partition both sides compact is
// checked before a mismatch is reported.
const compactedAttempts = 3

// isCompacted reports whether the source topic's cleanup.policy includes
// compact.
func isCompacted(ctx context.Context, cl *client.Cluster, topic string) (bool, error) {
	cfg, err := client.TopicConfigValues(ctx, cl, topic, "cleanup.policy")
	if err != nil {
		return false, err
	}
	return strings.Contains(cfg["cleanup.policy"], "compact"), nil
}

// partitionCheck verifies one partition.
type partitionCheck struct {
	src, dst       *client.Cluster
	sc, dc         *client.Conn
	topic          string
	part           int32
	compacted      bool
	bothCompacted  bool // the destination is compacted too: it may clean its own log
	lso            [2]int64
	rep            *PartitionReport
	log            *slog.Logger
	minEp, maxEp   int32
	epochs         map[int32]bool // batch epochs seen
	transactional  bool
	sampleTimes    []int64
	compactedSince bool
	equiv          bool // compared by the compacted-equivalent rule
}

func (v *partitionCheck) mismatch(offset int64, field, format string, args ...any) {
	if v.rep.FirstMismatch != nil {
		return
	}
	v.rep.Status = Mismatch
	v.rep.FirstMismatch = &FirstMismatch{Offset: offset, Field: field, Detail: fmt.Sprintf(format, args...)}
}

func (v *partitionCheck) run(ctx context.Context) error {
	var err error
	if v.sc, _, err = v.src.Leader(ctx, v.topic, v.part); err != nil {
		return fmt.Errorf("source: %w", err)
	}
	var dstEpoch int32
	if v.dc, dstEpoch, err = v.dst.Leader(ctx, v.topic, v.part); err != nil {
		return fmt.Errorf("destination: %w", err)
	}
	type lo struct {
		name      string
		ts        int64
		isolation int8
	}
	views := []lo{{"earliest", client.Earliest, client.ReadUncommitted}, {"latest", client.Latest, client.ReadUncommitted},
		{"last_stable", client.Latest, client.ReadCommitted}, {"max_timestamp", client.MaxTimestamp, client.ReadUncommitted}}
	sv := make([]client.OffsetAnswer, len(views))
	dv := make([]client.OffsetAnswer, len(views))
	for i, w := range views {
		if sv[i], err = client.ListOffset(ctx, v.sc, v.topic, v.part, w.ts, w.isolation); err != nil {
			return fmt.Errorf("source: %w", err)
		}
		if dv[i], err = client.ListOffset(ctx, v.dc, v.topic, v.part, w.ts, w.isolation); err != nil {
			return fmt.Errorf("destination: %w", err)
		}
	}
	from := max(sv[0].Offset, dv[0].Offset)
	to := min(sv[1].Offset, dv[1].Offset)
	if to < from {
		to = from
	}
	v.rep.CommonRange = [2]int64{from, to}
	v.minEp, v.maxEp = -1, -1
	v.epochs = map[int32]bool{}
	v.lso = [2]int64{sv[2].Offset, dv[2].Offset}

	if err := v.compareBatches(ctx, from, to); err != nil {
		return err
	}
	switch {
	case v.rep.Status == Mismatch:
	case v.equiv:
		v.rep.Status = CompactedEquivalent
	case v.compactedSince:
		v.rep.Status = SourceCompactedSince
	}
	// The views of I4: ListOffsets and the last stable offset. After the
	// source compacted, timestamps may legitimately differ.
	for i, w := range views {
		if v.compactedSince && w.name == "max_timestamp" {
			continue
		}
		v.rep.Checks = append(v.rep.Checks, "list_offsets."+w.name)
		if sv[i].Offset != dv[i].Offset || (w.name == "max_timestamp" && sv[i].Timestamp != dv[i].Timestamp) {
			v.mismatch(sv[i].Offset, "list_offsets."+w.name, "source offset %d timestamp %d, destination offset %d timestamp %d", sv[i].Offset, sv[i].Timestamp, dv[i].Offset, dv[i].Timestamp)
		}
	}
	v.compareEarliestEpoch(sv[0], dv[0], dv[1].Offset)
	if !v.compactedSince {
		for _, ts := range v.sampleTimes {
			s, err := client.ListOffset(ctx, v.sc, v.topic, v.part, ts, client.ReadUncommitted)
			if err != nil {
				return fmt.Errorf("source: %w", err)
			}
			d, err := client.ListOffset(ctx, v.dc, v.topic, v.part, ts, client.ReadUncommitted)
			if err != nil {
				return fmt.Errorf("destination: %w", err)
			}
			if s.Offset != d.Offset || s.Timestamp != d.Timestamp {
				v.mismatch(s.Offset, "list_offsets.timestamp", "for timestamp %d the source answers offset %d (timestamp %d), the destination offset %d (timestamp %d)", ts, s.Offset, s.Timestamp, d.Offset, d.Timestamp)
			}
		}
		if len(v.sampleTimes) > 0 {
			v.rep.Checks = append(v.rep.Checks, fmt.Sprintf("list_offsets.by_timestamp(%d)", len(v.sampleTimes)))
		}
	}
	// I3: OffsetForLeaderEpoch for every epoch with batches and the ones
	// between them.
	if v.minEp >= 0 {
		for _, e := range epochsToAsk(v.epochs) {
			s, err := client.OffsetForLeaderEpoch(ctx, v.sc, v.topic, v.part, e)
			if err != nil {
				return fmt.Errorf("source: %w", err)
			}
			d, err := client.OffsetForLeaderEpoch(ctx, v.dc, v.topic, v.part, e)
			if err != nil {
				return fmt.Errorf("destination: %w", err)
			}
			if s != d {
				// A compacted source may have cleaned away the first
				// batches of the next epoch: its cache still starts that
				// epoch where the leader was elected, the destination's
				// (built from batches) at the first surviving batch. With
				// no source record in between, both answers mean the same.
				same, err := v.compactedGap(ctx, s, d)
				if err != nil {
					return err
				}
				if same {
					v.compactedSince = true
					if v.rep.Status == Identical && !v.equiv {
						v.rep.Status = SourceCompactedSince
					}
					continue
				}
				v.mismatch(s.EndOffset, "offset_for_leader_epoch", "epoch %d: source answers epoch %d end offset %d, destination epoch %d end offset %d", e, s.LeaderEpoch, s.EndOffset, d.LeaderEpoch, d.EndOffset)
			}
		}
		v.rep.Checks = append(v.rep.Checks, fmt.Sprintf("offset_for_leader_epoch(%d-%d)", v.minEp, v.maxEp))
		v.rep.Checks = append(v.rep.Checks, fmt.Sprintf("offset_for_leader_epoch.asked(%d)", len(epochsToAsk(v.epochs))))
	}
	// I3: the destination's current leader epoch must be at least every
	// stored batch epoch, or re-pointed consumers loop on metadata.
	if v.maxEp >= 0 {
		v.rep.Checks = append(v.rep.Checks, "leader_epoch_ahead")
		if dstEpoch < v.maxEp {
			v.mismatch(-1, "leader_epoch", "the destination's partition leader epoch %d is below the stored batch epoch %d", dstEpoch, v.maxEp)
		}
	}
	// I4/I5: what read_committed consumers drop, by meaning.
	if v.transactional && !v.equiv { // equivalent compared them record by record
		upto := min(sv[2].Offset, dv[2].Offset)
		if err := v.compareAborted(ctx, from, upto); err != nil {
			return err
		}
		v.rep.Checks = append(v.rep.Checks, "aborted_transactions")
	}
	return nil
}

// compareBatches compares every batch of [from, to) byte for byte. On a
// compacted source, a difference starts a record-level check that the
// destination is a superset of the source.
func (v *partitionCheck) compareBatches(ctx context.Context, from, to int64) error {
	si := newBatches(v.sc, v.topic, v.part, from, to, client.ReadUncommitted)
	di := newBatches(v.dc, v.topic, v.part, from, to, client.ReadUncommitted)
	var nb int
	for {
		s, err := si.Next(ctx)
		if err != nil {
			return fmt.Errorf("source: %w", err)
		}
		d, err := di.Next(ctx)
		if err != nil {
			return fmt.Errorf("destination: %w", err)
		}
		if s == nil && d == nil {
			return nil
		}
		if s == nil || d == nil {
			if v.compacted && (s == nil || v.bothCompacted) {
				// The source cleaned away batches the destination still
				// has (the superset check decides), or the destination
				// cleaned too.
				return v.compactedCompare(ctx, from, to)
			}
			side, b := "source", d
			if d == nil {
				side, b = "destination", s
			}
			v.mismatch(baseOffset(b), "batch_missing", "the %s has no batch where the other has one at offset %d", side, baseOffset(b))
			return nil
		}
		if f := diffBatch(s, d); f != "" {
			if v.compacted {
				return v.compactedCompare(ctx, from, to)
			}
			off := min(baseOffset(s), baseOffset(d))
			v.mismatch(off, f, "source batch %s, destination batch %s", describe(s), describe(d))
			return nil
		}
		v.note(s)
		if u := checkDecodable(d); u != nil && len(v.rep.Undecodable) < maxUndecodable {
			v.rep.Undecodable = append(v.rep.Undecodable, *u)
		}
		nb++
		v.rep.Batches++
		v.rep.Bytes += int64(len(s))
		if nb%64 == 1 && len(v.sampleTimes) < maxTimestampSamples && kbatch.Attributes(s)&kbatch.ControlBit == 0 {
			h, _ := kbatch.ParseHeader(s)
			v.sampleTimes = append(v.sampleTimes, h.MaxTimestamp)
		}
	}
}

// note records the epochs and transactionality of an identical batch.
func (v *partitionCheck) note(b []byte) {
	e := kbatch.LeaderEpoch(b)
	v.epochs[e] = true
	if v.minEp < 0 || e < v.minEp {
		v.minEp = e
	}
	if e > v.maxEp {
		v.maxEp = e
	}
	if kbatch.Attributes(b)&kbatch.TransactionalBit != 0 {
		v.transactional = true
	}
}

func describe(b []byte) string {
	h, err := kbatch.ParseHeader(b)
	if err != nil {
		return fmt.Sprintf("(%d bytes, unreadable header)", len(b))
	}
	return fmt.Sprintf("[offsets %d-%d epoch %d attributes %#x producer %d/%d seq %d timestamps %d-%d crc %08x, %d bytes]",
		h.BaseOffset, h.LastOffset(), h.LeaderEpoch, h.Attributes, h.ProducerID, h.ProducerEpoch, h.BaseSequence, h.BaseTimestamp, h.MaxTimestamp, h.CRC, len(b))
}

// compareAborted compares, over [from, upto), which producer's data a
// read_committed consumer drops on each side.
func (v *partitionCheck) compareAborted(ctx context.Context, from, upto int64) error {
	collect := func(cn *client.Conn) ([]abortedRange, error) {
		it := newBatches(cn, v.topic, v.part, from, upto, client.ReadCommitted)
		var bs [][]byte
		for {
			b, err := it.Next(ctx)
			if err != nil {
				return nil, err
			}
			if b == nil {
				break
			}
			bs = append(bs, b)
		}
		return abortedData(bs, it.aborted), nil
	}
	sa, err := collect(v.sc)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	da, err := collect(v.dc)
	if err != nil {
		return fmt.Errorf("destination: %w", err)
	}
	for i := 0; i < max(len(sa), len(da)); i++ {
		switch {
		case i >= len(sa):
			v.mismatch(da[i].first, "aborted_transactions", "the destination treats %s as aborted, the source does not", da[i])
			return nil
		case i >= len(da):
			v.mismatch(sa[i].first, "aborted_transactions", "the source treats %s as aborted, the destination does not", sa[i])
			return nil
		case sa[i] != da[i]:
			v.mismatch(min(sa[i].first, da[i].first), "aborted_transactions", "source aborts %s, destination %s", sa[i], da[i])
			return nil
		}
	}
	return nil
}

// maxTimestampSamples bounds the by-timestamp ListOffsets comparisons.
const maxTimestampSamples = 64

// epochsToAsk are the epochs OffsetForLeaderEpoch is compared for: every
// epoch with batches, and one epoch inside each range between two of them
// (all epochs of a range answer alike: the start of the next epoch).
func epochsToAsk(seen map[int32]bool) []int32 {
	es := make([]int32, 0, len(seen))
	for e := range seen {
		es = append(es, e)
	}
	sort.Slice(es, func(i, j int) bool { return es[i] < es[j] })
	var out []int32
	for i, e := range es {
		out = append(out, e)
		if i+1 < len(es) && es[i+1] > e+1 {
			out = append(out, e+1)
		}
	}
	return out
}

// compareEarliestEpoch compares the leader epochs ListOffsets EARLIEST
// answers (I3, I4): the source's cache starts its first epoch where that
// epoch began even when the batches there were compacted away, and the
// destination must answer the same (the pusher forwards it with the log
// start). A destination that holds no batch (log start = its log end
// destEnd) cannot know an epoch nobody wrote batches in (a leader elected
// with no writes), so it is not compared then.
func (v *partitionCheck) compareEarliestEpoch(s, d client.OffsetAnswer, destEnd int64) {
	if d.Offset >= destEnd {
		return
	}
	v.rep.Checks = append(v.rep.Checks, "list_offsets.earliest.leader_epoch")
	if s.LeaderEpoch != d.LeaderEpoch {
		v.mismatch(s.Offset, "list_offsets.earliest.leader_epoch", "at the log start the source answers leader epoch %d, the destination %d", s.LeaderEpoch, d.LeaderEpoch)
	}
}
