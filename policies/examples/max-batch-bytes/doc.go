// Command max-batch-bytes is the SDK example: a user policy that refuses
// batches larger than the topic's max.message.bytes, which Kafka's
// follower path (and so a mirror) does not enforce. Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o max-batch-bytes.wasm .
//
// and put the .wasm in the broker's --policy-dir.
//
// A policy imports only the SDK (and the standard library); it must not
// import the host (wasmpolicy) or the broker.
package main
