package brokerconf

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/props"
)

// The general broker properties: identity, the data dir, limits, topic
// and group defaults. Each maps to the broker.Config field its `verbatim
// serve` flag sets.
func init() {
	reg := func(name, doc string, apply func(cfg *broker.Config, v string) error) {
		registerBroker(name, 5, doc, apply)
	}
	reg("node.id", "This broker's node id (--node-id).", func(cfg *broker.Config, v string) error {
		n, err := intIn(v, 0, math.MaxInt32)
		cfg.NodeID = int32(n)
		return err
	})
	// log.dir is Kafka's fallback for log.dirs: applied first, so log.dirs
	// wins when both are set.
	Register(Property{Name: "log.dir", Scope: ScopeBroker, Order: 4, Doc: "The data dir when log.dirs is not set (--data-dir).",
		Apply: func(cfg *broker.Config, _, _, v string) error { return applyLogDirs(cfg, "log.dir", v) }})
	Register(Property{Name: "log.dirs", Scope: ScopeBroker, Order: 5, Doc: "The data dir (--data-dir); exactly one directory.",
		Apply: func(cfg *broker.Config, _, _, v string) error { return applyLogDirs(cfg, "log.dirs", v) }})
	reg("num.partitions", "Partitions of auto-created topics and of CreateTopics with -1 (--num-partitions).", func(cfg *broker.Config, v string) error {
		n, err := intIn(v, 1, math.MaxInt32)
		cfg.DefaultPartitions = int32(n)
		return err
	})
	reg("auto.create.topics.enable", "Create unknown topics on Metadata requests (--auto-create-topics).", func(cfg *broker.Config, v string) error {
		b, err := boolean(v)
		cfg.AutoCreateTopics = b
		return err
	})
	reg("group.initial.rebalance.delay.ms", "How long the first JoinGroup of an empty group waits (--group-initial-rebalance-delay).", func(cfg *broker.Config, v string) error {
		n, err := intIn(v, 0, math.MaxInt32)
		d := time.Duration(n) * time.Millisecond
		cfg.GroupInitialRebalanceDelay = &d
		return err
	})
	reg("socket.request.max.bytes", "Largest request frame (--max-frame-bytes).", func(cfg *broker.Config, v string) error {
		n, err := intIn(v, 64, math.MaxInt32)
		cfg.MaxFrameBytes = int32(n)
		return err
	})
	reg("max.connections.per.ip", "Connections allowed from each IP address (--max-connections-per-ip).", func(cfg *broker.Config, v string) error {
		n, err := intIn(v, 0, math.MaxInt32)
		cfg.MaxConnectionsPerIP = &n
		return err
	})
	reg("max.connections.per.ip.overrides", "host:count,host:count exceptions to max.connections.per.ip (--max-connections-per-ip-overrides).", func(cfg *broker.Config, v string) error {
		cfg.MaxConnectionsPerIPOverrides = v
		return nil
	})
	reg("connections.max.idle.ms", "Idle connections are closed after this (--idle-timeout).", func(cfg *broker.Config, v string) error {
		n, err := intIn(v, 1, math.MaxInt64)
		cfg.IdleTimeout = time.Duration(n) * time.Millisecond
		return err
	})
	reg("fetch.max.bytes", "Most record bytes one Fetch response carries (--fetch-max-bytes).", func(cfg *broker.Config, v string) error {
		n, err := intIn(v, 1024, math.MaxInt32)
		cfg.FetchMaxBytes = int32(n)
		return err
	})
	reg("queued.max.request.bytes", "Request bytes held by all connections together (--max-inflight-bytes); -1: the default.", func(cfg *broker.Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < -1 || n == 0 {
			return fmt.Errorf("%q: must be -1 or a positive number of bytes", v)
		}
		if n > 0 {
			cfg.MaxInFlightBytes = n
		}
		return nil
	})
}

// registerBroker registers a broker-scoped property whose value is used
// trimmed.
func registerBroker(name string, order int, doc string, apply func(cfg *broker.Config, v string) error) {
	Register(Property{Name: name, Scope: ScopeBroker, Order: order, Doc: doc,
		Apply: func(cfg *broker.Config, _, _, v string) error { return apply(cfg, strings.TrimSpace(v)) }})
}

// applyLogDirs sets the data dir: Verbatim keeps one log dir (JBOD is not
// implemented), so a list of several is refused.
func applyLogDirs(cfg *broker.Config, name, v string) error {
	dirs := props.List(v)
	switch len(dirs) {
	case 0:
		return fmt.Errorf("no directory given")
	case 1:
		cfg.DataDir = dirs[0]
		return nil
	}
	return fmt.Errorf("%d directories (%s): Verbatim keeps one log dir per broker (several log dirs, Kafka's JBOD, are not implemented: docs/compat.md); set one", len(dirs), strings.Join(dirs, ", "))
}

func intIn(v string, lo, hi int64) (int, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%q: must be an integer from %d to %d", v, lo, hi)
	}
	return int(n), nil
}

func boolean(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%q: must be true or false", v)
}
