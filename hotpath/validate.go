package hotpath

import (
	"context"
	"encoding/binary"
	"math"

	"github.com/verbatim-kafka/verbatim/budget"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// Mode selects the validation rules for a record set.
type Mode uint8

const (
	// Normal is a client produce, validated as Kafka's leader validates it
	// (UnifiedLog.analyzeAndValidateRecords + LogValidator with origin
	// CLIENT): exactly one batch, base offset 0, record count consistent with
	// LastOffsetDelta, no control batches, timestamp bounds, keys on compacted
	// topics. MaxTimestamp and the timestamp type are patched in place (CRC
	// recomputed) exactly when Kafka patches them; the base offset and leader
	// epoch are stamped later by storage's AppendLeader, outside the CRC.
	Normal Mode = iota
	// Verbatim is a mirror produce: the batches are final, as on Kafka's
	// follower path (appendAsFollower). Several batches per set, any base
	// offsets (strictly increasing), compacted shapes, empty batches, the
	// delete-horizon bit and control batches are accepted; nothing is
	// patched and nothing is decompressed.
	Verbatim
)

func (m Mode) String() string {
	if m == Verbatim {
		return "verbatim"
	}
	return "normal"
}

// TopicConfig is what validation needs from the topic's configuration.
type TopicConfig struct {
	// Compacted: cleanup.policy contains "compact". Normal mode then
	// requires a key on every record, which needs record inspection
	// (compressed batches are decompressed, as Kafka does).
	Compacted bool
	// LogAppendTime: message.timestamp.type=LogAppendTime.
	LogAppendTime bool
	// TimestampBeforeMaxMs and TimestampAfterMaxMs are
	// message.timestamp.before.max.ms / after.max.ms (CreateTime topics).
	TimestampBeforeMaxMs int64
	TimestampAfterMaxMs  int64
	// MaxMessageBytes is max.message.bytes, the largest batch accepted in
	// normal mode (0: no limit). Verbatim mode ignores it, as Kafka's
	// follower path does.
	MaxMessageBytes int32
	// MaxDecompressedRecordBytes is Kafka's max.decompressed.message.bytes:
	// the largest record body (declared size) a compressed batch may hold,
	// checked before the body is read (0: no limit). Uncompressed batches
	// are bounded by MaxMessageBytes alone, as in Kafka.
	MaxDecompressedRecordBytes int32
	// MaxDecompressedBatchBytes is Verbatim's max.decompressed.batch.bytes:
	// the most a compressed batch's records section may decompress to
	// (0: no limit); over it the batch gets MESSAGE_TOO_LARGE.
	MaxDecompressedBatchBytes int64
}

// DefaultMaxDecompressedBatchBytes is the default per-batch cap on
// decompressed records (64 MiB).
const DefaultMaxDecompressedBatchBytes = 64 << 20

// DefaultTopicConfig returns Kafka 4's topic defaults.
func DefaultTopicConfig() TopicConfig {
	return TopicConfig{
		TimestampBeforeMaxMs: math.MaxInt64,
		TimestampAfterMaxMs:  3600000,
		MaxMessageBytes:      1048588,
		// Kafka's default: Records.SOFT_MAX_ARRAY_LENGTH.
		MaxDecompressedRecordBytes: math.MaxInt32 - 8,
		MaxDecompressedBatchBytes:  DefaultMaxDecompressedBatchBytes,
	}
}

// Options are the per-call validation inputs.
type Options struct {
	Mode  Mode
	Topic TopicConfig
	// ProduceVersion is the Produce request version (for the "zstd needs
	// v7+" rule); 0 skips version-dependent checks.
	ProduceVersion int16
	// NowMs is the broker time used for timestamp bounds and LogAppendTime.
	NowMs int64
	// Decode, when set, is charged the working memory of decompressing a
	// compressed batch (kbatch.WorkingSet) while normal mode walks its
	// records; Ctx (default context.Background()) bounds the wait for it.
	Decode *budget.Budget
	Ctx    context.Context
}

// Result describes a validated record set. Offsets are absolute in verbatim
// mode and relative to the first record (base 0) in normal mode, where
// storage assigns the real base offset.
type Result struct {
	Batches     int
	Bytes       int
	Records     int64 // sum of the batches' record counts
	FirstOffset int64 // base offset of the first batch
	LastOffset  int64 // last offset of the last batch
	// MaxTimestamp is the largest batch MaxTimestamp (after patching) and
	// OffsetOfMaxTimestamp the offset Kafka records for it.
	MaxTimestamp         int64
	OffsetOfMaxTimestamp int64
	// MaxLeaderEpoch is the largest PartitionLeaderEpoch of the batches
	// as received (verbatim mode; -1 in normal mode, where storage stamps
	// the epoch).
	MaxLeaderEpoch int32
	// LogAppendTimeMs is NowMs on LogAppendTime topics in normal mode, else
	// -1 (the Produce response's log_append_time_ms).
	LogAppendTimeMs int64
	// Patched reports that normal mode rewrote MaxTimestamp/attributes and
	// the CRC.
	Patched bool
}

const noTimestamp = int64(-1)

// maxRecordErrors bounds the per-record error list of one rejection (Kafka
// lists every record; a hostile batch must not make us allocate millions).
const maxRecordErrors = 1024

// Validate checks the record set in place. On success it fills res and, in
// normal mode, may have patched MaxTimestamp/attributes and the CRC inside
// set. It allocates nothing unless it rejects the set (compressed batches
// stream through pooled decoders).
func Validate(set []byte, o *Options, res *Result) error {
	*res = Result{FirstOffset: -1, LastOffset: -1, MaxTimestamp: noTimestamp, OffsetOfMaxTimestamp: -1, MaxLeaderEpoch: -1, LogAppendTimeMs: -1}
	if o.Mode == Verbatim {
		return validateVerbatim(set, res)
	}
	return validateNormal(set, o, res)
}

// frame splits off the batch at the start of b, with Kafka's framing errors
// (ByteBufferLogInputStream.nextBatchSize, DefaultRecordBatch.ensureValid).
// partial is returned (with a nil error) when b ends inside the batch.
func frame(b []byte, idx int, verbatim bool) (batch []byte, partial bool, err *Error) {
	if len(b) < kbatch.LogOverhead {
		return nil, true, nil
	}
	length := int32(binary.BigEndian.Uint32(b[kbatch.LengthOffset:]))
	if length < 14 { // Kafka's LegacyRecord.RECORD_OVERHEAD_V0
		return nil, false, rejectf(codeCorruptMessage, idx, "record size %d is less than the minimum record overhead (14)", length)
	}
	if len(b) <= kbatch.MagicOffset {
		return nil, true, nil
	}
	magic := int8(b[kbatch.MagicOffset])
	if magic < 0 || magic > 2 {
		return nil, false, rejectf(codeCorruptMessage, idx, "invalid magic found in record: %d", magic)
	}
	size := int64(kbatch.LogOverhead) + int64(length)
	if size > int64(len(b)) {
		return nil, true, nil
	}
	if magic != 2 {
		if verbatim {
			return nil, false, rejectf(codeUnsupportedForMessageFormat, idx, "batch has magic %d; only magic 2 record batches are stored", magic)
		}
		return nil, false, rejectf(codeInvalidRecord, idx, "produce requests are only allowed to contain record batches with magic version 2 (got %d)", magic)
	}
	if size < kbatch.HeaderSize {
		return nil, false, rejectf(codeCorruptMessage, idx, "record batch is corrupt (the size %d is smaller than the minimum allowed overhead %d)", size, kbatch.HeaderSize)
	}
	return b[:size:size], false, nil
}

func checkCRC(batch []byte, idx int) *Error {
	stored := kbatch.StoredCRC(batch)
	if computed := kbatch.CRC(batch); computed != stored {
		return rejectf(codeCorruptMessage, idx, "record batch is corrupt (stored crc = %d, computed crc = %d)", stored, computed)
	}
	return nil
}

func validateVerbatim(set []byte, res *Result) error {
	rest := set
	prevLast := int64(-1)
	for idx := 0; len(rest) > 0; idx++ {
		batch, partial, err := frame(rest, idx, true)
		if err != nil {
			return err
		}
		if partial {
			return rejectf(codeCorruptMessage, idx, "record set ends inside a batch (%d trailing bytes)", len(rest))
		}
		if err := checkCRC(batch, idx); err != nil {
			return err
		}
		if err := checkVerbatimHeader(batch, idx, prevLast); err != nil {
			return err
		}
		base := kbatch.BaseOffset(batch)
		last := base + int64(kbatch.LastOffsetDelta(batch))
		if idx == 0 {
			res.FirstOffset = base
		}
		res.LastOffset = last
		prevLast = last
		res.Records += int64(int32(binary.BigEndian.Uint32(batch[kbatch.RecordCountOffset:])))
		if ts := kbatch.MaxTimestamp(batch); ts > res.MaxTimestamp {
			res.MaxTimestamp = ts
			res.OffsetOfMaxTimestamp = last
		}
		res.MaxLeaderEpoch = max(res.MaxLeaderEpoch, kbatch.LeaderEpoch(batch))
		res.Batches++
		res.Bytes += len(batch)
		rest = rest[len(batch):]
	}
	if res.Batches == 0 {
		return rejectf(codeInvalidRecord, -1, "record set holds no record batch")
	}
	return nil
}

// checkVerbatimHeader checks the header shapes a Kafka log can contain:
// compaction may leave fewer records than LastOffsetDelta+1 (even none),
// never more; offsets never overflow and strictly increase along the set.
func checkVerbatimHeader(batch []byte, idx int, prevLast int64) *Error {
	be := binary.BigEndian
	attrs := int16(be.Uint16(batch[kbatch.AttributesOffset:]))
	if codec := attrs & kbatch.CodecMask; codec > int16(kbatch.CodecZstd) {
		return rejectf(codeInvalidRecord, idx, "unknown compression codec id %d", codec)
	}
	base := int64(be.Uint64(batch[kbatch.BaseOffsetOffset:]))
	lod := int32(be.Uint32(batch[kbatch.LastOffsetDeltaOffset:]))
	count := int32(be.Uint32(batch[kbatch.RecordCountOffset:]))
	pid := int64(be.Uint64(batch[kbatch.ProducerIDOffset:]))
	if base < 0 {
		return rejectf(codeInvalidRecord, idx, "negative base offset %d", base)
	}
	if lod < 0 {
		return rejectf(codeInvalidRecord, idx, "negative last offset delta %d", lod)
	}
	if base > math.MaxInt64-int64(lod) {
		return rejectf(codeInvalidRecord, idx, "offset range [%d, %d+%d] overflows", base, base, lod)
	}
	if count < 0 || int64(count) > int64(lod)+1 {
		return rejectf(codeInvalidRecord, idx, "record count %d does not fit offset range of %d offsets", count, int64(lod)+1)
	}
	if base <= prevLast {
		return rejectf(codeInvalidRecord, idx, "base offset %d is not above the previous batch's last offset %d", base, prevLast)
	}
	if attrs&kbatch.TransactionalBit != 0 && pid < 0 {
		return rejectf(codeInvalidRecord, idx, "transactional batch without a producer id")
	}
	if attrs&kbatch.ControlBit != 0 {
		return checkControl(batch, idx, attrs, lod, count, pid)
	}
	return nil
}

// Control record types Verbatim accepts in a data partition. Kafka also
// defines 2-6 (LEADER_CHANGE, SNAPSHOT_HEADER, SNAPSHOT_FOOTER,
// KRAFT_VERSION, KRAFT_VOTERS), which only ever appear in the KRaft
// metadata log, never in a topic partition, so they are refused here.
func knownControlType(t int16) bool {
	return t == kbatch.ControlAbort || t == kbatch.ControlCommit || t == kbatch.ControlMirrorPidReset
}

// checkControl checks a control batch: uncompressed, one record at offset
// delta 0 (or none after compaction), key version 0 with a known type and a
// decodable value.
func checkControl(batch []byte, idx int, attrs int16, lod, count int32, pid int64) *Error {
	if attrs&kbatch.CodecMask != 0 {
		return rejectf(codeInvalidRecord, idx, "control batch is compressed")
	}
	if lod != 0 {
		return rejectf(codeInvalidRecord, idx, "control batch spans %d offsets, want 1", int64(lod)+1)
	}
	if count == 0 {
		return nil // compaction removed the marker but kept the batch
	}
	data := batch[kbatch.HeaderSize:]
	rec, n, msg := scanRecord(data)
	if msg != "" {
		return rejectf(codeInvalidRecord, idx, "control record: %s", msg)
	}
	if n != len(data) {
		return rejectf(codeInvalidRecord, idx, "control batch has %d bytes after its record", len(data)-n)
	}
	if rec.offsetDelta != 0 {
		return rejectf(codeInvalidRecord, idx, "control record offset delta %d, want 0", rec.offsetDelta)
	}
	if rec.keyNull || len(rec.key) < 4 {
		return rejectf(codeInvalidRecord, idx, "control record key has %d bytes, want at least 4", len(rec.key))
	}
	if v := int16(binary.BigEndian.Uint16(rec.key)); v != 0 {
		return rejectf(codeInvalidRecord, idx, "control record key version %d, want 0", v)
	}
	typ := int16(binary.BigEndian.Uint16(rec.key[2:]))
	if !knownControlType(typ) {
		return rejectf(codeInvalidRecord, idx, "control record type %d is not valid in a topic partition", typ)
	}
	if rec.valueNull {
		return rejectf(codeInvalidRecord, idx, "control record of type %d has a null value", typ)
	}
	if typ == kbatch.ControlMirrorPidReset {
		if msg := checkMirrorPidResetValue(rec.value); msg != "" {
			return rejectf(codeInvalidRecord, idx, "MIRROR_PID_RESET value: %s", msg)
		}
		return nil
	}
	// ABORT / COMMIT: EndTransactionMarker value {version int16, coordinator
	// epoch int32}; later versions may append fields, so only the prefix is
	// checked (as Kafka's EndTransactionMarker.deserializeValue does).
	if attrs&kbatch.TransactionalBit == 0 || pid < 0 {
		return rejectf(codeInvalidRecord, idx, "transaction marker outside a transactional batch with a producer id")
	}
	if len(rec.value) < 6 {
		return rejectf(codeInvalidRecord, idx, "transaction marker value has %d bytes, want at least 6", len(rec.value))
	}
	if v := int16(binary.BigEndian.Uint16(rec.value)); v < 0 {
		return rejectf(codeInvalidRecord, idx, "transaction marker value version %d", v)
	}
	return nil
}

// checkMirrorPidResetValue decodes MirrorPidResetRecord{Version int16,
// SourceClusterId compact string, tagged fields} (flexible from version 0).
func checkMirrorPidResetValue(v []byte) string {
	if len(v) < 2 {
		return "shorter than its version"
	}
	if ver := int16(binary.BigEndian.Uint16(v)); ver < 0 {
		return "negative version"
	}
	v = v[2:]
	l, n := binary.Uvarint(v)
	if n <= 0 || l == 0 || l-1 > uint64(len(v)-n) {
		return "bad SourceClusterId"
	}
	t := wireext.ReadTags(v[n+int(l-1):])
	if t.Err() != nil || t.Left() > len(t.Rest()) {
		return "bad tagged fields"
	}
	for t.Next() {
	}
	switch t.Err() {
	case wireext.ErrTag:
		return "bad tag"
	case wireext.ErrTagSize:
		return "bad tag size"
	}
	v = t.Rest()
	if len(v) != 0 {
		return "trailing bytes"
	}
	return ""
}

func validateNormal(set []byte, o *Options, res *Result) error {
	batch, partial, err := frame(set, 0, false)
	if err != nil {
		return err
	}
	if partial {
		return rejectf(codeInvalidRecord, -1, "produce requests must have at least one record batch per partition")
	}
	be := binary.BigEndian
	attrs := int16(be.Uint16(batch[kbatch.AttributesOffset:]))
	codec := kbatch.Codec(attrs & kbatch.CodecMask)
	if o.ProduceVersion > 0 && o.ProduceVersion < 7 && codec == kbatch.CodecZstd {
		return rejectf(codeUnsupportedCompressionType, 0, "produce requests with version %d are not allowed to use ZStandard compression", o.ProduceVersion)
	}
	if len(batch) != len(set) {
		return rejectf(codeInvalidRecord, 1, "produce requests are only allowed to contain exactly one record batch per partition")
	}
	if base := int64(be.Uint64(batch)); base != 0 {
		return rejectf(codeInvalidRecord, 0, "the baseOffset of the record batch should be 0, but it is %d", base)
	}
	if max := o.Topic.MaxMessageBytes; max > 0 && len(batch) > int(max) {
		return rejectf(codeMessageTooLarge, 0, "the record batch size is %d bytes which exceeds the maximum configured value of %d", len(batch), max)
	}
	if err := checkCRC(batch, 0); err != nil {
		return err
	}
	if codec > kbatch.CodecZstd {
		return rejectf(codeInvalidRecord, 0, "unknown compression codec id %d", codec)
	}
	lod := int32(be.Uint32(batch[kbatch.LastOffsetDeltaOffset:]))
	count := int32(be.Uint32(batch[kbatch.RecordCountOffset:]))
	pid := int64(be.Uint64(batch[kbatch.ProducerIDOffset:]))
	seq := int32(be.Uint32(batch[kbatch.BaseSequenceOffset:]))
	if countFromOffsets := int64(lod) + 1; countFromOffsets <= 0 {
		return rejectf(codeInvalidRecord, 0, "batch has an invalid offset range: [0, %d]", lod)
	}
	if count <= 0 {
		return rejectf(codeInvalidRecord, 0, "invalid reported count for record batch: %d", count)
	}
	if int64(count) != int64(lod)+1 {
		return rejectf(codeInvalidRecord, 0, "inconsistent batch offset range [0, %d] and count of records %d", lod, count)
	}
	if attrs&kbatch.ControlBit != 0 {
		return rejectf(codeInvalidRecord, 0, "clients are not allowed to write control records")
	}
	if pid >= 0 && seq < 0 {
		return rejectf(codeInvalidRecord, 0, "invalid sequence number %d in record batch with producerId %d", seq, pid)
	}
	if attrs&kbatch.TransactionalBit != 0 && pid < 0 {
		return rejectf(codeInvalidRecord, 0, "transactional batch without a producer id")
	}

	batchLAT := attrs&kbatch.TimestampTypeBit != 0
	headerMax := int64(be.Uint64(batch[kbatch.MaxTimestampOffset:]))
	var rs recordStats
	var e *Error
	if codec == kbatch.CodecNone {
		e = walkRecords(batch[kbatch.HeaderSize:], batch, o, count, &rs)
	} else {
		e = walkCompressed(batch, o, codec, &rs)
	}
	if e != nil {
		return e
	}

	// Patch MaxTimestamp and the timestamp type as Kafka's
	// DefaultRecordBatch.setMaxTimestamp does: only when either changes,
	// rebuilding the attributes from the known bits, then the CRC.
	wantLAT := o.Topic.LogAppendTime
	newMax := rs.maxTS
	if wantLAT {
		newMax = o.NowMs
	}
	if batchLAT != wantLAT || headerMax != newMax {
		newAttrs := attrs & (kbatch.CodecMask | kbatch.TransactionalBit | kbatch.ControlBit | kbatch.DeleteHorizonBit)
		if wantLAT {
			newAttrs |= kbatch.TimestampTypeBit
		}
		be.PutUint16(batch[kbatch.AttributesOffset:], uint16(newAttrs))
		be.PutUint64(batch[kbatch.MaxTimestampOffset:], uint64(newMax))
		kbatch.SetCRC(batch)
		res.Patched = true
	}

	res.Batches = 1
	res.Bytes = len(batch)
	res.Records = int64(count)
	res.FirstOffset = 0
	res.LastOffset = int64(lod)
	res.MaxTimestamp = newMax
	res.OffsetOfMaxTimestamp = rs.maxIndex
	if wantLAT {
		res.LogAppendTimeMs = o.NowMs
		res.OffsetOfMaxTimestamp = int64(lod)
		if codec != kbatch.CodecNone {
			res.OffsetOfMaxTimestamp = 0 // Kafka's compressed path records the first offset
		}
	}
	return nil
}

type recordStats struct {
	maxTS    int64
	maxIndex int64
}

// timestampError returns Kafka's per-record timestamp verdict
// (LogValidator.validateTimestamp) or "".
func timestampError(o *Options, batchLAT bool, ts int64) (string, bool) {
	if !o.Topic.LogAppendTime && ts != noTimestamp {
		diff := o.NowMs - ts // wraps like Java's long arithmetic
		if diff > o.Topic.TimestampBeforeMaxMs || -diff > o.Topic.TimestampAfterMaxMs {
			return "timestamp is out of range", true
		}
		return "", false
	}
	if batchLAT {
		return "producer should not set timestamp type to LogAppendTime", true
	}
	return "", false
}

// walkRecords iterates the records of an uncompressed normal-mode batch
// in place (data is its records section), with Kafka's structure errors
// (INVALID_RECORD for the partition) and per-record key and timestamp
// errors (reported with their record index).
func walkRecords(data, batch []byte, o *Options, count int32, rs *recordStats) *Error {
	chk := newRecordCheck(batch, o, false)
	for i := int32(0); i < count; i++ {
		rec, n, msg := scanRecord(data)
		if msg != "" {
			return rejectf(codeInvalidRecord, 0, "record %d: %s", i, msg)
		}
		data = data[n:]
		if e := chk.record(i, rec.offsetDelta, rec.tsDelta, rec.keyNull); e != nil {
			return e
		}
	}
	if len(data) != 0 {
		return rejectf(codeInvalidRecord, 0, "incorrect declared batch size, %d bytes remain after %d records", len(data), count)
	}
	return chk.done(rs)
}

// recordCheck applies Kafka's per-record rules (LogValidator.validateRecord:
// keys on compacted topics, timestamps; in-place offsets in compressed
// batches) and keeps the batch's largest timestamp.
type recordCheck struct {
	o               *Options
	base, headerMax int64
	batchLAT        bool
	compressed      bool
	errs            []RecordError
	tsErr           bool
	// stats is kept by value (a pointer to the caller's would leak it to
	// the heap with errs); done copies it out.
	stats recordStats
}

func newRecordCheck(batch []byte, o *Options, compressed bool) recordCheck {
	be := binary.BigEndian
	return recordCheck{
		o:          o,
		base:       int64(be.Uint64(batch[kbatch.BaseTimestampOffset:])),
		headerMax:  int64(be.Uint64(batch[kbatch.MaxTimestampOffset:])),
		batchLAT:   be.Uint16(batch[kbatch.AttributesOffset:])&kbatch.TimestampTypeBit != 0,
		compressed: compressed,
		stats:      recordStats{maxTS: noTimestamp, maxIndex: -1},
	}
}

// record checks record i; a non-nil result refuses the whole batch.
func (c *recordCheck) record(i, offsetDelta int32, tsDelta int64, keyNull bool) *Error {
	if c.compressed && offsetDelta != i {
		// Kafka rebuilds such batches; Verbatim never re-encodes.
		return rejectf(codeInvalidRecord, 0, "record %d has offset delta %d in a compressed batch", i, offsetDelta)
	}
	if c.o.Topic.Compacted && keyNull {
		if len(c.errs) < maxRecordErrors {
			c.errs = append(c.errs, RecordError{Index: i, Message: "compacted topic cannot accept message without key"})
		}
		return nil
	}
	ts := c.base + tsDelta
	if c.batchLAT {
		ts = c.headerMax
	}
	if m, bad := timestampError(c.o, c.batchLAT, ts); bad {
		c.tsErr = true
		if len(c.errs) < maxRecordErrors {
			c.errs = append(c.errs, RecordError{Index: i, Message: m})
		}
		return nil
	}
	if ts > c.stats.maxTS {
		c.stats.maxTS, c.stats.maxIndex = ts, int64(i)
	}
	return nil
}

// done stores the batch's largest timestamp in rs and returns the
// per-record errors, if any.
func (c *recordCheck) done(rs *recordStats) *Error {
	*rs = c.stats
	return recordErrors(c.errs, c.tsErr)
}

func recordErrors(errs []RecordError, tsErr bool) *Error {
	if len(errs) == 0 {
		return nil
	}
	if tsErr {
		return &Error{Code: codeInvalidTimestamp, Batch: 0, Records: errs, Msg: "one or more records have been rejected due to invalid timestamp"}
	}
	return &Error{Code: codeInvalidRecord, Batch: 0, Records: errs, Msg: "one or more records have been rejected"}
}
