package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The fault test's checks. The history model (checked with porcupine):
//
// Each partition is a log L, the one read from it after the run
// (read_uncommitted, from the start to the high watermark; the replicas'
// files are compared with each other separately). Its state is the high
// watermark HW, the length of the prefix consumers may see, which only
// grows. Operations:
//   - ack(records): a producer's acks=all acknowledgement of records at
//     their offsets. Legal iff L holds exactly those values at those
//     offsets (nothing acknowledged is lost or moved); then HW >= the
//     last offset + 1 (acks=all completes at the high watermark).
//   - read(records): one consumer poll's records of the partition. Legal
//     iff L holds those values at those offsets (a consumer never sees a
//     record that is later truncated or replaced); then HW >= the last
//     offset + 1 (consumers read below the high watermark).
//   - end(h): ListOffsets latest answered h. Legal iff h >= HW: an
//     acknowledged or consumed offset is never behind a later answer.
//
// Acks and reads are points at the moment the client saw them (they
// happened at the broker earlier, and the bound they give holds from then
// on, so placing them later only weakens the check); ends are intervals
// from request to answer.
//
// Beside the model: per consumer and partition, between two changes of
// its assignment, the offsets it saw are consecutive on the idempotent
// topic and, under read_committed, skip only records of transactions not
// committed; an idempotent producer's records are each in L at most once
// and in the order it sent them; committed transactions are whole in the
// read_committed view and aborted ones absent from it.

type chaosRec struct {
	off int64
	val string
}

type chaosOpKind int

const (
	chaosOpAck chaosOpKind = iota
	chaosOpRead
	chaosOpEnd
)

type chaosInput struct {
	kind chaosOpKind
	tp   string
	recs []chaosRec
	end  int64
	// epoch is the leader epoch an end was answered at (for messages).
	epoch int32
}

type chaosHistory struct {
	mu  sync.Mutex
	ops []porcupine.Operation
}

func (h *chaosHistory) init() { h.ops = nil }

func (h *chaosHistory) add(kind chaosOpKind, topic string, p int32, recs []chaosRec, call, ret int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{Input: chaosInput{kind: kind, tp: fmt.Sprintf("%s-%d", topic, p), recs: recs}, Call: call, Return: ret})
}

func (h *chaosHistory) addEnd(topic string, p int32, end int64, epoch int32, call, ret int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{Input: chaosInput{kind: chaosOpEnd, tp: fmt.Sprintf("%s-%d", topic, p), end: end, epoch: epoch}, Call: call, Return: ret})
}

// endMonitor asks for the topics' end offsets every 200 ms until the
// returned function is called.
func (r *chaosRun) endMonitor(adm *kadm.Client) func() {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			call := r.now()
			ends, err := adm.ListEndOffsets(ctx, chaosIdemTopic, chaosTxnTopic)
			ret := r.now()
			cancel()
			if err != nil {
				continue
			}
			ends.Each(func(o kadm.ListedOffset) {
				if o.Err == nil {
					r.hist.addEnd(o.Topic, o.Partition, o.Offset, o.LeaderEpoch, call, ret)
				}
			})
		}
	}()
	return func() {
		select {
		case <-done:
		default:
			close(done)
		}
		<-stopped
	}
}

func (r *chaosRun) stopConsumers() {
	select {
	case <-r.consStop:
	default:
		close(r.consStop)
	}
	r.cwg.Wait()
}

// chaosConsumer is what one group member saw.
type chaosConsumer struct {
	id        int
	topic     string
	committed bool
	gen       atomic.Int64 // bumped at every assignment change
	mu        sync.Mutex
	seen      map[int32][]chaosSeen
}

type chaosSeen struct {
	gen int64
	chaosRec
}

func (c *chaosConsumer) saw(p int32, gen int64, recs []chaosRec) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range recs {
		c.seen[p] = append(c.seen[p], chaosSeen{gen, r})
	}
}

// chaosLog is one partition's log read after the run: values by offset.
type chaosLog map[int64]string

