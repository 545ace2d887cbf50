package broker

import (
	"encoding/json"
	"testing"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// FuzzMirrorRecord feeds arbitrary bytes as a mirror topic's record in
// the cluster store (mirror_state_cluster.go): adopting it never panics,
// a record it accepts names the topic and has a known state, is cached
// at the record's version, and re-encodes to a record it accepts again.
func FuzzMirrorRecord(f *testing.F) {
	id := addMirrorStateSeeds(f, 2)
	f.Add([]byte(`{"state":"stopped","topic_id":"00"}`))
	f.Add([]byte(`{"state":"x","topic_id":"0102030405060708090a0b0c0d0e0f10"}`))
	f.Add([]byte(`{"state":"mirroring","topic_id":"0102030405060708090a0b0c0d0e0f10","partitions":[{"writer_id":"zz"}]}`))
	f.Add([]byte(`{"state":"mirroring","topic_id":"0102030405060708090a0b0c0d0e0f10","partitions":[{"writer_epoch":0,"source_start":{"offset":3,"epoch":1}},{"source_start":null}]}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &Server{}
		tp := &Topic{Name: "m", ID: id}
		s.mirror.mu.Lock()
		defer s.mirror.mu.Unlock()
		st, err := s.adoptMirrorRecordLocked(tp, clustermeta.Record{Value: data, Version: 7})
		if err != nil {
			if s.mirror.topics[id] != nil {
				t.Fatalf("a refused record was cached: %v", err)
			}
			return
		}
		switch st.State {
		case mirrorStateMirroring, mirrorStateStopping, mirrorStateStopped:
		default:
			t.Fatalf("accepted state %q", st.State)
		}
		if s.mirror.topics[id] != st || s.mirror.versions[id] != 7 || st.TopicID != "0102030405060708090a0b0c0d0e0f10" {
			t.Fatalf("cached %p at %d (topic id %q), want %p at 7", s.mirror.topics[id], s.mirror.versions[id], st.TopicID, st)
		}
		again, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.adoptMirrorRecordLocked(tp, clustermeta.Record{Value: again, Version: 8}); err != nil {
			t.Fatalf("the re-encoded record is refused: %v\n%s", err, again)
		}
	})
}

// addMirrorStateSeeds adds a valid state of the given version in each
// mirror state as seeds and returns its topic id.
func addMirrorStateSeeds(f *testing.F, version int) [16]byte {
	valid := mirrorTopicState{Version: version, Topic: "m", TopicID: "0102030405060708090a0b0c0d0e0f10", State: mirrorStateStopping,
		SourceClusterID: "src", TargetConfigs: map[string]string{"retention.ms": "1"},
		Partitions: []mirrorPartitionState{newMirrorPartitionState(), {WriterEpoch: 9, Stopping: true, LastMirroredOffset: 4, LastMirroredEpoch: 2, StopFrom: 5, NewEpoch: 13, Stopped: version > 1}}}
	for _, st := range []string{mirrorStateMirroring, mirrorStateStopping, mirrorStateStopped} {
		v := valid
		v.State = st
		b, _ := json.Marshal(v)
		f.Add(b)
	}
	return [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
}
