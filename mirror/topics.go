package mirror

// Topic administration of the pusher: the destination topics are made
// like the source's (created with its partition count, configs and topic
// id; partitions added; configs kept in sync while following).

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/client"
)

// prepareTopics reads the source topics, creates what is missing on the
// destination (with CreateTopics) and returns the partitions that have no
// worker yet.
func (p *Pusher) prepareTopics(ctx context.Context) ([]tp, error) {
	smd, err := p.src.Metadata(ctx, p.o.Topics)
	if err != nil {
		return nil, Usage("source metadata: %v", err)
	}
	dmd, err := p.dst.Metadata(ctx, p.o.Topics)
	if err != nil {
		return nil, Usage("destination metadata: %v", err)
	}
	var out []tp
	for _, name := range p.o.Topics {
		st := smd[name]
		if st == nil || st.Err != nil {
			if st != nil && errors.Is(st.Err, client.ErrTopicMissing) {
				p.mu.Lock()
				_, known := p.topicID[name]
				p.mu.Unlock()
				if known {
					return nil, Refusal("source topic %s was deleted while mirroring; stopping", name)
				}
				return nil, Usage("source topic %s does not exist on %s", name, p.o.Source)
			}
			return nil, Usage("source topic %s: %v", name, errOr(st))
		}
		p.mu.Lock()
		old, known := p.topicID[name]
		if !known {
			p.topicID[name] = st.ID
		}
		p.mu.Unlock()
		if known && old != st.ID {
			return nil, Refusal("source topic %s was deleted and recreated (topic id changed) while mirroring; stopping: the new topic's offsets are unrelated to the mirrored ones", name)
		}
		dt := dmd[name]
		dn := 0
		if dt != nil && dt.Err == nil {
			dn = len(dt.Partitions)
		}
		switch {
		case dt == nil || errors.Is(dt.Err, client.ErrTopicMissing):
			if !p.o.CreateTopics {
				return nil, Usage("destination topic %s does not exist on %s (pass --create-topics to create it as a mirror)", name, p.o.Dest)
			}
			if err := p.createTopic(ctx, name, int32(len(st.Partitions)), st.ID); err != nil {
				return nil, err
			}
		case dt.Err != nil:
			return nil, Usage("destination topic %s: %v", name, dt.Err)
		case dn < len(st.Partitions):
			if !p.o.CreateTopics {
				return nil, Refusal("destination topic %s has %d partitions, the source %d (pass --create-topics to add the missing ones)", name, dn, len(st.Partitions))
			}
			if err := p.createPartitions(ctx, name, int32(len(st.Partitions))); err != nil {
				return nil, err
			}
		case dn > len(st.Partitions):
			return nil, Refusal("destination topic %s has %d partitions, more than the source's %d: not a mirror of it", name, dn, len(st.Partitions))
		default:
			p.checkTopicID(name, st.ID, dt.ID)
		}
		for i := range st.Partitions {
			t := tp{name, int32(i)}
			p.mu.Lock()
			_, running := p.workers[t]
			p.mu.Unlock()
			if !running {
				out = append(out, t)
			}
		}
	}
	return out, nil
}

func errOr(t *client.TopicMeta) error {
	if t == nil {
		return client.ErrTopicMissing
	}
	return t.Err
}

// sourceConfigs returns the topic configs set explicitly on the source.
func (p *Pusher) sourceConfigs(ctx context.Context, topic string) (map[string]string, error) {
	return client.TopicConfigs(ctx, p.src, topic)
}

