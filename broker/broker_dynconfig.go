package broker

// Dynamic broker configs (owner: the reassignment work): the replication
// throttles Kafka's kafka-reassign-partitions.sh and kafka-configs.sh set
// on BROKER resources, leader.replication.throttled.rate and
// follower.replication.throttled.rate (bytes per second), and
// replica.alter.log.dirs.io.max.bytes.per.second (accepted and stored;
// Verbatim has one log dir, so it has no effect). A resource is a node
// id or "" (the cluster-wide default, kafka-configs.sh --entity-default);
// a broker's effective value is its own, else the default, else
// unthrottled.
//
// In cluster mode they live in the cluster store, records of kind
// "broker-config" named by the node id ("<default>" for the default),
// each a JSON object of the set names, written with compare-and-swap on
// the record's version and fenced by the writer's registration; every
// broker reads them from its applied snapshot. On a single node they are
// kept in memory (gone at restart, as they have no effect there).

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// The dynamic broker configs.
const (
	cfgLeaderThrottleRate   = "leader.replication.throttled.rate"
	cfgFollowerThrottleRate = "follower.replication.throttled.rate"
	cfgAlterLogDirsRate     = "replica.alter.log.dirs.io.max.bytes.per.second"

	// brokerConfigKind is the records' kind in the cluster store.
	brokerConfigKind = "broker-config"
	// defaultBrokerRecord names the cluster-wide default's record.
	defaultBrokerRecord = "<default>"
)

// unthrottled is the throttle rates' default (Kafka's Long.MAX_VALUE).
const unthrottled = int64(math.MaxInt64)

var dynamicBrokerConfigDocs = map[string]string{
	cfgLeaderThrottleRate:   "The rate, in bytes per second, at which a leader sends the replicas listed in a topic's leader.replication.throttled.replicas to their followers.",
	cfgFollowerThrottleRate: "The rate, in bytes per second, at which a follower fetches the replicas listed in a topic's follower.replication.throttled.replicas.",
	cfgAlterLogDirsRate:     "Moves between log dirs' rate, in bytes per second (accepted; Verbatim has one log dir, so no effect).",
}

// brokerDyn is the dynamic broker configs' state (Server.dyn): the single
// node's configs and the effective rates' cache.
type brokerDyn struct {
	mu    sync.Mutex
	local map[string]map[string]string
	// gen counts the single node's changes; cache is throttleRate's.
	gen   atomic.Uint64
	cache atomic.Pointer[rateCache]
}

func brokerRecordName(resource string) string {
	if resource == "" {
		return defaultBrokerRecord
	}
	return resource
}

// dynamicBrokerConfigs are the resource's set configs (a copy) and their
// record's version (0: none).
func (s *Server) dynamicBrokerConfigs(resource string) (map[string]string, int64) {
	if s.cm == nil {
		s.dyn.mu.Lock()
		defer s.dyn.mu.Unlock()
		return maps.Clone(s.dyn.local[resource]), 0
	}
	snap := s.cm.snap.Load()
	if snap == nil {
		return nil, 0
	}
	return decodeBrokerConfigs(snap, resource)
}

func decodeBrokerConfigs(snap *clustermeta.Snapshot, resource string) (map[string]string, int64) {
	rec, ok := snap.Record(brokerConfigKind, brokerRecordName(resource))
	if !ok {
		return nil, 0
	}
	var m map[string]string
	if err := json.Unmarshal(rec.Value, &m); err != nil {
		return nil, rec.Version // a value this build cannot read counts as none
	}
	return m, rec.Version
}

// throttleRate is this broker's effective value of a throttle rate
// (read on every follower fetch: decoded once per snapshot or change).
func (s *Server) throttleRate(name string) int64 {
	var snap *clustermeta.Snapshot
	if s.cm != nil {
		snap = s.cm.snap.Load()
	}
	gen := s.dyn.gen.Load()
	if c := s.dyn.cache.Load(); c != nil && c.snap == snap && c.gen == gen {
		return c.rate(name)
	}
	c := &rateCache{snap: snap, gen: gen, rates: map[string]int64{}}
	for _, res := range []string{"", strconv.Itoa(int(s.cfg.NodeID))} {
		m, _ := s.dynamicBrokerConfigs(res)
		for k, v := range m {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				c.rates[k] = n // the node's own value wins over the default
			}
		}
	}
	s.dyn.cache.Store(c)
	return c.rate(name)
}

