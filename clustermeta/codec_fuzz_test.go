package clustermeta

import (
	"reflect"
	"strings"
	"testing"
)

// fuzzKey is the key a fuzz input decodes at: kind picks the record.
func fuzzKey(k Keys, kind uint8, tail string) string {
	switch kind % 7 {
	case 0:
		return k.Prefix + keyBrokers + tail
	case 1:
		return k.Prefix + keyTopics + tail
	case 2:
		return k.Prefix + keyPartitions + tail
	case 3:
		return k.ProducerIDs()
	case 4:
		return k.ClusterID()
	case 5:
		return k.Controller() + tail
	default:
		return k.Prefix + keyRecords + tail
	}
}

// FuzzDecodeValue: a stored value, however corrupt, decodes to a record or
// to an error naming its key, never a panic; what decodes re-encodes to
// the same record; the snapshot builder lists what does not decode.
func FuzzDecodeValue(f *testing.F) {
	k := Keys{Prefix: DefaultPrefix}
	f.Add(uint8(0), "1", EncodeBroker(BrokerInfo{NodeID: 1, Endpoints: []Endpoint{{Listener: "PLAINTEXT", Host: "h", Port: 1}}}))
	tr := TopicRecord{Name: "t", ID: [16]byte{1, 2}, Partitions: 2, Configs: map[string]string{"a": "b"}}
	f.Add(uint8(1), "t", EncodeTopic(tr))
	f.Add(uint8(2), "t/1", EncodePartition(PartitionState{Topic: "t", TopicID: tr.ID, Partition: 1, Replicas: []int32{1, 2}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 3}))
	f.Add(uint8(3), "", EncodeProducerIDs(5000))
	f.Add(uint8(4), "", encodeClusterID("AAAAAAAAAAAAAAAAAAAAAA"))
	f.Add(uint8(5), "694d8a1b", []byte("3"))
	f.Add(uint8(6), "acl/a/b", []byte(`{"x":1}`))
	f.Add(uint8(6), "scram", []byte{})
	f.Add(uint8(2), "t/x", []byte(`{"topic":"t"}`))
	f.Add(uint8(1), "t", []byte(`{"name":"t","id":"short","partitions":1}`))
	f.Fuzz(func(t *testing.T, kind uint8, tail string, value []byte) {
		key := fuzzKey(k, kind, tail)
		var got, again any
		var err error
		switch kind % 7 {
		case 0:
			var b BrokerInfo
			if b, err = DecodeBroker(k, key, value); err == nil {
				got = b
				again, err = DecodeBroker(k, key, EncodeBroker(b))
			}
		case 1:
			var tr TopicRecord
			if tr, err = DecodeTopic(k, key, value); err == nil {
				got = tr
				again, err = DecodeTopic(k, key, EncodeTopic(tr))
			}
		case 2:
			var p PartitionState
			if p, err = DecodePartition(k, key, value); err == nil {
				got = p
				again, err = DecodePartition(k, key, EncodePartition(p))
			}
		case 3:
			var n int64
			if n, err = DecodeProducerIDs(key, value); err == nil {
				got = n
				again, err = DecodeProducerIDs(key, EncodeProducerIDs(n))
			}
		case 4:
			var id string
			if id, err = decodeClusterID(key, value); err == nil {
				got = id
				again, err = decodeClusterID(key, encodeClusterID(id))
			}
		case 5:
			_, err = decodeControllerValue(key, value)
		default:
			// Any value is a record's: only the key can be wrong.
			var rk, rn string
			if rk, rn, err = recordKey(k, key); err == nil && k.Record(rk, rn) != key {
				t.Fatalf("record key %q splits into %q, %q", key, rk, rn)
			}
		}
		if err != nil {
			if !strings.Contains(err.Error(), key) {
				t.Fatalf("error %q does not name key %q", err, key)
			}
		} else if again != nil && !reflect.DeepEqual(normal(got), normal(again)) {
			t.Fatalf("re-encoded %#v decodes to %#v", got, again)
		}
		// The builder keeps what decodes and lists what does not.
		b := NewBuilder(k, "c")
		s := b.Apply(1, []KV{{Key: key, Value: value, CreateRev: 1, ModRev: 1}})
		if kind%7 == 6 && err == nil {
			kn, nm, _ := recordKey(k, key)
			if r, ok := s.Record(kn, nm); !ok || string(r.Value) != string(value) || r.Version != 1 {
				t.Fatalf("record %q in the snapshot: %+v %v", key, r, ok)
			}
		}
		for _, e := range s.Corrupt {
			if !strings.Contains(e.Error(), "clustermeta: corrupt value at ") {
				t.Fatalf("corrupt entry %v", e)
			}
		}
		s = b.Apply(2, []KV{{Key: key, ModRev: 2, Deleted: true}})
		if len(s.Corrupt) != 0 {
			t.Fatalf("deleted key still corrupt: %v", s.Corrupt)
		}
		if len(s.Records) != 0 {
			t.Fatalf("deleted record still listed: %v", s.Records)
		}
	})
}

// normal maps empty slices and maps to nil: JSON does not keep the
// difference between an empty and an absent list.
func normal(v any) any {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Struct {
		return v
	}
	cp := reflect.New(rv.Type()).Elem()
	cp.Set(rv)
	for i := 0; i < cp.NumField(); i++ {
		f := cp.Field(i)
		if (f.Kind() == reflect.Slice || f.Kind() == reflect.Map) && f.Len() == 0 && f.CanSet() {
			f.Set(reflect.Zero(f.Type()))
		}
	}
	return cp.Interface()
}
