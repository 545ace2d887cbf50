package benchmarks

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/kbatch"
	"github.com/verbatim-kafka/verbatim/wireext"
)

// ProduceVersion is the Produce version the raw generator speaks: the first
// flexible one (tagged fields, so mirror produces are possible) that still
// names topics (v13 switched to topic IDs).
const ProduceVersion = 9

// Load describes one run of the raw produce generator: Conns connections,
// each writing partition i of Topic with up to InFlight requests pipelined,
// every request carrying one pre-encoded batch of BatchBytes bytes (header
// included). In Mirror mode the requests are mirror produces: each batch is
// patched to the next base offset of its partition (outside the CRC) and
// carries the matching ExpectedLogEndOffset, so one connection is the one
// writer of its partition.
type Load struct {
	Addr string
	// Addrs, when set, gives each connection its own server: connection i
	// dials Addrs[i] (the leader of its partition in a cluster) instead of
	// Addr.
	Addrs      []string
	Topic      string
	Mirror     bool
	BatchBytes int
	Conns      int
	InFlight   int
	TotalBytes int64
	// FirstPartition offsets the partitions used (connection i writes
	// partition FirstPartition+i).
	FirstPartition int32
	// StartOffsets, in mirror mode, are the log end offsets of the
	// partitions before the run (nil: all 0).
	StartOffsets []int64
	// Register (mirror mode, a Verbatim destination; the reference sink
	// checks no writer) registers WriterID as the partitions' mirror
	// writer first (docs/protocol.md "Writer epoch"); every mirror
	// produce then carries the epoch assigned (writerEpoch).
	Register bool
	// RegisterSASL logs the registration's connection in where
	// Authenticate logs the load's connections in.
	RegisterSASL sasl.Mechanism
	WriterID     [16]byte
	writerEpoch  int32
	// RecordBytes is the value size of each record (default 1000).
	RecordBytes int
	// Codec compresses each batch (BuildCompressedBatch); CodecNone sends
	// BuildBatch's uncompressed ones.
	Codec kbatch.Codec
	// Timeout bounds the whole run.
	Timeout time.Duration
	// OnStart, if set, is called once the requests are encoded and the
	// connections open, just before the first request is sent.
	OnStart func()
	// TLS, when set, makes every connection a TLS client (handshake done
	// before OnStart).
	TLS *tls.Config
	// Authenticate, when set, runs on every connection after its TLS
	// handshake, before OnStart (SASL).
	Authenticate func(net.Conn) error
}

// LoadResult is what one generator run measured.
type LoadResult struct {
	Bytes     int64
	Requests  int
	Records   int64
	Elapsed   time.Duration
	Latencies []time.Duration // one per request, sorted
	// EndOffsets, in mirror mode, are the partitions' log ends afterwards.
	EndOffsets []int64
}

// MBps is the throughput in MB (10^6 bytes) per second.
func (r LoadResult) MBps() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Bytes) / 1e6 / r.Elapsed.Seconds()
}

// Percentile returns the q-quantile (0..1) of the request latencies in ms.
func (r LoadResult) Percentile(q float64) float64 {
	return percentileMs(r.Latencies, q)
}

func percentileMs(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return float64(sorted[i]) / 1e6
}

