// Package authn is the server side of SASL authentication as Kafka's
// broker speaks it: the mechanisms as small state machines (PLAIN, RFC
// 4616, with users from PlainLoginModule's `user_<name>` options;
// SCRAM-SHA-256 and SCRAM-SHA-512, RFC 5802/7677 as Kafka's
// ScramSaslServer: no channel binding, the `tokenauth` extension refused
// since delegation tokens are not implemented; one deviation: the doubled
// client nonce of librdkafka before 2.6.1 is accepted, as Kafka 3.8.1-3.9
// accepted it and Kafka 4 does not), the SCRAM credential
// store (salt, iterations, StoredKey and ServerKey per user and mechanism,
// never a password), OAUTHBEARER (RFC 7628) with Kafka's unsecured
// validator (unsigned tokens: for tests), and the `--add-scram` syntax of
// kafka-storage.sh.
//
// A mechanism takes the client's bytes and returns the server's
// (Server.Step) until it is done, then names the authenticated user. The
// messages a failure carries are Kafka's (Error.Message), so clients show
// what they would show against Kafka.
//
// The credentials also have a form as records of a shared store
// (records.go: one record per user and mechanism, for a cluster's
// brokers; the holder writes them and hands the whole set to Set).
//
// It owns the cryptography's use (crypto/pbkdf2, crypto/hmac, the SHA-2
// hashes of the standard library: no primitive is written here) and the
// store's encoding. It must not import the broker, open sockets or files
// (the store is encoded and decoded here and persisted by its caller), nor
// log: a failure's details go to the caller, which decides what a client
// and the log may see.
package authn
