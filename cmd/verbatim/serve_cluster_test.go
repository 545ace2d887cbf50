package main

import (
	"net"
	"reflect"
	"testing"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/clustermeta"
)

// The controlled shutdown waits only for leaderships another live, not
// shutting down, in-sync replica can take.
func TestMovableLeaderships(t *testing.T) {
	snap := &clustermeta.Snapshot{
		Brokers: map[int32]clustermeta.BrokerInfo{1: {NodeID: 1, ShuttingDown: true}, 2: {NodeID: 2}, 3: {NodeID: 3, ShuttingDown: true}},
		Partitions: map[string][]clustermeta.PartitionState{
			"a": {
				{Leader: 1, ISR: []int32{1, 2, 3}}, // 2 can lead: movable
				{Leader: 1, ISR: []int32{1, 3}},    // 3 is shutting down too
				{Leader: 1, ISR: []int32{1, 4}},    // 4 is not registered
				{Leader: 2, ISR: []int32{1, 2}},    // not ours
			},
			"b": {{Leader: 1, ISR: []int32{1}}}, // alone in the ISR
		},
	}
	if got := movableLeaderships(snap, 1); got != 1 {
		t.Errorf("movable leaderships of node 1 = %d, want 1", got)
	}
	snap.Brokers[2] = clustermeta.BrokerInfo{NodeID: 2, ShuttingDown: true}
	if got := movableLeaderships(snap, 1); got != 0 {
		t.Errorf("with every other broker shutting down: %d, want 0", got)
	}
}

func TestAdvertisedEndpoints(t *testing.T) {
	lnA, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lnA.Close()
	lnB, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lnB.Close()
	portA := int32(lnA.Addr().(*net.TCPAddr).Port)
	ls := []*broker.Listener{
		{Name: "PLAINTEXT", Protocol: broker.ProtocolPlaintext},
		{Name: "INTERNAL", Protocol: broker.ProtocolSASLSSL, Advertised: "broker-1.example:0"},
	}
	cfg := &broker.Config{Listeners: ls}
	got := advertisedEndpoints(ls, []net.Listener{lnA, lnB}, cfg)
	want := []clustermeta.Endpoint{
		{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "127.0.0.1", Port: portA},
		{Listener: "INTERNAL", SecurityProtocol: "SASL_SSL", Host: "broker-1.example", Port: int32(lnB.Addr().(*net.TCPAddr).Port)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("endpoints %+v\nwant %+v", got, want)
	}
	// The implicit listener with --advertised-listener.
	def := []*broker.Listener{{Name: "PLAINTEXT", Protocol: broker.ProtocolPlaintext}}
	got = advertisedEndpoints(def, []net.Listener{lnA}, &broker.Config{AdvertisedHost: "kafka.example", AdvertisedPort: 9092})
	if len(got) != 1 || got[0].Host != "kafka.example" || got[0].Port != 9092 {
		t.Errorf("implicit listener advertised as %+v", got)
	}
}
