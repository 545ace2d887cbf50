// Command epoch-monotonic is the Go reference implementation of the
// built-in policy that refuses leader-epoch rewinds (invariant I3): a batch
// whose partition leader epoch is lower than the last stored batch's, or
// than an earlier batch's in the same request, is rejected with
// POLICY_VIOLATION. The built-in itself is policy.wat (WebAssembly text, no
// runtime); the tests require both to give the same verdicts and reasons.
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
