package broker

import (
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/internal/lograte"
	"github.com/verbatim-kafka/verbatim/internal/testkit/logbuf"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/storage"
)

// faultFS is the OS filesystem with writes failing on demand: while fail
// is set, a write to a file whose name contains match returns err (the
// storage layer's own fault FS, MemFS, has no data dir lock and no real
// paths; the broker needs both).
type faultFS struct {
	storage.FS
	mu    sync.Mutex
	match string
	err   error
	hits  atomic.Int64
}

func (f *faultFS) set(match string, err error) {
	f.mu.Lock()
	f.match, f.err = match, err
	f.mu.Unlock()
}

func (f *faultFS) fault(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil && strings.Contains(name, f.match) {
		f.hits.Add(1)
		return f.err
	}
	return nil
}

func (f *faultFS) OpenFile(name string, flag int, perm os.FileMode) (storage.File, error) {
	if flag&os.O_CREATE != 0 {
		if err := f.fault(name); err != nil {
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
	}
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

type faultFile struct {
	storage.File
	fs *faultFS
}

func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.fs.fault(f.Name()); err != nil {
		return 0, &os.PathError{Op: "write", Path: f.Name(), Err: err}
	}
	return f.File.Write(p)
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.fault(f.Name()); err != nil {
		return 0, &os.PathError{Op: "write", Path: f.Name(), Err: err}
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) Sync() error {
	if err := f.fs.fault(f.Name()); err != nil {
		return &os.PathError{Op: "sync", Path: f.Name(), Err: err}
	}
	return f.File.Sync()
}

// faultBroker is a broker over a faultFS whose log lines land in a
// logbuf.Buffer, with the failure-line limiter on a clock the test moves.
type faultBroker struct {
	*testBroker
	fs   *faultFS
	logs *logbuf.Buffer
	now  atomic.Int64 // unix nanoseconds of the limiter's clock
}

func startFaultBroker(t *testing.T) *faultBroker {
	fb := &faultBroker{fs: &faultFS{FS: storage.OSFS{}}, logs: &logbuf.Buffer{}}
	fb.now.Store(time.Unix(1_000_000, 0).UnixNano())
	fb.testBroker = startBroker(t, t.TempDir(), func(c *Config) {
		c.FS = fb.fs
		c.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(fb.logs, testLogWriter(t)), &slog.HandlerOptions{Level: slog.LevelDebug}))
		c.faultClock = func() time.Time { return time.Unix(0, fb.now.Load()) }
	})
	t.Cleanup(func() { fb.fs.set("", nil) }) // before the broker stops: its shutdown writes
	return fb
}

// testLogWriter echoes the broker's log under -v.
func testLogWriter(t *testing.T) io.Writer {
	if testing.Verbose() {
		return testWriter{t}
	}
	return io.Discard
}

// oneLine asserts exactly one line holds every part and returns it.
func (fb *faultBroker) oneLine(t *testing.T, parts ...string) string {
	t.Helper()
	got := fb.logs.Lines(parts...)
	if len(got) != 1 {
		t.Fatalf("%d log lines with %q, want 1:\n%s", len(got), parts, strings.Join(fb.logs.Lines(), "\n"))
	}
	return got[0]
}

func TestENOSPCOnProduceIsLoggedOnce(t *testing.T) {
	fb := startFaultBroker(t)
	createTopic(t, fb.testBroker, "full", 1, nil)
	fb.fs.set("full-0/00000000000000000000.log", syscall.ENOSPC) // the segment write
	pr := produceOne(t, fb.testBroker, 9, "full", 0, encodeBatch(t, 0, -1, -1, []byte("v")))
	if pr.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("produce on a full disk: code %d, want KAFKA_STORAGE_ERROR", pr.ErrorCode)
	}
	line := fb.oneLine(t, "level=ERROR")
	for _, want := range []string{"produce failed", "topic=full", "partition=0", "client_id=raw", "remote=127.0.0.1:", "no space"} {
		if !strings.Contains(line, want) {
			t.Errorf("the error line lacks %q: %s", want, line)
		}
	}
	// Space is back: the partition takes writes again, nothing more logged.
	fb.fs.set("", nil)
	if pr := produceOne(t, fb.testBroker, 9, "full", 0, encodeBatch(t, 0, -1, -1, []byte("v"))); pr.ErrorCode != 0 {
		t.Fatalf("produce after space came back: code %d", pr.ErrorCode)
	}
	if n := len(fb.logs.Lines("level=ERROR")); n != 1 {
		t.Fatalf("%d ERROR lines, want 1", n)
	}
}

