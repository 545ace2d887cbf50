// Package testkit holds the in-process test fixtures shared by the tests of
// the mirroring tools (mirror, verify): a Verbatim destination broker, a
// kfake cluster standing in for any Kafka source, kgo clients, a
// SASL_PLAINTEXT listener for a broker, a standalone offset commit, a
// test context, the raw partition reader, and for the simulations
// (clock.go) a clock that advances only when slept on and a Kafka
// leader's OffsetForLeaderEpoch answer from its epoch cache. It is
// imported only by _test files; it must not hold product logic or
// assertions about it. Its subpackage logbuf (a log sink safe for
// concurrent writers) imports only the standard library, for the tests of
// packages the broker imports, which testkit cannot serve.
package testkit
