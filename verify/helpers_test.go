package verify

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/internal/testkit"
	"github.com/verbatim-kafka/verbatim/mirror"
)

// startDest runs an in-process Verbatim broker and returns its address.
func startDest(t *testing.T) string { return testkit.StartDest(t, t.TempDir()).Addr }

func produce(t *testing.T, cl *kgo.Client, rs ...*kgo.Record) {
	t.Helper()
	if err := cl.ProduceSync(testkit.Ctx(t), rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func push(t *testing.T, src, dst string, topics ...string) {
	t.Helper()
	if _, err := mirror.Push(testkit.Ctx(t), mirror.Options{Source: src, Dest: dst, Topics: topics, CreateTopics: true}); err != nil {
		t.Fatalf("push: %v (exit %d)", err, mirror.ExitCode(err))
	}
}

func run(t *testing.T, src, dst string, topics ...string) *Report {
	t.Helper()
	rep, err := Run(testkit.Ctx(t), Options{Source: src, Dest: dst, Topics: topics})
	if err != nil {
		t.Fatalf("verify could not run: %v", err)
	}
	return rep
}

func createTopicReq(name string) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, -1
	req.Topics = append(req.Topics, rt)
	return req
}
