package clustermeta

import (
	"maps"
	"sort"
	"strings"
)

// KV is one key's state as a Store implementation hands it to a Builder:
// its value and revisions, or its deletion.
type KV struct {
	Key       string
	Value     []byte
	CreateRev int64
	ModRev    int64
	// Deleted: the key was removed at ModRev.
	Deleted bool
}

// Builder turns the keys under one prefix into Snapshots, copy-on-write:
// each Apply returns a new Snapshot that shares every map entry and
// partition slice the change did not touch with the one before, so
// delivered snapshots stay immutable. A Builder is used by one goroutine.
type Builder struct {
	keys      Keys
	clusterID string
	cur       *Snapshot
	// parts are the decoded partition states by topic and index (the
	// snapshot's slices are rebuilt from them for the topics a change
	// touches); candidates are the controller election's keys.
	parts      map[string]map[int32]PartitionState
	candidates map[string]candidate
	corrupt    map[string]error
}

type candidate struct {
	createRev int64
	node      int32
}

// NewBuilder starts from the empty state.
func NewBuilder(k Keys, clusterID string) *Builder {
	return &Builder{
		keys: k, clusterID: clusterID,
		cur: &Snapshot{
			ClusterID: clusterID, Controller: NoLeader,
			Brokers: map[int32]BrokerInfo{}, Topics: map[string]TopicRecord{},
			Partitions: map[string][]PartitionState{},
			Records:    map[string]map[string]Record{},
		},
		parts:      map[string]map[int32]PartitionState{},
		candidates: map[string]candidate{},
		corrupt:    map[string]error{},
	}
}

// Load replaces the state with the keys read at rev (a range read of the
// whole prefix).
func (b *Builder) Load(rev int64, kvs []KV) *Snapshot {
	*b = *NewBuilder(b.keys, b.clusterID)
	return b.Apply(rev, kvs)
}

// Current is the latest snapshot built.
func (b *Builder) Current() *Snapshot { return b.cur }

