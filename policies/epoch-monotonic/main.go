package main

import (
	"strconv"

	"github.com/verbatim-kafka/verbatim/policies/sdk"
)

var policy = sdk.Policy{Name: "epoch-monotonic", Judge: judge}

func init() { sdk.Register(policy) }

func judge(in sdk.Input, v *sdk.Verdicts) {
	floor := in.LastBatchEpoch()
	for i := 0; i < in.NumBatches(); i++ {
		e := in.LeaderEpoch(i)
		if e < floor {
			v.Reject(i, sdk.PolicyViolation, "leader epoch "+strconv.Itoa(int(e))+" rewinds below "+strconv.Itoa(int(floor)))
			continue
		}
		floor = e
	}
}

func main() {}
