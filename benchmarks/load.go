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
	"net"
	"slices"
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