// readLogs reads every partition of topic from the start until it has
// read up to ends (read_uncommitted) or the value last of the partition
// (the closing commit of the transactional topic: only its marker
// follows).
func readLogs(t *testing.T, bs, topic string, ends map[int32]int64, committed bool, last map[int32]string) map[int32]chaosLog {
	t.Helper()
	offs := map[int32]kgo.Offset{}
	for p := range ends {
		offs[p] = kgo.NewOffset().AtStart()
	}
	opts := []kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs})}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl := verbatimClient(t, bs, opts...)
	defer cl.Close()
	out := map[int32]chaosLog{}
	done := map[int32]bool{}
	for p, e := range ends {
		out[p] = chaosLog{}
		done[p] = !committed && e == 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for len(done) > 0 {
		all := true
		for _, d := range done {
			all = all && d
		}
		if all {
			break
		}
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read back %s (committed %v): timed out, done %v", topic, committed, done)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("read back %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if prev, ok := out[r.Partition][r.Offset]; ok {
				t.Fatalf("read back %s/%d: offset %d twice (%q, %q)", topic, r.Partition, r.Offset, prev, r.Value)
			}
			out[r.Partition][r.Offset] = string(r.Value)
			if (!committed && r.Offset+1 >= ends[r.Partition]) || string(r.Value) == last[r.Partition] {
				done[r.Partition] = true
			}
		})
	}
	return out
}

type chaosChecked struct {
	records, ops, consumed int
	unknownIn              int // records of failed produces found in the log
	txnSummary             string
}

// check reads the final logs, lets the consumer groups drain them and
// checks everything the model and the rules above say.
func (r *chaosRun) check(t *testing.T, c *VCluster, cl *kgo.Client, consumers []*chaosConsumer) chaosChecked {
	t.Helper()
	var out chaosChecked
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	listed, err := kadm.NewClient(cl).ListEndOffsets(ctx, chaosIdemTopic, chaosTxnTopic)
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	ends := map[string]map[int32]int64{chaosIdemTopic: {}, chaosTxnTopic: {}}
	listed.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset %s/%d: %v", o.Topic, o.Partition, o.Err)
		}
		ends[o.Topic][o.Partition] = o.Offset
	})
	var closing chaosTxn
	for i := len(r.txns) - 1; i >= 0; i-- {
		if r.txns[i].outcome == "commit" {
			closing = r.txns[i]
			break
		}
	}
	if closing.values == nil || r.txns[len(r.txns)-1].outcome != "commit" {
		t.Fatalf("the transactional producer did not end with a commit: %d transactions, errors %v", len(r.txns), r.errs)
	}
	// The closing transaction's last record of each partition.
	last := map[int32]string{}
	for i, v := range closing.values {
		last[int32(i%chaosParts)] = v
	}
	logs := map[string]map[int32]chaosLog{
		chaosIdemTopic: readLogs(t, r.bs, chaosIdemTopic, ends[chaosIdemTopic], false, nil),
		chaosTxnTopic:  readLogs(t, r.bs, chaosTxnTopic, ends[chaosTxnTopic], false, last),
	}
	committedView := readLogs(t, r.bs, chaosTxnTopic, ends[chaosTxnTopic], true, last)
	for _, topic := range []string{chaosIdemTopic, chaosTxnTopic} {
		for p, l := range logs[topic] {
			if int64(len(l)) > ends[topic][p] {
				t.Fatalf("%s/%d: %d records below end offset %d", topic, p, len(l), ends[topic][p])
			}
			out.records += len(l)
		}
	}
	out.txnSummary = checkTxns(t, r.txns, logs[chaosTxnTopic], committedView)
	out.unknownIn = checkIdempotent(t, logs[chaosIdemTopic], r.unknown)
	out.ops = checkHistory(t, r.t0, r.hist.ops, logs)

	// The groups drain the logs, then every member's view is checked.
	drainGroups(t, consumers, logs, committedView)
	r.stopConsumers()
	for _, cs := range consumers {
		out.consumed += checkConsumer(t, cs, logs[cs.topic], committedView)
	}
	return out
}

// checkTxns: committed transactions whole (each value once) in the
// read_committed view, aborted ones absent, unknown ones all or nothing;
// the read_committed view a subset of the log at the same offsets.
func checkTxns(t testing.TB, txns []chaosTxn, log, committed map[int32]chaosLog) string {
	t.Helper()
	vis := map[string]int{}
	for p, l := range committed {
		for o, v := range l {
			if log[p][o] != v {
				t.Errorf("%s/%d: read_committed saw %q at offset %d, the log holds %q", chaosTxnTopic, p, v, o, log[p][o])
			}
			vis[v]++
		}
	}
	n := map[string]int{}
	for i, tx := range txns {
		n[tx.outcome]++
		seen := 0
		for _, v := range tx.values {
			if vis[v] > 1 {
				t.Errorf("transaction %d (%s): %q visible %d times", i, tx.outcome, v, vis[v])
			}
			if vis[v] > 0 {
				seen++
			}
		}
		switch {
		case tx.outcome == "commit" && seen != len(tx.values):
			t.Errorf("committed transaction %d: %d of its %d records visible to read_committed", i, seen, len(tx.values))
		case tx.outcome == "abort" && seen != 0:
			t.Errorf("aborted transaction %d: %d of its records visible to read_committed", i, seen)
		case tx.outcome == "unknown" && seen != 0 && seen != len(tx.values):
			t.Errorf("transaction %d with an unknown outcome: %d of its %d records visible (want all or none)", i, seen, len(tx.values))
		}
	}
	return fmt.Sprintf("%d committed, %d aborted, %d unknown", n["commit"], n["abort"], n["unknown"])
}

