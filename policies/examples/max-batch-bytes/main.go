// Command max-batch-bytes is the SDK example: a user policy that refuses
// batches larger than the topic's max.message.bytes, which Kafka's
// follower path (and so a mirror) does not enforce. Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o max-batch-bytes.wasm .
//
// and put the .wasm in the broker's --policy-dir.
package main

import (
	"strconv"

	"github.com/verbatim-kafka/verbatim/policies/sdk"
)

func init() {
	sdk.Register(sdk.Policy{
		Name:    "max-batch-bytes",
		Configs: []string{"max.message.bytes"},
		Judge: func(in sdk.Input, v *sdk.Verdicts) {
			limit, err := strconv.Atoi(func() string { s, _ := in.Config("max.message.bytes"); return s }())
			if err != nil {
				return // not set: no limit
			}
			for i := 0; i < in.NumBatches(); i++ {
				if size := in.Batch(i).Size; size > limit {
					v.Reject(i, 10, "batch of "+strconv.Itoa(size)+" bytes exceeds max.message.bytes="+strconv.Itoa(limit)) // MESSAGE_TOO_LARGE
				}
			}
		},
	})
}

func main() {}