// rateCache is the effective dynamic configs of one snapshot (cluster
// mode) or generation of changes (single node).
type rateCache struct {
	snap  *clustermeta.Snapshot
	gen   uint64
	rates map[string]int64
}

func (c *rateCache) rate(name string) int64 {
	if v, ok := c.rates[name]; ok {
		return v
	}
	return unthrottled
}

// checkDynamicBrokerConfig validates one value.
func checkDynamicBrokerConfig(name, value string) error {
	if _, ok := dynamicBrokerConfigDocs[name]; !ok {
		return fmt.Errorf("%w: Cannot update the config %s dynamically: Verbatim's dynamic broker configs are %s, %s and %s.", errInvalidConfig, name, cfgLeaderThrottleRate, cfgFollowerThrottleRate, cfgAlterLogDirsRate)
	}
	if n, err := strconv.ParseInt(value, 10, 64); err != nil || n < 0 {
		return fmt.Errorf("%w: Invalid value %s for configuration %s: a number of bytes per second, at least 0 was expected.", errInvalidConfig, value, name)
	}
	return nil
}

// incrementalAlterBroker applies IncrementalAlterConfigs to a BROKER
// resource: SET and DELETE (APPEND and SUBTRACT are for lists:
// INVALID_CONFIG).
func (s *Server) incrementalAlterBroker(rr *kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	seen := map[string]bool{}
	for _, c := range rr.Configs {
		if seen[c.Name] {
			return kafkaErr(kerr.InvalidRequest, fmt.Sprintf("Error due to duplicate config keys: %s", c.Name))
		}
		seen[c.Name] = true
	}
	return s.alterBrokerConfigs(rr.ResourceName, validateOnly, func(cur map[string]string) error {
		for _, c := range rr.Configs {
			switch c.Op {
			case kmsg.IncrementalAlterConfigOpSet:
				if c.Value == nil {
					return kafkaErr(kerr.InvalidRequest, fmt.Sprintf("Null value not supported for: %s", c.Name))
				}
				if err := checkDynamicBrokerConfig(c.Name, *c.Value); err != nil {
					return err
				}
				cur[c.Name] = *c.Value
			case kmsg.IncrementalAlterConfigOpDelete:
				delete(cur, c.Name)
			case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
				return fmt.Errorf("%w: Config value append is not allowed for config key: %s", errInvalidConfig, c.Name)
			default:
				return kafkaErr(kerr.InvalidRequest, fmt.Sprintf("Unknown operation %d for config %s", int8(c.Op), c.Name))
			}
		}
		return nil
	})
}

// alterBrokerConfigsReplace is AlterConfigs on a BROKER resource: the
// listed configs replace all of the resource's dynamic ones.
func (s *Server) alterBrokerConfigsReplace(rr *kmsg.AlterConfigsRequestResource, validateOnly bool) error {
	next := map[string]string{}
	for _, c := range rr.Configs {
		if c.Value == nil {
			return kafkaErr(kerr.InvalidRequest, fmt.Sprintf("Null value not supported for: %s", c.Name))
		}
		if _, dup := next[c.Name]; dup {
			return kafkaErr(kerr.InvalidRequest, fmt.Sprintf("Error due to duplicate config keys: %s", c.Name))
		}
		if err := checkDynamicBrokerConfig(c.Name, *c.Value); err != nil {
			return err
		}
		next[c.Name] = *c.Value
	}
	return s.alterBrokerConfigs(rr.ResourceName, validateOnly, func(cur map[string]string) error {
		clear(cur)
		maps.Copy(cur, next)
		return nil
	})
}

