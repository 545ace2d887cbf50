// Command goguest is a hostile Go policy for the host's tests. What it does
// depends on the producer id of the first batch: 1 panics, 2 allocates
// without bound (memory bomb), 3 loops forever, 4 prints to stdout and
// stderr, anything else accepts. Whatever the mode, it rejects a call for a
// topic other than the first one it saw: an instance must never serve two
// topics.
package main

import "github.com/verbatim-kafka/verbatim/policies/sdk"

var (
	sink      [][]byte
	seenTopic string
)

func init() {
	sdk.Register(sdk.Policy{Name: "goguest", Judge: func(in sdk.Input, v *sdk.Verdicts) {
		if seenTopic == "" {
			seenTopic = in.Topic()
		}
		if !in.TopicIs(seenTopic) {
			v.Reject(0, sdk.PolicyViolation, "instance saw topic "+seenTopic+" before "+in.Topic())
		}
		if in.NumBatches() == 0 {
			return
		}
		switch in.Batch(0).Header.ProducerID {
		case 1:
			panic("goguest: deliberate panic")
		case 2:
			for {
				sink = append(sink, make([]byte, 1<<20))
			}
		case 3:
			n := 0
			for {
				n++
			}
		case 4:
			println("goguest: hello on stderr")
		}
	}})
}

func main() {}
