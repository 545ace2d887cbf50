// Package interop is the real-peer harness: helpers that install and start
// software the team did not write (Apache Kafka 4.4 from Maven Central jars,
// its Java tools, kcat, confluent-kafka in a virtualenv, franz-go's kgo
// integration suite) and the tests that need those peers.
//
// Product packages must not import it.
package interop
