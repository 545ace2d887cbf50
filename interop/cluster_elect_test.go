package interop

import (
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// clusterLeaderElection runs after clusterControlledShutdown, which left
// partition 0 of "controlled" led by another broker than its preferred
// replica: kafka-leader-election.sh moves it back (--election-type
// preferred --topic --partition), answers a partition whose preferred
// replica leads as not needing an election, refuses an unclean election
// of a partition with a live leader the same way, and with
// --all-topic-partitions leaves every partition of the topic led by its
// preferred replica.
func clusterLeaderElection(t *testing.T, c *VCluster, cl *kgo.Client) {
	const topic = "controlled"
	bs := c.Bootstrap()
	before := waitInSync(t, c, cl, topic, 3, 3)
	moved := -1
	for p, v := range before {
		if v.leader != v.replicas[0] {
			moved = p
			break
		}
	}
	if moved < 0 {
		t.Fatalf("no partition of %s led by another broker than its preferred replica after the controlled shutdown: %+v", topic, before)
	}
	part := strconv.Itoa(moved)
	res := JavaTool(t, "kafka-leader-election", "--bootstrap-server", bs, "--election-type", "preferred", "--topic", topic, "--partition", part)
	if !strings.Contains(res.Stdout, "Successfully completed leader election (PREFERRED) for partitions "+topic+"-"+part) {
		t.Fatalf("kafka-leader-election preferred: %s", res.describe())
	}
	after := waitInSync(t, c, cl, topic, 3, 3)
	if v := after[moved]; v.leader != v.replicas[0] || v.epoch <= before[moved].epoch {
		t.Fatalf("partition %d after the preferred election: leader %d epoch %d (replicas %v, epoch before %d)", moved, v.leader, v.epoch, v.replicas, before[moved].epoch)
	}
	res = JavaTool(t, "kafka-leader-election", "--bootstrap-server", bs, "--election-type", "preferred", "--topic", topic, "--partition", part)
	if !strings.Contains(res.Stdout, "Valid replica already elected for partitions "+topic+"-"+part) {
		t.Fatalf("a second preferred election: %s", res.describe())
	}
	res = JavaTool(t, "kafka-leader-election", "--bootstrap-server", bs, "--election-type", "unclean", "--topic", topic, "--partition", part)
	if !strings.Contains(res.Stdout, "Valid replica already elected for partitions "+topic+"-"+part) {
		t.Fatalf("an unclean election of a led partition: %s", res.describe())
	}
	// Every partition of the cluster: another topic's partition may be
	// without its preferred replica in sync (the tool then exits 1 for
	// it), this topic's are all elected.
	r, err := RunJavaTool(t, Cmd{}, "kafka-leader-election", "--bootstrap-server", bs, "--election-type", "preferred", "--all-topic-partitions")
	t.Logf("kafka-leader-election --all-topic-partitions: %v\n%s", err, r.describe())
	for p, v := range waitInSync(t, c, cl, topic, 3, 3) {
		if v.leader != v.replicas[0] {
			t.Errorf("partition %d led by %d after --all-topic-partitions, its preferred replica is %d", p, v.leader, v.replicas[0])
		}
	}
}
