package sdk

import "github.com/verbatim-kafka/verbatim/policies/abi"

// Context is the partition context of a call (for native tests).
type Context = abi.Context

// Judge runs p natively over the batches in set (raw v2 batches back to
// back) with the given context, topic and topic configs, exactly as the
// host would encode them, and returns the rejections. It lets policy
// authors unit-test without a WebAssembly runtime.
func Judge(p *Policy, c *Context, topic string, cfg map[string]string, set []byte) ([]Rejection, error) {
	table, n := abi.EncodeConfigs(p.Configs, cfg)
	size, nb, err := abi.InputSize(c, topic, table, set, p.Needs)
	if err != nil {
		return nil, err
	}
	in := abi.EncodeInput(make([]byte, size), c, topic, table, n, set, nb, p.Needs)
	raw := Run(p, in)
	if raw == nil {
		return nil, nil
	}
	var rs []Rejection
	err = abi.DecodeVerdicts(raw, nb, func(i int, code int16, reason []byte) {
		rs = append(rs, Rejection{Batch: i, Code: code, Reason: string(reason)})
	})
	return rs, err
}