// checkIdempotent: every value once, each producer's values in the
// order it sent them per partition; those of failed produces (unknown)
// may be there (once): it returns how many are.
func checkIdempotent(t testing.TB, logs map[int32]chaosLog, unknown map[string]bool) int {
	t.Helper()
	n := 0
	where := map[string]string{}
	for p, l := range logs {
		offs := sortedOffsets(l)
		lastSeq := map[string]int{}
		for _, o := range offs {
			v := l[o]
			if w, ok := where[v]; ok {
				t.Errorf("%s: %q at %s and at %d/%d: a duplicate from an idempotent producer", chaosIdemTopic, v, w, p, o)
			}
			where[v] = fmt.Sprintf("%d/%d", p, o)
			if unknown[v] {
				n++
			}
			prod, seqS, _ := strings.Cut(v, "-")
			seq, err := strconv.Atoi(seqS)
			if err != nil {
				t.Errorf("%s/%d offset %d: value %q is none the producers wrote", chaosIdemTopic, p, o, v)
				continue
			}
			if prev, ok := lastSeq[prod]; ok && seq <= prev {
				t.Errorf("%s/%d offset %d: %q after sequence %d of the same producer (reordered)", chaosIdemTopic, p, o, v, prev)
			}
			lastSeq[prod] = seq
		}
	}
	return n
}

