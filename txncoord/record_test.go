package txncoord

import (
	"encoding/hex"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/coordlog"
)

// TestTxnRecordBytes pins the __transaction_state record (Kafka's
// TxnMetadataKey v0 / TxnMetadataValue v0) to the bytes this broker has
// always written, topics and partitions sorted: a change here would make
// existing data dirs and Kafka's formatters read something else.
func TestTxnRecordBytes(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_123)
	for _, tc := range []struct {
		t          txnData
		key, value string
	}{
		{txnData{id: "tx-golden", pid: 4242, epoch: 7, timeout: 60 * time.Second, state: txnOngoing, startTs: time.UnixMilli(1_700_000_000_000),
			parts: map[coordlog.TopicPartition]bool{{Topic: "b", Partition: 2}: true, {Topic: "a", Partition: 1}: true, {Topic: "b", Partition: 0}: true, {Topic: "a", Partition: 0}: true}},
			"0000000974782d676f6c64656e",
			"0000000000000000109200070000ea6001000000020001610000000200000000000000010001620000000200000000000000020000018bcfe5687b0000018bcfe56800"},
		{txnData{id: "tx-empty", pid: 1, timeout: 1500 * time.Millisecond, state: txnCompleteCommit, parts: map[coordlog.TopicPartition]bool{}},
			"0000000874782d656d707479",
			"000000000000000000010000000005dc04ffffffff0000018bcfe5687bffffffffffffffff"},
	} {
		r := record(tc.t, now)
		if k, v := hex.EncodeToString(r.Key), hex.EncodeToString(r.Value); k != tc.key || v != tc.value {
			t.Errorf("%s:\nkey   %s\nwant  %s\nvalue %s\nwant  %s", tc.t.id, k, tc.key, v, tc.value)
		}
	}
}
