package link

import (
	"context"

	"github.com/verbatim-kafka/verbatim/broker"
)

// dataHost is the part of Host for the partition copies: pull-mode topics,
// the in-process mirror append and the reads a copy resumes from.
// Its owner fills it in (methods the broker exports in broker/link_data.go).
type dataHost interface {
	// NoteMirrorDivergence counts a partition of topic FAILED because its
	// source diverged (the broker's metrics).
	NoteMirrorDivergence(topic string)
	// LinkTopics lists every destination topic with its mirror configs
	// and mirror state; LinkTopic one (false: absent).
	LinkTopics() []broker.LinkTopicInfo
	LinkTopic(name string) (broker.LinkTopicInfo, bool)
	// CreatePullTopics creates pull-mode topics of link like the
	// source's (partitions, topic id unless zero, configs) with one
	// metadata write; per topic the source configs it left out and its
	// refusal.
	CreatePullTopics(link, sourceClusterID string, topics []broker.PullTopic) []broker.PullTopicResult
	AddPullPartitions(link, name string, count int32) error
	// RegisterLinkWriter registers id as the writer of parts (one
	// broker-assigned writer epoch for all), per partition its refusal.
	RegisterLinkWriter(link string, id [16]byte, parts []broker.LinkPartition) (int32, []error)
	// RaiseLinkEpochs raises parts' leader epochs for batches of the
	// source's current leader epochs (KIP-1279's rule) in one write.
	RaiseLinkEpochs(link string, parts []broker.LinkPartition, sourceEpochs []int32) error
	// LinkMirrorAppend queues a mirror append (the wire mirror
	// produce's path, the bytes as given); it blocks while the
	// partition's queue is full.
	LinkMirrorAppend(ctx context.Context, link, topic string, partition int32, w broker.LinkWriter, set []byte, expect, sourceHW int64) broker.AppendWaiter
	// LinkForwardLogStart is the mirror DeleteRecords (offset 0: the
	// writer check alone), with the source's leader epoch at offset when
	// startEpoch >= 0.
	LinkForwardLogStart(link, topic string, partition int32, w broker.LinkWriter, offset int64, startEpoch int32) (int64, error)
	MirrorLogRange(topic string, partition int32) (logStart, logEnd int64, err error)
	ReadMirrorLog(topic string, partition int32, offset int64, maxBytes int) ([]byte, error)
	LastBatchEpoch(topic string, partition int32) (int32, error)
}
