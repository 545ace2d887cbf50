package sdk

import (
	"strings"

	"github.com/verbatim-kafka/verbatim/policies/abi"
)

// Re-exported ABI types, so a policy needs only this package.
type (
	Input       = abi.Input
	Batch       = abi.Batch
	Header      = abi.Header
	Needs       = abi.Needs
	MirrorMode  = abi.MirrorMode
	MirrorState = abi.MirrorState
	Rejection   = abi.Rejection
)

const (
	NeedControlBytes = abi.NeedControlBytes
	NeedBatchBytes   = abi.NeedBatchBytes

	ModeNone  = abi.ModeNone
	ModePush  = abi.ModePush
	StateNone = abi.StateNone

	StateMirroring = abi.StateMirroring
	StateStopping  = abi.StateStopping
)

// Kafka error codes a policy typically answers with.
const (
	CorruptMessage        int16 = 2
	InvalidRecord         int16 = 87
	PolicyViolation       int16 = 44
	InvalidProducerEpoch  int16 = 47
	InvalidTimestamp      int16 = 32
	FencedLeaderEpoch     int16 = 74
	InvalidProducerIDMaps int16 = 49 // INVALID_PRODUCER_ID_MAPPING
)

// Policy describes a policy module.
type Policy struct {
	// Name is the module's name (lower case letters, digits, '-', '.', '_').
	Name string
	// Needs asks for batch bytes beyond the headers.
	Needs Needs
	// Configs are the topic configs the policy reads with Input.Config.
	Configs []string
	// Judge judges one call's batches; it rejects through v.
	Judge func(in Input, v *Verdicts)
}

// Verdicts collects a call's rejections.
type Verdicts struct {
	rs []abi.Rejection
}

// Reject rejects batch i with a Kafka error code and a reason (cut at
// abi.MaxReasonLen bytes). Rejecting a batch twice keeps both reasons; the
// host reports the first.
func (v *Verdicts) Reject(i int, code int16, reason string) {
	v.rs = append(v.rs, abi.Rejection{Batch: i, Code: code, Reason: reason})
}

// Rejections returns the rejections so far.
func (v *Verdicts) Rejections() []Rejection { return v.rs }

var (
	registered *Policy
	descriptor []byte
	verdicts   Verdicts
	out        []byte
)

// Register installs p as the module's policy; call it once, from init.
func Register(p Policy) {
	if registered != nil {
		panic("sdk: Register called twice")
	}
	if p.Judge == nil {
		panic("sdk: Policy.Judge is nil")
	}
	registered = &p
	descriptor = []byte(Describe(p))
}

// Describe renders p's descriptor text (docs/policies.md).
func Describe(p Policy) string {
	var b strings.Builder
	b.WriteString("abi=1\nname=")
	b.WriteString(p.Name)
	b.WriteString("\nneeds=")
	switch {
	case p.Needs&NeedBatchBytes != 0:
		b.WriteString("batch-bytes")
	case p.Needs&NeedControlBytes != 0:
		b.WriteString("control-bytes")
	default:
		b.WriteString("headers")
	}
	b.WriteString("\nconfigs=")
	b.WriteString(strings.Join(p.Configs, ","))
	b.WriteString("\n")
	return b.String()
}

// Run judges an encoded input with p and returns the encoded verdict list,
// or nil when every batch is accepted. It is what the judge export does,
// exposed so that policies can be tested natively.
func Run(p *Policy, input []byte) []byte {
	in, err := abi.ParseInput(input)
	if err != nil {
		// The host never sends this; trapping makes the host reject the
		// whole call and replace the instance.
		panic("sdk: malformed judge input")
	}
	verdicts.rs = verdicts.rs[:0]
	p.Judge(in, &verdicts)
	if len(verdicts.rs) == 0 {
		return nil
	}
	out = abi.AppendVerdicts(out[:0], verdicts.rs)
	return out
}
