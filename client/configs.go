package client

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TopicConfigs returns a topic's configs set explicitly on a cluster
// (DescribeConfigs source DYNAMIC_TOPIC_CONFIG), sensitive ones excepted.
func TopicConfigs(ctx context.Context, cl *Cluster, topic string) (map[string]string, error) {
	res, err := describeTopic(ctx, cl, topic, nil)
	if err != nil {
		return nil, err
	}
	return explicitConfigs(res), nil
}

// explicitConfigs are a described topic's configs set explicitly
// (DYNAMIC_TOPIC_CONFIG), sensitive ones excepted.
func explicitConfigs(res kmsg.DescribeConfigsResponseResource) map[string]string {
	out := map[string]string{}
	for _, c := range res.Configs {
		if c.Source == kmsg.ConfigSourceDynamicTopicConfig && !c.IsSensitive && c.Value != nil {
			out[c.Name] = *c.Value
		}
	}
	return out
}

// TopicsConfigs is TopicConfigs for several topics in one DescribeConfigs
// request: per topic its explicitly set configs, or its error.
func TopicsConfigs(ctx context.Context, cl *Cluster, topics []string) (map[string]map[string]string, map[string]error, error) {
	cn, err := cl.Any(ctx)
	if err != nil {
		return nil, nil, err
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, t := range topics {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, t
		req.Resources = append(req.Resources, rr)
	}
	resp, err := cn.Request(ctx, req, 4)
	if err != nil {
		return nil, nil, err
	}
	out, errs := map[string]map[string]string{}, map[string]error{}
	for _, res := range resp.(*kmsg.DescribeConfigsResponse).Resources {
		if err := kerr.ErrorForCode(res.ErrorCode); err != nil {
			errs[res.ResourceName] = fmt.Errorf("DescribeConfigs %s on %s: %w", res.ResourceName, cl.Seed(), err)
			continue
		}
		out[res.ResourceName] = explicitConfigs(res)
	}
	return out, errs, nil
}

// TopicConfigValues returns the effective values of the named configs of
// a topic (whatever their source); a config without a value is absent.
func TopicConfigValues(ctx context.Context, cl *Cluster, topic string, names ...string) (map[string]string, error) {
	res, err := describeTopic(ctx, cl, topic, names)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, c := range res.Configs {
		if c.Value != nil {
			out[c.Name] = *c.Value
		}
	}
	return out, nil
}

func describeTopic(ctx context.Context, cl *Cluster, topic string, names []string) (kmsg.DescribeConfigsResponseResource, error) {
	cn, err := cl.Any(ctx)
	if err != nil {
		return kmsg.DescribeConfigsResponseResource{}, err
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, names
	req.Resources = append(req.Resources, rr)
	resp, err := cn.Request(ctx, req, 4)
	if err != nil {
		return kmsg.DescribeConfigsResponseResource{}, err
	}
	r := resp.(*kmsg.DescribeConfigsResponse)
	if len(r.Resources) != 1 {
		return kmsg.DescribeConfigsResponseResource{}, fmt.Errorf("DescribeConfigs %s: malformed answer", topic)
	}
	res := r.Resources[0]
	if err := kerr.ErrorForCode(res.ErrorCode); err != nil {
		return res, fmt.Errorf("DescribeConfigs %s on %s: %w", topic, cl.Seed(), err)
	}
	return res, nil
}

// ConfigOp is one IncrementalAlterConfigs change: Value nil deletes the
// config, otherwise it is set.
type ConfigOp struct {
	Name  string
	Value *string
}

// AlterError is a refused IncrementalAlterConfigs: the Kafka error and the
// broker's message.
type AlterError struct {
	Err     error
	Message string
}

func (e *AlterError) Error() string {
	if e.Message == "" {
		return e.Err.Error()
	}
	return e.Err.Error() + ": " + e.Message
}

func (e *AlterError) Unwrap() error { return e.Err }

// AlterTopicConfigs applies ops to a topic with one IncrementalAlterConfigs
// request. A refusal is an *AlterError; other errors are the request's.
func AlterTopicConfigs(ctx context.Context, cl *Cluster, topic string, ops []ConfigOp) error {
	cn, err := cl.Any(ctx)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	for _, op := range ops {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = op.Name, kmsg.IncrementalAlterConfigOpSet, op.Value
		if op.Value == nil {
			c.Op = kmsg.IncrementalAlterConfigOpDelete
		}
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	resp, err := cn.Request(ctx, req, 1)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.IncrementalAlterConfigsResponse)
	if len(r.Resources) != 1 {
		return fmt.Errorf("IncrementalAlterConfigs %s: malformed answer", topic)
	}
	if err := kerr.ErrorForCode(r.Resources[0].ErrorCode); err != nil {
		ae := &AlterError{Err: err}
		if m := r.Resources[0].ErrorMessage; m != nil {
			ae.Message = *m
		}
		return ae
	}
	return nil
}