func (p *Pusher) createTopic(ctx context.Context, name string, partitions int32, id [16]byte) error {
	cfgs, err := p.sourceConfigs(ctx, name)
	if err != nil {
		return Usage("reading source configs of %s: %v", name, err)
	}
	clusterID := p.src.ClusterID()
	if clusterID == "" {
		return Usage("the source did not report a cluster id (Metadata v2+), needed for mirror.source.cluster.id")
	}
	cfgs["mirror.mode"] = "push"
	cfgs["mirror.source.cluster.id"] = clusterID
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, -1
	keys := make([]string, 0, len(cfgs))
	for k := range cfgs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(cfgs[k])
		rt.Configs = append(rt.Configs, c)
	}
	pin := p.pinIDs && id != ([16]byte{})
	if pin {
		rt.UnknownTags.Set(mirrorTag, topicIDTag(id))
	}
	req.Topics = append(req.Topics, rt)
	cn, resp, err := p.destAdmin(ctx, req, 7, "creating "+name+" on the destination")
	if err != nil {
		return err
	}
	if pin && req.Version < 5 {
		return Usage("destination %s negotiated CreateTopics v%d: the topic id needs v5+", cn.Addr(), req.Version)
	}
	r := resp.(*kmsg.CreateTopicsResponse)
	if len(r.Topics) != 1 {
		return Usage("CreateTopics %s: malformed answer", name)
	}
	t := r.Topics[0]
	msg := ""
	if t.ErrorMessage != nil {
		msg = ": " + *t.ErrorMessage
	}
	err = kerr.ErrorForCode(t.ErrorCode)
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists) && pin && strings.Contains(msg, "already used by topic"):
		return Refusal("creating mirror topic %s on the destination with the source's topic id %s: %v%s", name, client.FormatTopicID(id), err, msg)
	case errors.Is(err, kerr.TopicAlreadyExists):
		// Created meanwhile (another pusher): checked like any existing
		// destination topic by the next metadata round.
		return nil
	case err != nil:
		return Refusal("creating mirror topic %s on the destination (configs %v): %v%s", name, keys, err, msg)
	case pin && req.Version >= 7 && t.TopicID != id:
		return Refusal("destination %s created mirror topic %s with topic id %s instead of the source's %s although it lists %q", cn.Addr(), name, client.FormatTopicID(t.TopicID), client.FormatTopicID(id), topicIDFeature)
	}
	p.log.Info("created mirror topic", "topic", name, "partitions", partitions, "configs", cfgs, "topic_id", client.FormatTopicID(t.TopicID))
	return nil
}

// destAdmin sends the admin request req (at most version maxVersion) to
// any destination broker; a failure is a usage error naming what the
// request does.
func (p *Pusher) destAdmin(ctx context.Context, req kmsg.Request, maxVersion int16, what string) (*client.Conn, kmsg.Response, error) {
	cn, err := p.dst.Any(ctx)
	if err != nil {
		return nil, nil, Usage("destination: %v", err)
	}
	resp, err := cn.Request(ctx, req, maxVersion)
	if err != nil {
		return nil, nil, Usage("%s: %v", what, err)
	}
	return cn, resp, nil
}

func (p *Pusher) createPartitions(ctx context.Context, name string, count int32) error {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = name, count
	req.Topics = append(req.Topics, rt)
	_, resp, err := p.destAdmin(ctx, req, 3, "adding partitions to "+name)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.CreatePartitionsResponse)
	if len(r.Topics) != 1 {
		return Usage("CreatePartitions %s: malformed answer", name)
	}
	if err := kerr.ErrorForCode(r.Topics[0].ErrorCode); err != nil {
		return Refusal("adding partitions to mirror topic %s (to %d): %v", name, count, err)
	}
	p.log.Info("added partitions to mirror topic", "topic", name, "count", count)
	return nil
}

// syncConfigs makes the destination topic's explicitly set configs equal
// the source's (mirror.* excepted), so producers behave the same after a
// failover.
func (p *Pusher) syncConfigs(ctx context.Context, topic string) error {
	sc, err := client.TopicConfigs(ctx, p.src, topic)
	if err != nil {
		return err
	}
	dc, err := client.TopicConfigs(ctx, p.dst, topic)
	if err != nil {
		return err
	}
	var ops []client.ConfigOp
	var changed []string
	for k, v := range sc {
		if strings.HasPrefix(k, "mirror.") {
			continue
		}
		if dv, ok := dc[k]; !ok || dv != v {
			ops = append(ops, client.ConfigOp{Name: k, Value: kmsg.StringPtr(v)})
			changed = append(changed, k)
		}
	}
	for k := range dc {
		if _, ok := sc[k]; !ok && !strings.HasPrefix(k, "mirror.") {
			ops = append(ops, client.ConfigOp{Name: k})
			changed = append(changed, k)
		}
	}
	if len(ops) == 0 {
		return nil
	}
	sort.Strings(changed)
	if err := client.AlterTopicConfigs(ctx, p.dst, topic, ops); err != nil {
		if _, refused := err.(*client.AlterError); refused {
			return fmt.Errorf("syncing configs %v: %w", changed, err)
		}
		return err
	}
	p.log.Info("synced topic configs from the source", "topic", topic, "configs", changed)
	return nil
}