func TestENOSPCOnCreateTopicsIsLoggedOnce(t *testing.T) {
	fb := startFaultBroker(t)
	fb.fs.set("topics.json", syscall.ENOSPC)
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "nospace", 1, 1
	req.Topics = append(req.Topics, rt)
	req.Version = 5
	resp := rawRequest[*kmsg.CreateTopicsResponse](t, fb.testBroker, req)
	if code := resp.Topics[0].ErrorCode; code != kerr.KafkaStorageError.Code {
		t.Fatalf("CreateTopics on a full disk: code %d, want KAFKA_STORAGE_ERROR", code)
	}
	if fb.fs.hits.Load() == 0 {
		t.Fatal("the fault was never hit")
	}
	line := fb.oneLine(t, "level=ERROR")
	for _, want := range []string{"create topics failed", "topic=nospace", "client_id=raw", "remote=127.0.0.1:", "no space"} {
		if !strings.Contains(line, want) {
			t.Errorf("the error line lacks %q: %s", want, line)
		}
	}
}

func TestENOSPCOnOffsetCommitIsLoggedOnce(t *testing.T) {
	fb := startFaultBroker(t)
	createTopic(t, fb.testBroker, "src", 1, nil)
	commit := func() int16 {
		return rawRequest[*kmsg.OffsetCommitResponse](t, fb.testBroker, offsetCommitReq("g1", "src", 5)).Topics[0].Partitions[0].ErrorCode
	}
	if code := commit(); code != 0 { // creates __consumer_offsets
		t.Fatalf("first commit: code %d", code)
	}
	fb.fs.set("__consumer_offsets-"+strconv.Itoa(int(fb.srv.groups.PartitionFor("g1")))+"/00000000000000000000.log", syscall.ENOSPC)
	// Kafka's coordinators answer a write that hit a storage error with
	// NOT_COORDINATOR (the client finds the coordinator again and retries).
	if code := commit(); code != kerr.NotCoordinator.Code {
		t.Fatalf("commit on a full disk: code %d, want NOT_COORDINATOR", code)
	}
	line := fb.oneLine(t, "level=ERROR")
	part := fb.srv.groups.PartitionFor("g1")
	for _, want := range []string{"offsets not stored", "topic=__consumer_offsets", "partition=" + strconv.Itoa(int(part)), "group=g1", "client_id=raw", "remote=127.0.0.1:", "no space"} {
		if !strings.Contains(line, want) {
			t.Errorf("the error line lacks %q: %s", want, line)
		}
	}
}

func TestFailureFloodIsRateLimited(t *testing.T) {
	fb := startFaultBroker(t)
	createTopic(t, fb.testBroker, "flood", 1, nil)
	// One batch first: its epoch is then in the leader-epoch cache, and a
	// failing append costs a write, not two synced checkpoint rewrites.
	if pr := produceOne(t, fb.testBroker, 9, "flood", 0, encodeBatch(t, 0, -1, -1, []byte("v"))); pr.ErrorCode != 0 {
		t.Fatalf("first produce: code %d", pr.ErrorCode)
	}
	fb.fs.set("flood-0/00000000000000000000.log", syscall.ENOSPC)
	const n = 10_000
	nc, err := net.Dial("tcp", fb.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(2 * time.Minute))
	frame := appendRequestFrame(nil, produceRequest(9, "flood", 0, encodeBatch(t, 0, -1, -1, []byte("v"))), 1, "flooder")
	go func() {
		// Pipelined: the same frame n times (correlation ids repeat,
		// which the broker does not check).
		w := make([]byte, 0, 64*len(frame))
		for i := 0; i < n; {
			w = w[:0]
			for j := 0; j < 64 && i < n; j, i = j+1, i+1 {
				w = append(w, frame...)
			}
			if _, err := nc.Write(w); err != nil {
				return
			}
		}
	}()
	var size [4]byte
	failed := 0
	for i := 0; i < n; i++ {
		if _, err := io.ReadFull(nc, size[:]); err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(nc, body); err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = 9
		if err := resp.ReadFrom(body[5:]); err != nil { // correlation id, empty tags
			t.Fatalf("response %d: %v", i, err)
		}
		if resp.Topics[0].Partitions[0].ErrorCode == kerr.KafkaStorageError.Code {
			failed++
		}
	}
	if failed != n {
		t.Fatalf("%d of %d produces failed", failed, n)
	}
	// The limiter's clock has not moved: one window's burst.
	lines := fb.logs.Lines("produce failed", "topic=flood")
	if len(lines) != faultBurst {
		t.Fatalf("%d lines for %d failures in one window, want %d", len(lines), n, faultBurst)
	}
	// The next window: the next failure's line says how many were held.
	fb.now.Add(int64(faultInterval))
	if pr := produceOne(t, fb.testBroker, 9, "flood", 0, encodeBatch(t, 0, -1, -1, []byte("v"))); pr.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("code %d", pr.ErrorCode)
	}
	lines = fb.logs.Lines("produce failed", "topic=flood")
	if len(lines) != faultBurst+1 || !strings.Contains(lines[faultBurst], "suppressed="+strconv.Itoa(n-faultBurst)) {
		t.Fatalf("after the window: %d lines, last %q; want %d lines, the last with suppressed=%d", len(lines), lines[len(lines)-1], faultBurst+1, n-faultBurst)
	}
}

