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
