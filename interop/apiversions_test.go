package interop

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawRequest sends one request on a fresh connection and returns the
// response body (after the correlation id; ApiVersions responses always use
// response header v0).
func rawRequest(t *testing.T, addr string, req kmsg.Request, corr int32) []byte {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("verbatim-interop"))
	if _, err := conn.Write(f.AppendRequest(nil, req, corr)); err != nil {
		t.Fatalf("write request: %v", err)
	}
	r := bufio.NewReader(conn)
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		t.Fatalf("read response header: %v", err)
	}
	size := int32(binary.BigEndian.Uint32(hdr[:4]))
	if size < 4 || size > 1<<20 {
		t.Fatalf("response size %d out of range", size)
	}
	if got := int32(binary.BigEndian.Uint32(hdr[4:])); got != corr {
		t.Fatalf("correlation id %d, want %d", got, corr)
	}
	body := make([]byte, size-4)
	if _, err := io.ReadFull(r, body); err != nil {
		t.Fatalf("read response body: %v", err)
	}
	return body
}

func findKey(keys []kmsg.ApiVersionsResponseApiKey, key int16) (kmsg.ApiVersionsResponseApiKey, bool) {
	for _, k := range keys {
		if k.ApiKey == key {
			return k, true
		}
	}
	return kmsg.ApiVersionsResponseApiKey{}, false
}

// assertApiVersions checks what every Kafka broker must do with
// ApiVersions: answer a supported version through franz-go with error 0 and
// a list that includes ApiVersions v0-v4, and answer an unsupported version
// with UNSUPPORTED_VERSION in the v0 response format, still listing the
// supported ApiVersions range. It runs against real Kafka too, which keeps
// these expectations honest.
func assertApiVersions(t *testing.T, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// (1) franz-go: kgo negotiates on connect, then issues our request at
	// the highest version both sides support.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(1))
	if err != nil {
		t.Fatalf("kgo client: %v", err)
	}
	defer cl.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName = "verbatim-interop"
	req.ClientSoftwareVersion = "1"
	kresp, err := cl.Request(ctx, req)
	if err != nil {
		t.Fatalf("franz-go ApiVersions: %v", err)
	}
	resp := kresp.(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("franz-go ApiVersions v%d: error code %d", resp.Version, resp.ErrorCode)
	}
	if len(resp.ApiKeys) == 0 {
		t.Fatalf("franz-go ApiVersions v%d: empty API list", resp.Version)
	}
	av, ok := findKey(resp.ApiKeys, 18)
	if !ok || av.MinVersion != 0 || av.MaxVersion < 4 {
		t.Fatalf("ApiVersions (18) advertised as %+v (found %v), want v0-v4 or more", av, ok)
	}
	t.Logf("franz-go ApiVersions v%d: %d APIs, ApiVersions v%d-v%d", resp.Version, len(resp.ApiKeys), av.MinVersion, av.MaxVersion)

	// (2) A raw v0 request: no client software fields, classic encoding.
	v0 := kmsg.NewPtrApiVersionsRequest()
	v0.Version = 0
	body := rawRequest(t, addr, v0, 7)
	r0 := kmsg.NewPtrApiVersionsResponse()
	r0.Version = 0
	if err := r0.ReadFrom(body); err != nil {
		t.Fatalf("decode ApiVersions v0 response: %v", err)
	}
	if r0.ErrorCode != 0 || len(r0.ApiKeys) == 0 {
		t.Fatalf("ApiVersions v0: error %d, %d keys", r0.ErrorCode, len(r0.ApiKeys))
	}

	// (3) An unsupported version: UNSUPPORTED_VERSION (35), answered in the
	// v0 format, with the ApiVersions range the broker does support.
	bad := kmsg.NewPtrApiVersionsRequest()
	bad.Version = 127
	bad.ClientSoftwareName = "verbatim-interop"
	bad.ClientSoftwareVersion = "1"
	body = rawRequest(t, addr, bad, 9)
	rb := kmsg.NewPtrApiVersionsResponse()
	rb.Version = 0
	if err := rb.ReadFrom(body); err != nil {
		t.Fatalf("decode ApiVersions response to v127 as v0: %v (body % x)", err, body)
	}
	if rb.ErrorCode != 35 {
		t.Fatalf("ApiVersions v127: error code %d, want 35 (UNSUPPORTED_VERSION)", rb.ErrorCode)
	}
	av, ok = findKey(rb.ApiKeys, 18)
	if !ok || av.MinVersion != 0 || av.MaxVersion < 4 {
		t.Fatalf("ApiVersions v127 error response lists ApiVersions as %+v (found %v), want v0-v4 or more", av, ok)
	}
}

// assertKcatSawApiVersions runs `kcat -L -d protocol` and checks from its
// debug log that librdkafka sent ApiVersions and received an answer. kcat
// may still fail later in its sequence (Metadata) against a broker that
// does not answer Metadata yet; only what exists is asserted.
func assertKcatSawApiVersions(t *testing.T, addr string) *Result {
	t.Helper()
	res, err := RunKcat(t, Cmd{Timeout: 60 * time.Second}, "-L", "-b", addr, "-d", "protocol", "-m", "5")
	if res.ExitCode < 0 {
		t.Fatalf("kcat -L did not finish: %v", err)
	}
	log := res.Stderr
	sent := strings.Contains(log, "Sent ApiVersionRequest")
	recv := strings.Contains(log, "Received ApiVersionResponse")
	if !sent || !recv {
		t.Fatalf("kcat -d protocol: sent ApiVersionRequest=%v received ApiVersionResponse=%v\n%s", sent, recv, tail(log, 30))
	}
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "Received ApiVersionResponse") {
			t.Logf("kcat: %s", strings.TrimSpace(l))
			break
		}
	}
	return res
}