// Refused inputs are WARN lines, one per refused partition; answers a
// client handles by refreshing metadata are DEBUG.
func TestProduceRefusalsAreWarnings(t *testing.T) {
	fb := startFaultBroker(t)
	b := fb.testBroker
	createTopic(t, b, "plain", 1, nil)
	createTopic(t, b, "mirrored", 1, map[string]*string{"mirror.mode": sp("push")})
	bad := encodeBatch(t, 0, -1, -1, []byte("v"))
	bad[len(bad)-1] ^= 1 // the CRC no longer matches
	if pr := produceOne(t, b, 9, "plain", 0, bad); pr.ErrorCode != kerr.CorruptMessage.Code {
		t.Fatalf("corrupt batch: code %d, want CORRUPT_MESSAGE", pr.ErrorCode)
	}
	// A compressed batch whose payload is not valid gzip (decompressed
	// and walked by normal-mode validation).
	poisoned := mirrorBatch(t, 0, time.Now().UnixMilli(), kbatch.CodecGzip, kbatch.Record{Value: []byte(strings.Repeat("x", 200))})
	for i := kbatch.HeaderSize + 12; i < len(poisoned); i++ {
		poisoned[i] ^= 0x5a
	}
	kbatch.SetCRC(poisoned)
	createTopic(t, b, "zipped", 1, nil)
	if pr := produceOne(t, b, 9, "zipped", 0, poisoned); pr.ErrorCode != kerr.InvalidRecord.Code {
		t.Fatalf("undecodable gzip batch: code %d, want INVALID_RECORD", pr.ErrorCode)
	}
	if pr := produceOne(t, b, 9, "mirrored", 0, encodeBatch(t, 0, -1, -1, []byte("v"))); pr.ErrorCode != kerr.PolicyViolation.Code {
		t.Fatalf("ordinary produce to a mirror topic: code %d, want POLICY_VIOLATION", pr.ErrorCode)
	}
	if pr := produceOne(t, b, 9, "nosuchtopic", 0, encodeBatch(t, 0, -1, -1, []byte("v"))); pr.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: code %d", pr.ErrorCode)
	}
	for _, want := range [][]string{
		{"level=WARN", "produce refused", "topic=plain", "partition=0", "error_code=CORRUPT_MESSAGE", "client_id=raw"},
		{"level=WARN", "produce refused", "topic=mirrored", "partition=0", "error_code=POLICY_VIOLATION", "client_id=raw"},
		{"level=WARN", "produce refused", "topic=zipped", "partition=0", "error_code=INVALID_RECORD", "client_id=raw"},
		{"level=DEBUG", "produce refused", "topic=nosuchtopic", "error_code=UNKNOWN_TOPIC_OR_PARTITION"},
	} {
		fb.oneLine(t, want...)
	}
	if n := len(fb.logs.Lines("level=WARN")) + len(fb.logs.Lines("level=ERROR")); n != 3 {
		t.Fatalf("%d WARN/ERROR lines, want 3:\n%s", n, strings.Join(fb.logs.Lines(), "\n"))
	}
}

