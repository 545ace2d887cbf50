package controller

import (
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	"github.com/verbatim-kafka/verbatim/clustermeta"
)

func brokersOf(racks ...string) []clustermeta.BrokerInfo {
	out := make([]clustermeta.BrokerInfo, len(racks))
	for i, r := range racks {
		out[i] = clustermeta.BrokerInfo{NodeID: int32(i + 1), Rack: r}
	}
	return out
}

func TestAssignWithoutRacks(t *testing.T) {
	got, err := Assign(brokersOf("", "", ""), 0, 6, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Leaders go round 1, 2, 3; on the second turn the followers'
	// walk starts one broker further.
	want := [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}, {1, 3, 2}, {2, 1, 3}, {3, 2, 1}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestAssignRacks(t *testing.T) {
	// Racks a, b, c with brokers 1,4 / 2,5 / 3,6 given in rack order a,b,c,a,b,c.
	got, err := Assign(brokersOf("a", "b", "c", "a", "b", "c"), 0, 6, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The ring is 1(a) 2(b) 3(c) 4(a) 5(b) 6(c).
	want := [][]int32{{1, 2, 3}, {2, 3, 4}, {3, 4, 5}, {4, 5, 6}, {5, 6, 1}, {6, 1, 2}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// The properties every placement must have, over many shapes.
func TestAssignProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	rackNames := []string{"", "a", "b", "c", "d"}
	for iter := 0; iter < 400; iter++ {
		n := 1 + rng.Intn(9)
		nr := 1 + rng.Intn(len(rackNames))
		var bs []clustermeta.BrokerInfo
		for i := 0; i < n; i++ {
			bs = append(bs, clustermeta.BrokerInfo{NodeID: int32(10 + i*3), Rack: rackNames[rng.Intn(nr)]})
		}
		rf := int16(1 + rng.Intn(n))
		first := int32(rng.Intn(5))
		count := int32(1 + rng.Intn(3*n))
		start := rng.Intn(100) - 50
		name := fmt.Sprintf("n=%d rf=%d first=%d count=%d start=%d", n, rf, first, count, start)
		got, err := Assign(bs, first, count, rf, start)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rackOf := map[int32]string{}
		racks := map[string]bool{}
		for _, b := range bs {
			rackOf[b.NodeID] = b.Rack
			racks[b.Rack] = true
		}
		leaders := map[int32]int{}
		for p, reps := range got {
			if len(reps) != int(rf) {
				t.Fatalf("%s: partition %d has %v", name, p, reps)
			}
			seen := map[int32]bool{}
			onRacks := map[string]bool{}
			for _, r := range reps {
				if _, ok := rackOf[r]; !ok || seen[r] {
					t.Fatalf("%s: partition %d has %v (unknown or repeated broker)", name, p, reps)
				}
				seen[r] = true
				onRacks[rackOf[r]] = true
			}
			if want := min(int(rf), len(racks)); len(onRacks) != want {
				t.Fatalf("%s: partition %d %v spans %d racks, want %d", name, p, reps, len(onRacks), want)
			}
			leaders[reps[0]]++
		}
		lo, hi := int(count), 0
		for _, b := range bs {
			lo, hi = min(lo, leaders[b.NodeID]), max(hi, leaders[b.NodeID])
		}
		if hi-lo > 1 {
			t.Fatalf("%s: leaders unevenly spread %v", name, leaders)
		}
		// The order brokers are given in does not matter.
		shuffled := append([]clustermeta.BrokerInfo(nil), bs...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		again, err := Assign(shuffled, first, count, rf, start)
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("%s: shuffled brokers gave %v, %v; want %v", name, again, err, got)
		}
	}
}

// CreatePartitions continues the rotation: assigning 0..5 at once or 0..2
// then 3..5 with the same start gives the same placement.
func TestAssignContinues(t *testing.T) {
	bs := brokersOf("a", "b", "a", "b")
	all, err := Assign(bs, 0, 6, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	head, _ := Assign(bs, 0, 3, 2, 3)
	tail, _ := Assign(bs, 3, 3, 2, 3)
	if !reflect.DeepEqual(append(head, tail...), all) {
		t.Fatalf("split %v + %v, whole %v", head, tail, all)
	}
}

// Followers of one leader differ from turn to turn.
func TestAssignSpreadsFollowers(t *testing.T) {
	got, err := Assign(brokersOf("", "", ""), 0, 6, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	pairs := map[[2]int32]bool{}
	for _, r := range got {
		pairs[[2]int32{r[0], r[1]}] = true
	}
	if len(pairs) != 6 {
		t.Fatalf("leader/follower pairs %v: want all 6", got)
	}
}

func TestAssignRefusals(t *testing.T) {
	bs := brokersOf("", "", "")
	if _, err := Assign(bs, 0, 1, 4, 0); !errors.Is(err, ErrNotEnoughBrokers) {
		t.Fatalf("rf 4 on 3 brokers: %v", err)
	}
	if _, err := Assign(bs, 0, 1, 0, 0); !errors.Is(err, ErrInvalidReplicationFactor) {
		t.Fatalf("rf 0: %v", err)
	}
	if _, err := Assign(nil, 0, 1, 1, 0); !errors.Is(err, ErrNotEnoughBrokers) {
		t.Fatalf("no brokers: %v", err)
	}
	// A broker in controlled shutdown takes no new replica.
	bs[1].ShuttingDown = true
	if _, err := Assign(bs, 0, 1, 3, 0); !errors.Is(err, ErrNotEnoughBrokers) {
		t.Fatalf("rf 3 with one broker shutting down: %v", err)
	}
	got, err := Assign(bs, 0, 4, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range got {
		for _, id := range r {
			if id == 2 {
				t.Fatalf("broker 2 (shutting down) placed: %v", got)
			}
		}
	}
	// A node id given twice counts once.
	if _, err := Assign(append(brokersOf("", ""), clustermeta.BrokerInfo{NodeID: 1}), 0, 1, 3, 0); !errors.Is(err, ErrNotEnoughBrokers) {
		t.Fatalf("duplicate broker counted twice: %v", err)
	}
	if got, err := Assign(brokersOf(""), 0, 0, 1, 0); err != nil || len(got) != 0 {
		t.Fatalf("zero partitions: %v, %v", got, err)
	}
}