// alterBrokerConfigs applies change to the resource's configs and stores
// the result (removing the record when nothing is left set).
func (s *Server) alterBrokerConfigs(resource string, validateOnly bool, change func(map[string]string) error) error {
	if s.cm == nil {
		s.dyn.mu.Lock()
		defer s.dyn.mu.Unlock()
		next := maps.Clone(s.dyn.local[resource])
		if next == nil {
			next = map[string]string{}
		}
		if err := change(next); err != nil || validateOnly {
			return err
		}
		if s.dyn.local == nil {
			s.dyn.local = map[string]map[string]string{}
		}
		s.dyn.local[resource] = next
		s.dyn.gen.Add(1)
		s.log.Info("dynamic broker configs altered", "resource", resource, "configs", next)
		return nil
	}
	return s.cm.alterBrokerConfigs(resource, validateOnly, change)
}

func (cm *clusterMode) alterBrokerConfigs(resource string, validateOnly bool, change func(map[string]string) error) error {
	const op = "altering dynamic broker configs"
	ctx, cancel := cm.writeCtx()
	defer cancel()
	sess := cm.session.Load()
	if sess == nil {
		return storeErr(op, clustermeta.ErrFenced)
	}
	var rev int64
	var next map[string]string
	err := cm.retryConflict(ctx, func(snap *clustermeta.Snapshot) error {
		cur, version := decodeBrokerConfigs(snap, resource)
		next = maps.Clone(cur)
		if next == nil {
			next = map[string]string{}
		}
		if err := change(next); err != nil || validateOnly {
			return err
		}
		if maps.Equal(cur, next) && (version != 0 || len(next) == 0) {
			return nil
		}
		var err error
		if len(next) == 0 {
			rev, err = cm.store.DeleteRecord(ctx, sess.Fence(), brokerConfigKind, brokerRecordName(resource), version)
			return storeWriteErr(op, err)
		}
		value, err := json.Marshal(next)
		if err != nil {
			return err
		}
		expect := version
		if expect == 0 {
			expect = clustermeta.MustNotExist
		}
		rev, err = cm.store.PutRecord(ctx, sess.Fence(), brokerConfigKind, brokerRecordName(resource), value, expect)
		return storeWriteErr(op, err)
	})
	switch {
	case errors.Is(err, clustermeta.ErrConflict), errors.Is(err, clustermeta.ErrNotFound):
		return storeErr(op, err)
	case err != nil:
		return err
	}
	if rev != 0 {
		if !cm.awaitRevision(ctx, rev) {
			return notSeenYet(op)
		}
		cm.s.log.Info("dynamic broker configs altered", "resource", resource, "configs", next)
	}
	return nil
}

// dynamicBrokerEntries are the DescribeConfigs entries of the dynamic
// broker configs of a resource: for a node id every one, with its source
// (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG or
// DEFAULT_CONFIG); for the default ("") the ones set.
func (s *Server) dynamicBrokerEntries(resource string) []brokerConfigEntry {
	def, _ := s.dynamicBrokerConfigs("")
	var own map[string]string
	if resource != "" {
		own, _ = s.dynamicBrokerConfigs(resource)
	}
	var out []brokerConfigEntry
	for _, name := range []string{cfgFollowerThrottleRate, cfgLeaderThrottleRate, cfgAlterLogDirsRate} {
		e := brokerConfigEntry{name: name, value: strconv.FormatInt(unthrottled, 10), typ: kmsg.ConfigTypeLong,
			source: kmsg.ConfigSourceDefaultConfig, doc: dynamicBrokerConfigDocs[name], dynamic: true}
		if v, ok := own[name]; ok {
			e.value, e.source = v, kmsg.ConfigSourceDynamicBrokerConfig
		} else if v, ok := def[name]; ok {
			e.value, e.source = v, kmsg.ConfigSourceDynamicDefaultBrokerConfig
		} else if resource == "" {
			continue
		}
		out = append(out, e)
	}
	return out
}
