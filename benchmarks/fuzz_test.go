package benchmarks

import "testing"

// FuzzParseProduceFrame feeds arbitrary request frames to the sink's
// parser and batch check: errors, never a panic.
func FuzzParseProduceFrame(f *testing.F) {
	for i, l := range []Load{{Topic: "t", BatchBytes: 200}, {Topic: "m", Mirror: true, BatchBytes: 300}} {
		tm, err := buildTemplate(l, int32(i), 1)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(tm.frame[4:])
	}
	f.Add([]byte{0, 0, 0, 3, 0, 0, 0, 1, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, body []byte) {
		_, _, req, err := parseProduceFrame(body)
		if err != nil {
			return
		}
		for _, tp := range req.Topics {
			for _, p := range tp.Partitions {
				n, err := checkBatches(p.Records)
				if err == nil && n <= 0 {
					t.Fatalf("valid record set spanning %d offsets", n)
				}
			}
		}
	})
}

// FuzzCheckProduceResponse feeds arbitrary answers to the generator's
// response check.
func FuzzCheckProduceResponse(f *testing.F) {
	for _, code := range []int16{0, 1, 87} {
		f.Add(produceResponse(1, "t", code, nil))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) < 5 {
			return // the reader refuses frames under 5 bytes before the check
		}
		_ = checkProduceResponse(body)
	})
}

// FuzzParseToolOutput feeds arbitrary text to the Java tool output parsers.
func FuzzParseToolOutput(f *testing.F) {
	f.Add("50000 records sent, 12345.6 records/sec (12.06 MB/sec), 20.5 ms avg latency, 300.0 ms max latency, 15 ms 50th, 40 ms 95th, 120 ms 99th, 250 ms 99.9th.")
	f.Add("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec\n1, 2, 3, 4, 5, 6")
	f.Add("Avg latency: 3.2500 ms\nPercentiles: 50th = 3, 99th = 9, 99.9th = 20")
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = parseProducerPerf(s)
		_, _ = parseConsumerPerf(s, 5)
		_, _ = parseE2E(s)
	})
}
