package broker

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// openTxnWAT is a policy that rejects a call's first batch with "open"
// when the context lists exactly one producer with an open transaction,
// producer id 12.
const openTxnWAT = `(module
  (memory (export "memory") 1)
  (data (i32.const 16) "abi=1\0aname=open-txn-12\0a")
  (data (i32.const 64) "open")
  (func (export "verbatim_describe") (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 23)))
  (func (export "verbatim_alloc") (param $n i32) (result i32)
    (if (i32.gt_u (i32.add (local.get $n) (i32.const 2048)) (i32.const 65536))
      (then unreachable))
    (i32.const 1024))
  (func (export "verbatim_judge") (param $p i32) (param $len i32) (result i64)
    (if (i32.ne (i32.load offset=44 (local.get $p)) (i32.const 1))
      (then (return (i64.const 0))))
    (if (i64.ne (i64.load (i32.add (local.get $p) (i32.load offset=48 (local.get $p)))) (i64.const 12))
      (then (return (i64.const 0))))
    (i32.store (i32.const 512) (i32.const 1))
    (i32.store (i32.const 516) (i32.const 0))
    (i32.store16 (i32.const 520) (i32.const 44))
    (i32.store16 (i32.const 522) (i32.const 4))
    (i32.store (i32.const 524) (i32.load (i32.const 64)))
    (i64.or (i64.shl (i64.const 512) (i64.const 32)) (i64.const 16))))
`

// TestMirrorPoliciesSeeOpenTransactions: a judge call's context lists the
// producers whose transaction is open before the call's batches, taken
// from the partition's producer state.
func TestMirrorPoliciesSeeOpenTransactions(t *testing.T) {
	wat2wasm, err := exec.LookPath("wat2wasm")
	if err != nil {
		t.Fatal("wat2wasm not found: install Debian's wabt package (make peers)")
	}
	pdir := t.TempDir()
	src := filepath.Join(pdir, "open-txn-12.wat")
	if err := os.WriteFile(src, []byte(openTxnWAT), 0o644); err != nil {
		t.Fatal(err)
	}
	if msg, err := exec.Command(wat2wasm, src, "-o", filepath.Join(pdir, "open-txn-12.wasm")).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm: %v\n%s", err, msg)
	}
	b := startBroker(t, t.TempDir(), func(c *Config) { c.PolicyDir = pdir })
	createTopic(t, b, "m", 1, map[string]*string{"mirror.mode": sp("push"), cfgMirrorPolicies: sp("open-txn-12")})

	txnData := func(base int64, pid int64) []byte {
		return srcBatch{base: base, epoch: 1, records: 1, pid: pid, txn: true, control: -1, timestampMs: 1_700_000_000_000}.encode(t)
	}
	// No transaction open before the first batch: accepted; it opens
	// producer 12's transaction.
	if r := mirrorOne(t, b, "m", txnData(0, 12), 0, -1); r.ErrorCode != 0 {
		t.Fatalf("first transactional batch: %+v", r)
	}
	// Now the policy sees producer 12 open and refuses.
	r := mirrorOne(t, b, "m", data(1, 1, 1).encode(t), 1, -1)
	if r.ErrorCode != kerr.PolicyViolation.Code || r.ErrorMessage == nil || !strings.HasSuffix(*r.ErrorMessage, "mirror policy open-txn-12 rejected the batch at offset 1: open") {
		t.Fatalf("with producer 12 open: %+v", r)
	}
}
