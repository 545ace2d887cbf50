package admin

import (
	"context"
	"sort"

	"github.com/verbatim-kafka/verbatim/client"
)

// Broker is one broker of `cluster info`.
type Broker struct {
	NodeID int32  `json:"node_id"`
	Host   string `json:"host"`
	Port   int32  `json:"port"`
	Rack   string `json:"rack,omitempty"`
}

// ClusterInfo is the answer of `cluster info` (from Metadata).
type ClusterInfo struct {
	ClusterID    string   `json:"cluster_id"`
	ControllerID int32    `json:"controller_id"`
	Brokers      []Broker `json:"brokers"`
}

// DescribeCluster returns the cluster id, controller and brokers.
func DescribeCluster(ctx context.Context, cl *client.Cluster) (*ClusterInfo, error) {
	r, err := metadata(ctx, cl, []string{})
	if err != nil {
		return nil, err
	}
	ci := &ClusterInfo{ControllerID: r.ControllerID, Brokers: []Broker{}}
	if r.ClusterID != nil {
		ci.ClusterID = *r.ClusterID
	}
	for _, b := range r.Brokers {
		br := Broker{NodeID: b.NodeID, Host: b.Host, Port: b.Port}
		if b.Rack != nil {
			br.Rack = *b.Rack
		}
		ci.Brokers = append(ci.Brokers, br)
	}
	sort.Slice(ci.Brokers, func(i, j int) bool { return ci.Brokers[i].NodeID < ci.Brokers[j].NodeID })
	return ci, nil
}
