package wasmpolicy

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/policies"
	"github.com/verbatim-kafka/verbatim/policies/abi"
)

// FuzzParseDescriptor: any descriptor text is parsed or refused with an
// error, and an accepted one names ABI 1 and a valid name.
func FuzzParseDescriptor(f *testing.F) {
	f.Add("abi=1\nname=x\nneeds=control-bytes\nconfigs=a,b\n")
	f.Add("abi=2\nname=x\n")
	f.Add("name=x\nabi=1\nabi=1\n")
	f.Add("abi=1\nname=../x\n")
	f.Fuzz(func(t *testing.T, text string) {
		d, err := parseDescriptor(text)
		if err != nil {
			return
		}
		if d.ABI != abi.Version || !validName(d.Name) || d.Needs&^(abi.NeedBatchBytes|abi.NeedControlBytes) != 0 {
			t.Fatalf("accepted %+v", d)
		}
	})
}

// FuzzJudgeRecordSet feeds arbitrary record sets through a real guest:
// the host either refuses the set (ErrBatches) or returns verdicts whose
// indexes are in range; it never panics.
func FuzzJudgeRecordSet(f *testing.F) {
	h, _ := watExampleHost(f)
	b, err := h.Bind("t", []string{"epoch-monotonic-wat"}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(slices.Concat(batch(f, 0, 2, nil), batch(f, 1, 1, nil)), int32(1))
	f.Add(batch(f, 0, 2, nil)[:70], int32(-1))
	f.Fuzz(func(t *testing.T, set []byte, lastEpoch int32) {
		v, err := b.Judge(context.Background(), mirrorCtx(0, lastEpoch), set)
		if err != nil {
			if !errors.Is(err, abi.ErrBatches) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		for _, r := range v.Rejected {
			if r.Batch < 0 || r.Code != 44 || r.Policy != "epoch-monotonic-wat" {
				t.Fatalf("rejection %+v", r)
			}
		}
	})
}

// FuzzJudgeDefaults: the default built-ins (WAT, run without a deadline)
// judge any record set that splits into batches, whatever its headers and
// control records hold, without trapping, overrunning or answering
// garbage: every rejection is theirs, with their codes, never an instance
// failure.
func FuzzJudgeDefaults(f *testing.F) {
	h := newHost(f, Options{CacheDir: testCacheDir})
	b, err := h.Bind("t", policies.DefaultMirror, nil)
	if err != nil {
		f.Fatal(err)
	}
	ctl := batch(f, 1, 2, func(bt *kbatch.Batch) {
		bt.Records = []kbatch.Record{{Key: kbatch.ControlKey(kbatch.ControlCommit), Value: kbatch.EndTxnMarkerValue(1)}}
		bt.Attributes = kbatch.ControlBit | kbatch.TransactionalBit
		bt.ProducerID = 5
	})
	f.Add(slices.Concat(batch(f, 0, 2, nil), ctl), int32(1), uint8(1))
	f.Add(slices.Concat(ctl, ctl), int32(-1), uint8(0))
	f.Fuzz(func(t *testing.T, set []byte, lastEpoch int32, mode uint8) {
		pc := mirrorCtx(0, lastEpoch)
		pc.Mode = ModeNone
		if mode&1 != 0 {
			pc.Mode = ModePush
		}
		v, err := b.Judge(context.Background(), pc, set)
		if err != nil {
			if !errors.Is(err, abi.ErrBatches) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		for _, r := range v.Rejected {
			ok := r.Policy == "epoch-monotonic" && r.Code == 44 || r.Policy == "control-records" && r.Code == 87
			if !ok || strings.Contains(r.Reason, "instance replaced") || r.Reason == "" {
				t.Fatalf("rejection %+v", r)
			}
		}
	})
}

// FuzzHasImports: any bytes are read without panicking, and prefixing an
// import section to a module's sections always makes it count as having
// imports. (wazero's compiler is not the oracle here: some fuzzed inputs
// make it allocate without bound.)
func FuzzHasImports(f *testing.F) {
	for _, n := range policies.BuiltinNames() {
		if n != "producer-ids" { // 2 MB: too big a seed
			b, _ := policies.Builtin(n)
			f.Add(b)
		}
	}
	wat, _ := os.ReadFile("testdata/wat/netimport.wasm")
	f.Add(wat)
	// One import: module "m", name "f", function of type 0.
	imports := []byte{2, 7, 1, 1, 'm', 1, 'f', 0, 0}
	f.Fuzz(func(t *testing.T, wasm []byte) {
		hasImports(wasm)
		if len(wasm) >= 8 && string(wasm[:4]) == "\x00asm" {
			with := append(append(append([]byte(nil), wasm[:8]...), imports...), wasm[8:]...)
			if !hasImports(with) {
				t.Fatal("a module starting with an import section counted as import-free")
			}
		}
	})
}