// The coordinators' failure lines go through the Server's limiter too.
func TestCoordinatorLinesAreRateLimited(t *testing.T) {
	var buf logbuf.Buffer
	now := time.Unix(1000, 0)
	lim := lograte.New(faultInterval, faultBurst, func() time.Time { return now })
	lg := slog.New(limitedHandler{slog.NewTextHandler(&buf, nil), lim}).With("coordinator", "group")
	for range 100 {
		lg.Error("group coordinator write failed", "partition", 3, "err", "no space")
		lg.Info("routine", "partition", 3)
	}
	lg.Error("group coordinator write failed", "partition", 4, "err", "no space") // another key
	if n := len(buf.Lines("write failed", "partition=3")); n != faultBurst {
		t.Fatalf("%d lines for 100 failures of one partition, want %d", n, faultBurst)
	}
	if len(buf.Lines("write failed", "partition=4")) != 1 || len(buf.Lines("routine")) != 100 {
		t.Fatalf("other keys or levels were limited:\n%s", strings.Join(buf.Lines(), "\n"))
	}
	now = now.Add(faultInterval)
	lg.Error("group coordinator write failed", "partition", 3, "err", "no space")
	if got := buf.Lines("write failed", "partition=3", "suppressed=97", "coordinator=group"); len(got) != 1 {
		t.Fatalf("the next window's line does not count the 97 held back:\n%s", strings.Join(buf.Lines("partition=3"), "\n"))
	}
}

// ENOSPC on a transaction state append: NOT_COORDINATOR (Kafka's
// TransactionStateManager answer for a storage error) and one ERROR line
// naming the state partition and the transactional id.
func TestENOSPCOnTransactionStateIsLoggedOnce(t *testing.T) {
	fb := startFaultBroker(t)
	initPid := func() int16 {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version, req.TransactionTimeoutMillis = 4, 60000
		req.TransactionalID = kmsg.StringPtr("tx1")
		req.ProducerID, req.ProducerEpoch = -1, -1
		return rawRequest[*kmsg.InitProducerIDResponse](t, fb.testBroker, req).ErrorCode
	}
	if code := initPid(); code != 0 { // creates __transaction_state
		t.Fatalf("first InitProducerId: code %d", code)
	}
	part := fb.srv.txns.PartitionFor("tx1")
	fb.fs.set("__transaction_state-"+strconv.Itoa(int(part))+"/00000000000000000000.log", syscall.ENOSPC)
	if code := initPid(); code != kerr.NotCoordinator.Code {
		t.Fatalf("InitProducerId on a full disk: code %d, want NOT_COORDINATOR", code)
	}
	line := fb.oneLine(t, "level=ERROR")
	for _, want := range []string{"transaction state not stored", "topic=__transaction_state", "partition=" + strconv.Itoa(int(part)), "transactional_id=tx1", "no space"} {
		if !strings.Contains(line, want) {
			t.Errorf("the error line lacks %q: %s", want, line)
		}
	}
}

// A failed sync takes a partition offline: one ERROR line says so (from
// storage's OnOffline, whatever work hit it: here a flush), and a fetch
// from the offline partition gets one more, with its client and offset.
func TestOfflinePartitionIsLogged(t *testing.T) {
	fb := startFaultBroker(t)
	b := fb.testBroker
	createTopic(t, b, "eio", 1, nil)
	if pr := produceOne(t, b, 9, "eio", 0, encodeBatch(t, 0, -1, -1, []byte("v"))); pr.ErrorCode != 0 {
		t.Fatalf("first produce: code %d", pr.ErrorCode)
	}
	l, err := partitionLog(fb.srv.Topic("eio").Partition(0))
	if err != nil {
		t.Fatal(err)
	}
	fb.fs.set("eio-0/00000000000000000000.log", syscall.EIO)
	if err := l.Flush(); err == nil {
		t.Fatal("flush with a failing sync succeeded")
	}
	fb.fs.set("", nil)
	fb.oneLine(t, "level=ERROR", "partition offline", "topic=eio", "partition=0", "input/output error")
	got := rawRequest[*kmsg.FetchResponse](t, b, fetchReq(12, "eio", 0, 0)).Topics[0].Partitions[0]
	if got.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("fetch from an offline partition: code %d, want KAFKA_STORAGE_ERROR", got.ErrorCode)
	}
	fb.oneLine(t, "level=ERROR", "fetch failed", "topic=eio", "partition=0", "client_id=raw", "offset=0")
}
