// Package brokerconf turns a Kafka server.properties (package props reads
// the syntax) plus `--override name=value` into a broker.Config: the
// registry of the broker properties Verbatim implements (Register, one
// file per concern registering its own names), Kafka 4.4's broker
// property names (accepted with a warning when Verbatim does not
// implement them), and the `listener.name.<listener>.` and
// `listener.name.<listener>.<mechanism>.` prefixes Kafka allows for
// listener-scoped settings.
//
// Files: registry.go (Register), load.go (Load, LoadInto, the prefixes and
// finishing steps), kafka.go and the generated kafka_names.go (Kafka's
// names; scripts/kafka-broker-config-names.sh regenerates it), and one file
// per concern registering its names: listeners.go, tls.go (building each
// TLS listener's configuration with tlsconf), server.go (identity, data
// dir, limits), topics.go (the broker defaults of topic configs), cleaner.go
// (the log cleaner), metrics.go (metrics.listen, Verbatim's own name),
// linksecrets.go (password.encoder.*, the cluster link's credentials at
// rest; Kafka 3.x's names, gone from Kafka 4), cluster.go (cluster mode:
// Kafka's replication names and Verbatim's metadata.etcd.*, read by
// LoadCluster into a Cluster, since the store, the embedded etcd member
// and the replica fetchers are not the broker's to open), interbroker.go
// (the inter-broker listener's TLS and SASL as the brokers' client side).
//
// It owns names and their translation, not behaviour: what a setting does
// is the broker's. It must not open files other than those a property
// names for the broker to read (tlsconf reads the keystores and
// truststores named), listen, or log secrets (a Secret property's value is never
// put into an error or a log line).
package brokerconf
