package replica

import "github.com/verbatim-kafka/verbatim/broker"

// BrokerHost is the Host of a broker: *broker.Server has every method
// but Replica, whose result type broker cannot name (this package imports
// broker), so its FollowerReplica is adapted here.
func BrokerHost(s *broker.Server) Host { return brokerHost{s} }

type brokerHost struct{ *broker.Server }

func (h brokerHost) Replica(topic string, partition int32) (Replica, error) {
	r, err := h.Server.FollowerReplica(topic, partition)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// A broker applies the follower side of the replication throttles.
var _ Throttler = brokerHost{}
