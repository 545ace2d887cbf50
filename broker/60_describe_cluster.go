package broker

// DescribeCluster (key 60), versions 0-2 (KIP-700, KIP-919 endpoint types,
// KIP-1073 fenced brokers).
//
// Behaviour: the cluster is this node: cluster id from meta.properties,
// controller = this node, one broker with the advertised address, never
// fenced. EndpointType 1 (brokers) is served; 2 (controllers) is
// UNSUPPORTED_ENDPOINT_TYPE, as a Kafka broker answers it. Cluster
// authorized operations are all cluster operations when asked (without
// the authorizer).
//
// Authorization (with the authorizer on, authorize.go): nothing; the
// cluster's authorized operations are the principal's.
//
// In cluster mode the brokers are the registered ones (with their racks)
// that have the request's listener, the controller the elected one.
//
// Deviations from Apache Kafka: none beyond the single node.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/verbatim-kafka/verbatim/authz"
)

func init() { register(kmsg.DescribeCluster.Int16(), 0, 2, handleDescribeCluster) }

func handleDescribeCluster(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = req.EndpointType
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		msg := "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type " + endpointTypeName(req.EndpointType)
		resp.ErrorMessage = &msg
		return resp, nil
	}
	resp.ClusterID = s.clusterID
	resp.ControllerID = s.cfg.NodeID
	host, port := s.advertised(r.Listener)
	b := kmsg.NewDescribeClusterResponseBroker()
	b.NodeID, b.Host, b.Port = s.cfg.NodeID, host, port
	resp.Brokers = []kmsg.DescribeClusterResponseBroker{b}
	if snap := s.clusterSnapshot(); snap != nil {
		resp.ControllerID, resp.Brokers = s.clusterControllerID(snap), nil
		for _, cb := range clusterBrokers(snap, r.Listener) {
			b := kmsg.NewDescribeClusterResponseBroker()
			b.NodeID, b.Host, b.Port, b.Rack = cb.id, cb.host, cb.port, cb.rack
			resp.Brokers = append(resp.Brokers, b)
		}
	}
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = s.authorizedOps(r, authz.ResourceCluster, authz.ClusterName, clusterAllOps)
	}
	return resp, nil
}

func endpointTypeName(t int8) string {
	switch t {
	case 1:
		return "BROKER"
	case 2:
		return "CONTROLLER"
	}
	return "UNKNOWN"
}
