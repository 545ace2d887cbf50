package brokerconf

import (
	"fmt"
	"math"
	"strconv"

	"github.com/verbatim-kafka/verbatim/broker"
)

// The log cleaner's properties, mapped to the broker.Config fields that
// serve's --log-cleaner-* and --offsets-topic-segment-bytes flags set.
func init() {
	reg := registerBroker
	reg("log.cleaner.threads", 5, "Goroutines cleaning compacted logs (--log-cleaner-threads; 0: none).", func(cfg *broker.Config, v string) error {
		n, err := intIn(v, 0, 1024)
		cfg.LogCleanerThreads = n
		if n == 0 {
			cfg.LogCleanerThreads = -1 // none
		}
		return err
	})
	// Applied after log.cleaner.threads: false turns the cleaner off
	// whatever the thread count.
	reg("log.cleaner.enable", 6, "false: no log cleaner (compacted topics are not cleaned).", func(cfg *broker.Config, v string) error {
		on, err := boolean(v)
		if err == nil && !on {
			cfg.LogCleanerThreads = -1
		}
		return err
	})
	reg("log.cleaner.dedupe.buffer.size", 5, "Offset-map memory of the cleaner threads together (--log-cleaner-dedupe-buffer-size).", func(cfg *broker.Config, v string) error {
		n, err := intIn(v, 1, math.MaxInt64)
		cfg.LogCleanerDedupeBufferSize = int64(n)
		return err
	})
	reg("log.cleaner.io.max.bytes.per.second", 5, "Cleaner I/O rate (--log-cleaner-io-max-bytes-per-second); Kafka's default, the largest double, is unlimited.", func(cfg *broker.Config, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || math.IsNaN(f) {
			return fmt.Errorf("%q: must be a non-negative number", v)
		}
		if f >= math.MaxFloat64/2 || math.IsInf(f, 1) {
			f = 0 // unlimited
		}
		cfg.LogCleanerIOMaxBytesPerSecond = f
		return nil
	})
	reg("offsets.topic.segment.bytes", 5, "Segment size __consumer_offsets is created with (--offsets-topic-segment-bytes).", func(cfg *broker.Config, v string) error {
		n, err := intIn(v, 1<<20, math.MaxInt32)
		cfg.OffsetsTopicSegmentBytes = int32(n)
		return err
	})
}
