package broker

// The coordinators in cluster mode (owner: the coordinators work; see
// cluster_config.go): a broker runs the group and transaction coordinator
// of the internal topics' partitions it leads.

// coordinatorsElected is called when this broker becomes the leader of a
// partition of __consumer_offsets or __transaction_state at epoch: the
// coordinator loads that partition's state from its replicated log and
// then serves it.
func (s *Server) coordinatorsElected(p *Partition, epoch int32) {}

// coordinatorsResigned is called when this broker stops leading such a
// partition: the coordinator unloads it (its requests answer
// NOT_COORDINATOR from then on).
func (s *Server) coordinatorsResigned(p *Partition) {}