// BuildBatch returns a valid uncompressed v2 batch of exactly size bytes
// (at least 100) holding records with values of about recordBytes bytes
// of pseudo-random data, base offset 0, no producer id.
func BuildBatch(size, recordBytes int, seed uint64) ([]byte, int, error) {
	if size < 100 {
		return nil, 0, fmt.Errorf("batch size %d too small", size)
	}
	if recordBytes <= 0 {
		recordBytes = 1000
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	fill := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	// Estimate how many full records fit, back off while the encoding is
	// too long, then size the last value so the batch is exactly size bytes.
	key := []byte("k")
	var recs []kbatch.Record
	encode := func() ([]byte, error) {
		for i := range recs {
			recs[i].OffsetDelta = int32(i)
		}
		b := kbatch.NewBatch(1_700_000_000_000, recs...)
		b.LeaderEpoch = 0
		return kbatch.Encode(b)
	}
	n := max(1, (size-kbatch.HeaderSize)/(recordBytes+16))
	for range n {
		recs = append(recs, kbatch.Record{Key: key, Value: fill(recordBytes)})
	}
	for len(recs) > 1 {
		enc, err := encode()
		if err != nil {
			return nil, 0, err
		}
		if len(enc) <= size {
			break
		}
		recs = recs[:len(recs)-1]
	}
	// Adjust the last value (or add one) to hit size exactly; varint
	// lengths may shift by a byte, so search around the estimate.
	last := &recs[len(recs)-1]
	base, err := encode()
	if err != nil {
		return nil, 0, err
	}
	want := len(last.Value) + size - len(base)
	for try := max(0, want+4); try >= 0 && try > want-8; try-- {
		last.Value = fill(try)
		enc, err := encode()
		if err != nil {
			return nil, 0, err
		}
		if len(enc) == size {
			return enc, len(recs), nil
		}
	}
	return nil, 0, fmt.Errorf("cannot build a batch of exactly %d bytes", size)
}

// BuildCompressedBatch returns a valid v2 batch compressed with codec, as
// close to size bytes on the wire as whole records allow (never over it),
// holding records with text-like values of about recordBytes bytes
// (TextValue), base offset 0, no producer id.
func BuildCompressedBatch(size, recordBytes int, codec kbatch.Codec, seed uint64) ([]byte, int, error) {
	if size < 100 {
		return nil, 0, fmt.Errorf("batch size %d too small", size)
	}
	if recordBytes <= 0 {
		recordBytes = 1000
	}
	key := compressedKey{size, recordBytes, codec, seed}
	compressedMu.Lock()
	defer compressedMu.Unlock()
	if c, ok := compressedCache[key]; ok {
		return c.batch, c.records, nil
	}
	rng := rand.New(rand.NewPCG(seed, 0x7e47))
	var recs []kbatch.Record
	// n records encoded; the records are generated once, so a prefix of n
	// is the same whatever was tried before.
	encode := func(n int) ([]byte, error) {
		for len(recs) < n {
			recs = append(recs, kbatch.Record{OffsetDelta: int32(len(recs)), Key: []byte("k"), Value: TextValue(rng, recordBytes)})
		}
		b := kbatch.NewBatch(1_700_000_000_000, recs[:n]...)
		b.LeaderEpoch = 0
		b.Attributes = int16(codec)
		return kbatch.Encode(b)
	}
	// The compressed size grows with the number of records: double until
	// over size, then bisect for the most records that fit.
	fits := func(n int) ([]byte, bool, error) {
		enc, err := encode(n)
		return enc, err == nil && len(enc) <= size, err
	}
	best, ok, err := fits(1)
	if err != nil {
		return nil, 0, err
	}
	if !ok {
		return nil, 0, fmt.Errorf("one %d-byte record compressed with %s is over %d bytes", recordBytes, codec, size)
	}
	lo, hi := 1, 2
	for {
		enc, ok, err := fits(hi)
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			break
		}
		best, lo, hi = enc, hi, 2*hi
		if hi > 1<<22 {
			return nil, 0, errors.New("compressed batch does not grow")
		}
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		enc, ok, err := fits(mid)
		if err != nil {
			return nil, 0, err
		}
		if ok {
			best, lo = enc, mid
		} else {
			hi = mid
		}
	}
	compressedCache[key] = compressedBatch{best, lo}
	return best, lo, nil
}

// Compressed batches are costly to build (a bisection of compressions)
// and every run of a scenario asks for the same ones.
type compressedKey struct {
	size, recordBytes int
	codec             kbatch.Codec
	seed              uint64
}

type compressedBatch struct {
	batch   []byte
	records int
}

var (
	compressedMu    sync.Mutex
	compressedCache = map[compressedKey]compressedBatch{}
)

