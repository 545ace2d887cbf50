// Package interop is the real-peer harness: helpers that install and start
// software the team did not write (Apache Kafka 4.4 from Maven Central jars,
// its Java tools, kcat, confluent-kafka in a virtualenv, franz-go's kgo
// integration suite) and the tests that need those peers.
//
// StartKafka and StartKafkaCluster run KRaft nodes on loopback; JavaTool,
// Kcat and Python run the client tools; BuildVerbatim and StartVerbatim run
// the broker under test, StartVCluster a Verbatim cluster through
// scripts/cluster.sh (vcluster.go), also on an external etcd (BuildEtcd).
// TestChaos is the cluster's fault test (chaos_test.go; its checks in
// chaos_check_test.go and chaos_replicas_test.go). interop/install.sh (`make peers`) installs the
// peers; a missing peer fails a test, it never skips it. See README.md.
//
// Product packages must not import it.
package interop
