package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/policies"
	"github.com/verbatim-kafka/verbatim/policies/abi"
	"github.com/verbatim-kafka/verbatim/storage"
	"github.com/verbatim-kafka/verbatim/wasmpolicy"
)

const policyUsage = `usage:
  verbatim policy check MODULE.wasm [--cache-dir DIR]
      load a module and check its ABI, exports, imports and descriptor
  verbatim policy run MODULE.wasm|BUILTIN[,...] --batches FILE [--config k=v ...] [--topic NAME] [--cache-dir DIR]
      judge FILE (raw v2 record batches back to back, e.g. a Kafka .log
      segment) in order as one mirror partition; one line per batch:
      offset=<base> verdict=accept|reject reason=<text>

--cache-dir keeps compiled modules between runs (default: the user cache
directory's verbatim/wasm-cache; empty: none).

exit status: 0 all accepted (check: module valid), 1 a batch rejected
(check: module refused), 2 usage or unreadable input.
`

// policyCmd runs `verbatim policy`.
func policyCmd(args []string) int { return policyMain(args, os.Stdout, os.Stderr) }

func policyMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, policyUsage)
		return 2
	}
	switch args[0] {
	case "check":
		return policyCheck(args[1:], stdout, stderr)
	case "run":
		return policyRun(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, policyUsage)
		return 0
	}
	fmt.Fprintf(stderr, "verbatim policy: unknown subcommand %q\n\n%s", args[0], policyUsage)
	return 2
}

// defaultPolicyCacheDir is where the tools keep compiled modules, so that
// a second run does not compile the 2 MB Go built-ins again.
func defaultPolicyCacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "verbatim", "wasm-cache")
}

// parseInterleaved parses flags that may come before or after positional
// arguments (the usage puts the module first).
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func policyCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("policy check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cacheDir := fs.String("cache-dir", defaultPolicyCacheDir(), "directory keeping compiled modules between runs (empty: none)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "verbatim policy check: want one MODULE.wasm\n\n%s", policyUsage)
		return 2
	}
	h, err := wasmpolicy.NewHost(wasmpolicy.Options{CacheDir: *cacheDir})
	if err != nil {
		fmt.Fprintf(stderr, "verbatim policy check: %v\n", err)
		return 2
	}
	defer h.Close()
	mi, err := h.LoadFile(pos[0])
	switch {
	case errors.Is(err, wasmpolicy.ErrBadModule):
		fmt.Fprintf(stdout, "module %s: refused: %v\n", pos[0], err)
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "verbatim policy check: %v\n", err)
		return 2
	}
	needs := "headers"
	switch {
	case mi.Needs&abi.NeedBatchBytes != 0:
		needs = "batch-bytes"
	case mi.Needs&abi.NeedControlBytes != 0:
		needs = "control-bytes"
	}
	fmt.Fprintf(stdout, "module %s: ok\nname: %s\nabi: %d\nneeds: %s\nconfigs: %s\nimports: %s\nexports: %s\n",
		pos[0], mi.Name, mi.ABI, needs, strings.Join(mi.Configs, ","), strings.Join(mi.Imports, " "), strings.Join(mi.Exports, " "))
	return 0
}

type configFlag map[string]string

func (c configFlag) String() string { return "" }
func (c configFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", v)
	}
	c[k] = val
	return nil
}

func policyRun(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("policy run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	batchesPath := fs.String("batches", "", "file of raw v2 record batches back to back (a Kafka .log segment works)")
	topic := fs.String("topic", "policy-run", "topic name the policies see")
	partition := fs.Int("partition", 0, "partition number the policies see")
	cacheDir := fs.String("cache-dir", defaultPolicyCacheDir(), "directory keeping compiled modules between runs (empty: none)")
	cfg := configFlag{}
	fs.Var(cfg, "config", "topic config k=v passed to the policies that declare it (repeatable)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) != 1 || *batchesPath == "" {
		fmt.Fprintf(stderr, "verbatim policy run: want one MODULE.wasm|BUILTIN[,...] and --batches FILE\n\n%s", policyUsage)
		return 2
	}
	data, err := os.ReadFile(*batchesPath)
	if err != nil {
		fmt.Fprintf(stderr, "verbatim policy run: %v\n", err)
		return 2
	}
	h, err := wasmpolicy.NewHost(wasmpolicy.Options{CacheDir: *cacheDir})
	if err != nil {
		fmt.Fprintf(stderr, "verbatim policy run: %v\n", err)
		return 2
	}
	defer h.Close()
	var names []string
	for _, p := range strings.Split(pos[0], ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if strings.HasSuffix(p, ".wasm") || strings.ContainsRune(p, os.PathSeparator) {
			mi, err := h.LoadFile(p)
			if err != nil {
				fmt.Fprintf(stderr, "verbatim policy run: %v\n", err)
				return 2
			}
			p = mi.Name
		}
		names = append(names, p)
	}
	b, err := h.Bind(*topic, names, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "verbatim policy run: %v (built-ins: %s)\n", err, strings.Join(policies.BuiltinNames(), ", "))
		return 2
	}
	defer b.Close()
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	rejected, err := replay(b, data, int32(*partition), out)
	if err != nil {
		out.Flush()
		fmt.Fprintf(stderr, "verbatim policy run: %v\n", err)
		return 2
	}
	if rejected > 0 {
		return 1
	}
	return 0
}