// parseCodecs maps codec names (default: none).
func parseCodecs(names []string) ([]kbatch.Codec, error) {
	if len(names) == 0 {
		return []kbatch.Codec{kbatch.CodecNone}, nil
	}
	var out []kbatch.Codec
	for _, n := range names {
		c, ok := codecByName[n]
		if !ok {
			return nil, fmt.Errorf("unknown codec %q (none, gzip, snappy, lz4, zstd)", n)
		}
		out = append(out, c)
	}
	return out, nil
}

var codecByName = map[string]kbatch.Codec{"none": kbatch.CodecNone, "gzip": kbatch.CodecGzip, "snappy": kbatch.CodecSnappy,
	"lz4": kbatch.CodecLZ4, "zstd": kbatch.CodecZstd}

// textWords are the vocabulary of TextValue.
var textWords = []string{"offset", "epoch", "leader", "batch", "record", "mirror", "consumer", "topic", "partition",
	"segment", "replica", "producer", "commit", "abort", "fetch", "index", "timestamp", "cluster", "broker", "group"}

// TextValue returns n bytes of log-like text (key=value fields from a
// small vocabulary, numbers, ids, message words) that compresses about 4x
// with gzip and zstd, 2.5x with LZ4 and snappy: neither zeros nor random
// bytes.
func TextValue(rng *rand.Rand, n int) []byte {
	b := make([]byte, 0, n+64)
	for len(b) < n {
		b = append(b, "level="...)
		b = append(b, [...]string{"INFO", "WARN", "DEBUG", "ERROR"}[rng.IntN(4)]...)
		b = append(b, " topic="...)
		b = append(b, textWords[rng.IntN(len(textWords))]...)
		b = append(b, " partition="...)
		b = strconv.AppendUint(b, uint64(rng.IntN(64)), 10)
		b = append(b, " offset="...)
		b = strconv.AppendUint(b, uint64(rng.IntN(1_000_000)), 10)
		b = append(b, " id="...)
		b = strconv.AppendUint(b, uint64(rng.Uint32()), 16)
		b = append(b, " msg="...)
		for range 1 + rng.IntN(4) {
			b = append(b, textWords[rng.IntN(len(textWords))]...)
			b = append(b, ' ')
		}
		b = append(b, '\n')
	}
	return b[:n]
}

// sentinel is a log end offset that cannot appear by chance in an encoded
// request; its position in the template is where the real one is patched.
const sentinel = int64(0x7e5a5a5a5a5a5a01)

// template is one connection's pre-encoded request with the positions of
// the fields patched per request.
type template struct {
	frame     []byte
	corrAt    int
	batchAt   int
	expectAt  int // -1 outside mirror mode
	records   int64
	batchSize int
}