func sortedOffsets(l chaosLog) []int64 {
	offs := make([]int64, 0, len(l))
	for o := range l {
		offs = append(offs, o)
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	return offs
}

// checkHistory checks the history against the model, per partition, and
// returns the number of operations checked.
func checkHistory(t testing.TB, t0 time.Time, ops []porcupine.Operation, logs map[string]map[int32]chaosLog) int {
	t.Helper()
	ref := map[string]chaosLog{}
	for topic, ps := range logs {
		for p, l := range ps {
			ref[fmt.Sprintf("%s-%d", topic, p)] = l
		}
	}
	// The values first, for a precise message.
	byTP := map[string][]porcupine.Operation{}
	for _, op := range ops {
		in := op.Input.(chaosInput)
		for _, r := range in.recs {
			if got, ok := ref[in.tp][r.off]; !ok || got != r.val {
				what := map[chaosOpKind]string{chaosOpAck: "acknowledged", chaosOpRead: "consumed"}[in.kind]
				t.Errorf("%s: %q %s at offset %d, the log holds %q there (present %v): lost or replaced", in.tp, r.val, what, r.off, got, ok)
			}
		}
		byTP[in.tp] = append(byTP[in.tp], op)
	}
	model := porcupine.Model{
		Init: func() interface{} { return int64(0) },
		Step: func(state, input, _ interface{}) (bool, interface{}) {
			hw, in := state.(int64), input.(chaosInput)
			if in.kind == chaosOpEnd {
				return in.end >= hw, max(hw, in.end)
			}
			for _, r := range in.recs {
				if ref[in.tp][r.off] != r.val {
					return false, hw
				}
				hw = max(hw, r.off+1)
			}
			return true, hw
		},
		DescribeOperation: func(input, _ interface{}) string {
			in := input.(chaosInput)
			if in.kind == chaosOpEnd {
				return fmt.Sprintf("end -> %d", in.end)
			}
			return fmt.Sprintf("%s %d records at %d..%d", map[chaosOpKind]string{chaosOpAck: "ack", chaosOpRead: "read"}[in.kind], len(in.recs), in.recs[0].off, in.recs[len(in.recs)-1].off)
		},
	}
	tps := make([]string, 0, len(byTP))
	for tp := range byTP {
		tps = append(tps, tp)
	}
	sort.Strings(tps)
	for _, tp := range tps {
		res, info := porcupine.CheckOperationsVerbose(model, byTP[tp], 60*time.Second)
		switch res {
		case porcupine.Illegal:
			vis := ""
			if keep := os.Getenv("VERBATIM_CHAOS_KEEP"); keep != "" {
				path := filepath.Join(keep, "history-"+tp+".html")
				if os.MkdirAll(keep, 0o755) == nil && porcupine.VisualizePath(model, info, path) == nil {
					vis = "; visualization " + path
				}
			}
			t.Errorf("%s: the history of %d operations is not linearizable in the model (a high watermark went back or a consumed/acknowledged offset was answered as beyond the end)%s%s",
				tp, len(byTP[tp]), endWitness(t0, byTP[tp]), vis)
		case porcupine.Unknown:
			t.Errorf("%s: the checker did not decide within 60 s (%d operations)", tp, len(byTP[tp]))
		}
	}
	return len(ops)
}

// endWitness finds the plainest violation: an end that began after an
// acknowledgement or a read had returned and answered less than its
// offset + 1.
func endWitness(t0 time.Time, ops []porcupine.Operation) string {
	for _, e := range ops {
		in := e.Input.(chaosInput)
		if in.kind != chaosOpEnd {
			continue
		}
		for _, o := range ops {
			oi := o.Input.(chaosInput)
			if oi.kind == chaosOpEnd || o.Return >= e.Call {
				continue
			}
			if hi := oi.recs[len(oi.recs)-1].off + 1; hi > in.end {
				what := map[chaosOpKind]string{chaosOpAck: "an acknowledgement", chaosOpRead: "a read"}[oi.kind]
				at := func(d int64) string { return t0.Add(time.Duration(d)).UTC().Format("15:04:05.000") }
				return fmt.Sprintf(": ListOffsets latest at %s..%s answered %d at leader epoch %d, after %s up to offset %d at %s",
					at(e.Call), at(e.Return), in.end, in.epoch, what, hi-1, at(o.Return))
			}
		}
	}
	return ""
}

// drainGroups waits (bounded) until each group's members together saw the
// last record of every partition: the groups survived the faults.
func drainGroups(t *testing.T, consumers []*chaosConsumer, logs map[string]map[int32]chaosLog, committed map[int32]chaosLog) {
	t.Helper()
	want := func(topic string, p int32) int64 {
		l := logs[topic][p]
		if topic == chaosTxnTopic {
			l = committed[p]
		}
		offs := sortedOffsets(l)
		if len(offs) == 0 {
			return -1
		}
		return offs[len(offs)-1]
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		missing := ""
		for _, topic := range []string{chaosIdemTopic, chaosTxnTopic} {
			for p := range int32(chaosParts) {
				w, got := want(topic, p), false
				for _, cs := range consumers {
					if cs.topic != topic {
						continue
					}
					cs.mu.Lock()
					for _, s := range cs.seen[p] {
						got = got || s.off == w
					}
					cs.mu.Unlock()
				}
				if w >= 0 && !got {
					missing += fmt.Sprintf(" %s/%d@%d", topic, p, w)
				}
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the consumer groups did not reach the last record of:%s", missing)
		}
	}
}

// checkConsumer: between assignment changes the offsets one member saw
// of a partition are consecutive (idempotent topic) or skip only records
// not committed (read_committed); every value is the log's (and, under
// read_committed, a committed one). Returns the records checked.
func checkConsumer(t testing.TB, cs *chaosConsumer, log map[int32]chaosLog, committed map[int32]chaosLog) int {
	t.Helper()
	n := 0
	for p, seen := range cs.seen {
		for i, s := range seen {
			n++
			if v, ok := log[p][s.off]; !ok || v != s.val {
				t.Errorf("consumer %d %s/%d: %q at offset %d, the log holds %q", cs.id, cs.topic, p, s.val, s.off, v)
			}
			if cs.committed {
				if _, ok := committed[p][s.off]; !ok {
					t.Errorf("consumer %d (read_committed) %s/%d: %q at offset %d is not committed", cs.id, cs.topic, p, s.val, s.off)
				}
			}
			if i == 0 || seen[i-1].gen != s.gen {
				continue
			}
			prev := seen[i-1].off
			switch {
			case s.off <= prev:
				t.Errorf("consumer %d %s/%d: offset %d after %d within one assignment", cs.id, cs.topic, p, s.off, prev)
			case !cs.committed && s.off != prev+1:
				t.Errorf("consumer %d %s/%d: offset %d after %d within one assignment: records skipped", cs.id, cs.topic, p, s.off, prev)
			case cs.committed:
				for o := prev + 1; o < s.off; o++ {
					if v, ok := committed[p][o]; ok {
						t.Errorf("consumer %d (read_committed) %s/%d: skipped committed %q at offset %d (from %d to %d)", cs.id, cs.topic, p, v, o, prev, s.off)
						break
					}
				}
			}
		}
	}
	return n
}