// mirrorPartition is the state a mirror partition would have after the
// accepted batches: what the next call's PartitionContext says.
type mirrorPartition struct {
	pc      wasmpolicy.PartitionContext
	started bool
	open    map[int64]bool
}

// appended advances the state past an accepted batch, as the broker's
// mirror append would: log end, last batch epoch, the leader epoch kept
// ahead (storage.MirrorLeaderEpoch, KIP-1279), and the open transactions.
func (m *mirrorPartition) appended(h *kbatch.Header, ctlType int16, ctlOK bool) {
	m.pc.LogEndOffset = h.NextOffset()
	m.pc.LastBatchEpoch = h.LeaderEpoch
	m.pc.LeaderEpoch = storage.MirrorLeaderEpoch(m.pc.LeaderEpoch, h.LeaderEpoch)
	switch {
	case h.IsControl() && ctlOK && (ctlType == kbatch.ControlAbort || ctlType == kbatch.ControlCommit):
		delete(m.open, h.ProducerID)
	case h.IsControl() && ctlOK && ctlType == kbatch.ControlMirrorPidReset:
		clear(m.open)
	case h.IsTransactional() && !h.IsControl():
		m.open[h.ProducerID] = true
	}
	m.pc.OpenTxnProducerIDs = m.pc.OpenTxnProducerIDs[:0]
	for pid := range m.open {
		m.pc.OpenTxnProducerIDs = append(m.pc.OpenTxnProducerIDs, pid)
	}
	sort.Slice(m.pc.OpenTxnProducerIDs, func(i, j int) bool { return m.pc.OpenTxnProducerIDs[i] < m.pc.OpenTxnProducerIDs[j] })
}

// replay judges each batch of data in order, one call per batch, and
// prints a line per batch. It returns the number of rejected batches.
func replay(b *wasmpolicy.Binding, data []byte, partition int32, out io.Writer) (int, error) {
	m := &mirrorPartition{open: map[int64]bool{}}
	m.pc = wasmpolicy.PartitionContext{Partition: partition, Mode: wasmpolicy.ModePush, State: wasmpolicy.StateMirroring, LastBatchEpoch: -1}
	rejected := 0
	for rest := data; len(rest) > 0; {
		if allZero(rest) {
			break // a preallocated segment's unused tail
		}
		batch, next, err := kbatch.Next(rest)
		if err != nil || len(batch) < kbatch.HeaderSize {
			return rejected, fmt.Errorf("byte %d: truncated or malformed batch (%d bytes left)", len(data)-len(rest), len(rest))
		}
		h, _ := kbatch.ParseHeader(batch)
		if h.Magic != 2 {
			return rejected, fmt.Errorf("offset %d: magic %d; only v2 record batches can be judged", h.BaseOffset, h.Magic)
		}
		if !m.started {
			m.pc.LogEndOffset, m.started = h.BaseOffset, true
		}
		v, err := b.Judge(context.Background(), m.pc, batch)
		if err != nil {
			return rejected, fmt.Errorf("offset %d: %w", h.BaseOffset, err)
		}
		if v.Accepted() {
			fmt.Fprintf(out, "offset=%d verdict=accept reason=\n", h.BaseOffset)
			var typ int16
			var ok bool
			if h.IsControl() {
				// Streamed, bounded: a compressed control batch
				// cannot make the tool inflate a bomb.
				ctl, err := storage.ParseControlBatch(batch)
				typ, ok = ctl.Type, err == nil && ctl.Present
			}
			m.appended(&h, typ, ok)
		} else {
			rejected++
			reasons := make([]string, len(v.Rejected))
			for i, r := range v.Rejected {
				reasons[i] = r.Policy + ": " + r.Reason
			}
			fmt.Fprintf(out, "offset=%d verdict=reject reason=%s\n", h.BaseOffset, strings.Join(reasons, "; "))
		}
		rest = next
	}
	return rejected, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
