package main

import (
	"encoding/binary"
	"strconv"

	"github.com/verbatim-kafka/verbatim/policies/sdk"
)

var policy = sdk.Policy{Name: "control-records", Needs: sdk.NeedControlBytes, Judge: judge}

func init() { sdk.Register(policy) }

const (
	typeAbort          = 0
	typeCommit         = 1
	typeMirrorPidReset = 7
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func judge(in sdk.Input, v *sdk.Verdicts) {
	for i, n := 0, in.NumBatches(); i < n; i++ {
		if !in.IsControl(i) {
			continue
		}
		b := in.Batch(i)
		if in.MirrorMode() == sdk.ModeNone {
			v.Reject(i, sdk.InvalidRecord, "control batches are written by the broker, not by clients (topic is not a mirror)")
			continue
		}
		if why := check(&b); why != "" {
			v.Reject(i, sdk.InvalidRecord, why)
		}
	}
}

// check returns why a control batch is refused, or "".
func check(b *sdk.Batch) string {
	h := &b.Header
	attrs := uint16(h.Attributes)
	switch {
	case attrs&^0x7f != 0:
		return "attribute bits 0x" + strconv.FormatUint(uint64(attrs&^0x7f), 16) + " are not defined"
	case attrs&0x07 != 0:
		return "control batch is compressed"
	case h.LastOffsetDelta != 0:
		return "control batch spans " + itoa(int64(h.LastOffsetDelta)+1) + " offsets, Kafka writes 1"
	case h.RecordCount == 0:
		return "" // compaction removed the marker and kept the batch
	case h.RecordCount != 1:
		return "control batch holds " + itoa(int64(h.RecordCount)) + " records, Kafka writes 1"
	case b.Bytes == nil:
		return "control batch bytes missing"
	}
	rec, n, err := sdk.FirstRecord(b.Bytes)
	switch {
	case err != nil:
		return "malformed control record: " + err.Error()
	case n != 1:
		return "control batch data holds " + itoa(int64(n)) + " records, its header says 1"
	case rec.OffsetDelta != 0:
		return "control record offset delta " + itoa(rec.OffsetDelta) + ", want 0"
	case rec.KeyNull || len(rec.Key) < 4:
		return "control record key has " + itoa(int64(len(rec.Key))) + " bytes, want at least 4"
	}
	keyVersion, _ := rec.KeyVersion()
	typ, _ := rec.Type()
	if keyVersion < 0 {
		return "control record key version " + itoa(int64(keyVersion)) + " is negative"
	}
	switch typ {
	case typeAbort, typeCommit:
		switch {
		case attrs&0x10 == 0:
			return "transaction marker in a non-transactional batch"
		case h.ProducerID < 0:
			return "transaction marker without a producer id"
		case rec.ValueNull || len(rec.Value) < 6:
			return "transaction marker value has " + itoa(int64(len(rec.Value))) + " bytes, want at least 6"
		case int16(binary.BigEndian.Uint16(rec.Value)) < 0:
			return "transaction marker value version is negative"
		}
		return ""
	case typeMirrorPidReset:
		if rec.ValueNull {
			return "MIRROR_PID_RESET record has a null value"
		}
		return checkPidReset(rec.Value)
	case 2, 3, 4, 5, 6:
		return "control type " + itoa(int64(typ)) + " belongs to the KRaft metadata log, not to a topic partition"
	}
	return "unknown control type " + itoa(int64(typ))
}

// checkPidReset decodes MirrorPidResetRecord{Version int16,
// SourceClusterId compact string, tagged fields}. Later versions may add
// fields, so only version 0 is decoded to the end.
func checkPidReset(v []byte) string {
	if len(v) < 2 {
		return "MIRROR_PID_RESET value shorter than its version"
	}
	ver := int16(binary.BigEndian.Uint16(v))
	if ver < 0 {
		return "MIRROR_PID_RESET value version is negative"
	}
	if ver > 0 {
		return ""
	}
	v = v[2:]
	l, n := binary.Uvarint(v)
	if n <= 0 || l == 0 || l-1 > uint64(len(v)-n) {
		return "MIRROR_PID_RESET SourceClusterId is malformed"
	}
	v = v[n+int(l-1):]
	tags, n := binary.Uvarint(v)
	if n <= 0 || tags > uint64(len(v)) {
		return "MIRROR_PID_RESET tagged fields are malformed"
	}
	v = v[n:]
	for ; tags > 0; tags-- {
		if _, n = binary.Uvarint(v); n <= 0 {
			return "MIRROR_PID_RESET tag is malformed"
		}
		v = v[n:]
		size, m := binary.Uvarint(v)
		if m <= 0 || size > uint64(len(v)-m) {
			return "MIRROR_PID_RESET tag size is malformed"
		}
		v = v[m+int(size):]
	}
	if len(v) != 0 {
		return "MIRROR_PID_RESET value has trailing bytes"
	}
	return ""
}

func main() {}