// Apply applies the changes of one or more revisions, rev the last, and
// returns the new snapshot. A value that does not decode leaves its
// record out and is listed in Snapshot.Corrupt until the key changes.
func (b *Builder) Apply(rev int64, kvs []KV) *Snapshot {
	next := *b.cur
	next.Revision = rev
	var brokersCopied, topicsCopied bool
	// kindsCopied are the record kinds whose inner map this Apply copied
	// (the outer map is copied with the first).
	var kindsCopied map[string]bool
	dirty := map[string]bool{}
	controllerChanged, corruptChanged := false, false
	for _, kv := range kvs {
		if _, was := b.corrupt[kv.Key]; was {
			delete(b.corrupt, kv.Key)
			corruptChanged = true
		}
		rest, ok := strings.CutPrefix(kv.Key, b.keys.Prefix)
		if !ok {
			continue
		}
		bad := func(err error) {
			b.corrupt[kv.Key] = err
			corruptChanged = true
		}
		switch {
		case strings.HasPrefix(rest, keyBrokers):
			if !brokersCopied {
				next.Brokers, brokersCopied = maps.Clone(next.Brokers), true
			}
			if kv.Deleted {
				if id, err := DecodeBrokerKey(b.keys, kv.Key); err == nil {
					delete(next.Brokers, id)
				}
				continue
			}
			br, err := DecodeBroker(b.keys, kv.Key, kv.Value)
			if err != nil {
				if id, kerr := DecodeBrokerKey(b.keys, kv.Key); kerr == nil {
					delete(next.Brokers, id)
				}
				bad(err)
				continue
			}
			br.Epoch = kv.CreateRev
			next.Brokers[br.NodeID] = br
		case strings.HasPrefix(rest, keyTopics):
			if !topicsCopied {
				next.Topics, topicsCopied = maps.Clone(next.Topics), true
			}
			name := strings.TrimPrefix(rest, keyTopics)
			dirty[name] = true
			if kv.Deleted {
				delete(next.Topics, name)
				continue
			}
			t, err := DecodeTopic(b.keys, kv.Key, kv.Value)
			if err != nil {
				delete(next.Topics, name)
				bad(err)
				continue
			}
			t.Version = kv.ModRev
			next.Topics[name] = t
		case strings.HasPrefix(rest, keyPartitions):
			topic, n, err := partitionKey(b.keys, kv.Key)
			if err != nil {
				if !kv.Deleted {
					bad(err)
				}
				continue
			}
			dirty[topic] = true
			if kv.Deleted {
				delete(b.parts[topic], n)
				continue
			}
			p, err := DecodePartition(b.keys, kv.Key, kv.Value)
			if err != nil {
				delete(b.parts[topic], n)
				bad(err)
				continue
			}
			p.Version = kv.ModRev
			if b.parts[topic] == nil {
				b.parts[topic] = map[int32]PartitionState{}
			}
			b.parts[topic][n] = p
		case strings.HasPrefix(rest, keyRecords):
			kind, name, err := recordKey(b.keys, kv.Key)
			if err != nil {
				if !kv.Deleted {
					bad(err)
				}
				continue
			}
			if kindsCopied == nil {
				next.Records, kindsCopied = maps.Clone(next.Records), map[string]bool{}
			}
			if !kindsCopied[kind] {
				next.Records[kind], kindsCopied[kind] = maps.Clone(next.Records[kind]), true
			}
			if kv.Deleted {
				delete(next.Records[kind], name)
				if len(next.Records[kind]) == 0 {
					delete(next.Records, kind)
				}
				continue
			}
			if next.Records[kind] == nil {
				next.Records[kind] = map[string]Record{}
			}
			next.Records[kind][name] = Record{Value: kv.Value, Version: kv.ModRev}
		case strings.HasPrefix(rest, keyController):
			controllerChanged = true
			if kv.Deleted {
				delete(b.candidates, kv.Key)
				continue
			}
			node, err := decodeControllerValue(kv.Key, kv.Value)
			if err != nil {
				delete(b.candidates, kv.Key)
				bad(err)
				continue
			}
			b.candidates[kv.Key] = candidate{createRev: kv.CreateRev, node: node}
		}
	}
	if len(dirty) > 0 {
		next.Partitions = maps.Clone(next.Partitions)
		for topic := range dirty {
			b.rebuild(&next, topic)
		}
	}
	if controllerChanged {
		next.Controller = b.controller()
	}
	if corruptChanged {
		next.Corrupt = b.corruptList()
	}
	b.cur = &next
	return b.cur
}

// rebuild sets the topic's partition slice: index = partition, length =
// the topic's partition count; an index without a (decodable) state is a
// placeholder without leader or version.
func (b *Builder) rebuild(s *Snapshot, topic string) {
	t, ok := s.Topics[topic]
	if !ok {
		delete(s.Partitions, topic)
		if len(b.parts[topic]) == 0 {
			delete(b.parts, topic)
		}
		return
	}
	ps := make([]PartitionState, t.Partitions)
	for i := range ps {
		p, ok := b.parts[topic][int32(i)]
		if !ok {
			p = PartitionState{Topic: topic, TopicID: t.ID, Partition: int32(i), Leader: NoLeader}
		}
		ps[i] = p
	}
	s.Partitions[topic] = ps
}

// controller is the election's winner: the candidate key with the lowest
// create revision (concurrency.Election's rule).
func (b *Builder) controller() int32 {
	best, node := int64(0), NoLeader
	for _, c := range b.candidates {
		if best == 0 || c.createRev < best {
			best, node = c.createRev, c.node
		}
	}
	return node
}

func (b *Builder) corruptList() []error {
	if len(b.corrupt) == 0 {
		return nil
	}
	keys := make([]string, 0, len(b.corrupt))
	for k := range b.corrupt {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]error, len(keys))
	for i, k := range keys {
		out[i] = b.corrupt[k]
	}
	return out
}