func buildTemplate(l Load, partition int32, seed uint64) (*template, error) {
	batch, n, err := BuildBatch(l.BatchBytes, l.RecordBytes, seed)
	if l.Codec != kbatch.CodecNone {
		batch, n, err = BuildCompressedBatch(l.BatchBytes, l.RecordBytes, l.Codec, seed)
	}
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version = ProduceVersion
	req.Acks = -1
	req.TimeoutMillis = 30000
	if l.Mirror {
		req.UnknownTags.Set(wireext.MirrorTag, (&wireext.MirrorProduce{WriterEpoch: l.writerEpoch, WriterID: l.WriterID}).AppendTo(nil))
	}
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = l.Topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = batch
	if l.Mirror {
		mp := wireext.MirrorPartition{ExpectedLogEndOffset: sentinel, CurrentLeaderEpoch: -1}
		rp.UnknownTags.Set(wireext.MirrorTag, mp.AppendTo(nil))
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	frame := make([]byte, 4, 64+len(batch))
	frame = binary.BigEndian.AppendUint16(frame, 0) // Produce
	frame = binary.BigEndian.AppendUint16(frame, ProduceVersion)
	corrAt := len(frame)
	frame = binary.BigEndian.AppendUint32(frame, 0)
	client := "bench-ingest"
	frame = binary.BigEndian.AppendUint16(frame, uint16(len(client)))
	frame = append(frame, client...)
	frame = append(frame, 0) // request header v2 tagged fields
	frame = req.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	t := &template{frame: frame, corrAt: corrAt, expectAt: -1, records: int64(n), batchSize: len(batch)}
	t.batchAt = bytes.Index(frame, batch)
	if t.batchAt < 0 {
		return nil, errors.New("batch not found in the encoded request")
	}
	if l.Mirror {
		var s [8]byte
		binary.BigEndian.PutUint64(s[:], uint64(sentinel))
		t.expectAt = bytes.Index(frame, s[:])
		if t.expectAt < 0 {
			return nil, errors.New("mirror tag not found in the encoded request")
		}
	}
	return t, nil
}

// RunLoad drives l against a server and returns what it measured. It fails
// on the first error answer, malformed response or I/O error.
func RunLoad(ctx context.Context, l Load) (LoadResult, error) {
	if l.Conns <= 0 || l.InFlight <= 0 || l.BatchBytes <= 0 {
		return LoadResult{}, errors.New("load: conns, in-flight and batch bytes must be positive")
	}
	if l.Timeout <= 0 {
		l.Timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, l.Timeout)
	defer cancel()
	perConn := int((l.TotalBytes/int64(l.Conns) + int64(l.BatchBytes) - 1) / int64(l.BatchBytes))
	perConn = max(perConn, 2*l.InFlight)
	if l.Mirror && l.Register {
		parts := make([]int32, l.Conns)
		for i := range parts {
			parts[i] = l.FirstPartition + int32(i)
		}
		var err error
		if l.writerEpoch, err = RegisterMirrorWriter(ctx, l.Addr, client.Options{TLS: l.TLS, SASL: l.RegisterSASL}, l.Topic, l.WriterID, parts); err != nil {
			return LoadResult{}, err
		}
	}
	tmpls := make([]*template, l.Conns)
	conns := make([]net.Conn, l.Conns)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	var d net.Dialer
	for i := range l.Conns {
		t, err := buildTemplate(l, l.FirstPartition+int32(i), uint64(i+1))
		if err != nil {
			return LoadResult{}, err
		}
		tmpls[i] = t
		addr := l.Addr
		if i < len(l.Addrs) {
			addr = l.Addrs[i]
		}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return LoadResult{}, err
		}
		if l.TLS != nil {
			tc := tls.Client(c, l.TLS)
			if err := tc.HandshakeContext(ctx); err != nil {
				c.Close()
				return LoadResult{}, fmt.Errorf("TLS handshake: %w", err)
			}
			c = tc
		}
		if l.Authenticate != nil {
			if err := l.Authenticate(c); err != nil {
				c.Close()
				return LoadResult{}, fmt.Errorf("authentication: %w", err)
			}
		}
		conns[i] = c
	}
	stop := context.AfterFunc(ctx, func() {
		for _, c := range conns {
			c.SetDeadline(time.Unix(1, 0))
		}
	})
	defer stop()

	lats := make([][]time.Duration, l.Conns)
	ends := make([]int64, l.Conns)
	errs := make([]error, l.Conns)
	var wg sync.WaitGroup
	if l.OnStart != nil {
		l.OnStart()
	}
	start := time.Now()
	for i := range l.Conns {
		var first int64
		if i < len(l.StartOffsets) {
			first = l.StartOffsets[i]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			lats[i], ends[i], errs[i] = runConn(conns[i], tmpls[i], perConn, l.InFlight, first)
			if errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	for i, err := range errs {
		if err != nil {
			if ctx.Err() != nil && !errors.Is(err, errAnswer) {
				return LoadResult{}, fmt.Errorf("connection %d: %w (%v)", i, err, context.Cause(ctx))
			}
			return LoadResult{}, fmt.Errorf("connection %d: %w", i, err)
		}
	}
	res := LoadResult{Elapsed: elapsed, EndOffsets: ends}
	for i, ls := range lats {
		res.Requests += len(ls)
		res.Bytes += int64(len(ls)) * int64(tmpls[i].batchSize)
		res.Records += int64(len(ls)) * tmpls[i].records
		res.Latencies = append(res.Latencies, ls...)
	}
	slices.Sort(res.Latencies)
	return res, nil
}

var errAnswer = errors.New("error answer")

// runConn sends n requests on c with up to inFlight outstanding and reads
// the answers in order. Steady state allocates nothing.
func runConn(c net.Conn, t *template, n, inFlight int, first int64) ([]time.Duration, int64, error) {
	frame := t.frame
	sem := make(chan struct{}, inFlight)
	sent := make([]time.Time, n)
	lats := make([]time.Duration, n)
	readErr := make(chan error, 1)
	go func() {
		r := bufio.NewReaderSize(c, 64<<10)
		var hdr [4]byte
		buf := make([]byte, 4096)
		for i := range n {
			if _, err := io.ReadFull(r, hdr[:]); err != nil {
				readErr <- fmt.Errorf("reading answer %d: %w", i, err)
				return
			}
			size := int(binary.BigEndian.Uint32(hdr[:]))
			if size < 5 || size > 1<<20 {
				readErr <- fmt.Errorf("answer %d: bad frame size %d", i, size)
				return
			}
			if cap(buf) < size {
				buf = make([]byte, size)
			}
			body := buf[:size]
			if _, err := io.ReadFull(r, body); err != nil {
				readErr <- fmt.Errorf("reading answer %d: %w", i, err)
				return
			}
			lats[i] = time.Since(sent[i])
			if corr := int32(binary.BigEndian.Uint32(body)); corr != int32(i) {
				readErr <- fmt.Errorf("answer %d has correlation id %d", i, corr)
				return
			}
			if err := checkProduceResponse(body); err != nil {
				readErr <- fmt.Errorf("answer %d: %w", i, err)
				return
			}
			<-sem
		}
		readErr <- nil
	}()
	next := first
	for i := range n {
		select {
		case sem <- struct{}{}:
		case err := <-readErr:
			if err == nil {
				err = errors.New("reader ended early")
			}
			return nil, 0, err
		}
		binary.BigEndian.PutUint32(frame[t.corrAt:], uint32(i))
		if t.expectAt >= 0 {
			binary.BigEndian.PutUint64(frame[t.batchAt:], uint64(next))
			binary.BigEndian.PutUint64(frame[t.expectAt:], uint64(next))
			next += t.records
		}
		sent[i] = time.Now()
		if _, err := c.Write(frame); err != nil {
			return nil, 0, fmt.Errorf("writing request %d: %w", i, err)
		}
	}
	if err := <-readErr; err != nil {
		return nil, 0, err
	}
	return lats, next, nil
}

// errMalformedProduce is made once: an error made per call would be one
// allocation per request, which the in-process count charges to the broker.
var errMalformedProduce = errors.New("malformed produce response")

// checkProduceResponse reads the error code of the first partition of a
// flexible Produce response (after the correlation id) without allocating;
// on an error it decodes the whole response for the message.
func checkProduceResponse(body []byte) error {
	b := body[4:]
	fail := errMalformedProduce
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	skipTags := func() bool {
		t := wireext.ReadTags(b)
		for t.Next() {
		}
		b = t.Rest()
		return t.Err() == nil
	}
	if !skipTags() { // response header v1
		return fail
	}
	if v, ok := uv(); !ok || v != 2 { // one topic
		return fail
	}
	l, ok := uv()
	if !ok || l == 0 || uint64(len(b)) < l-1 {
		return fail
	}
	b = b[l-1:]
	if v, ok := uv(); !ok || v != 2 { // one partition
		return fail
	}
	if len(b) < 6 {
		return fail
	}
	code := int16(binary.BigEndian.Uint16(b[4:]))
	if code == 0 {
		return nil
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = ProduceVersion
	msg := ""
	if err := resp.ReadFrom(body[5:]); err == nil && len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
		if m := resp.Topics[0].Partitions[0].ErrorMessage; m != nil {
			msg = *m
		}
	}
	return fmt.Errorf("%w: %v: %s", errAnswer, kerr.ErrorForCode(code), msg)
}
