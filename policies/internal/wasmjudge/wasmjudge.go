package wasmjudge

import (
	"context"
	"sync"
	"testing"

	"github.com/verbatim-kafka/verbatim/policies/abi"
	"github.com/verbatim-kafka/verbatim/wasmpolicy"
)

var (
	mu       sync.Mutex
	host     *wasmpolicy.Host
	bindings = map[string]*wasmpolicy.Binding{}
)

// binding returns the process-wide binding of built-in name (one host,
// compiled code kept in memory: the WAT built-ins compile in milliseconds).
func binding(t testing.TB, name string) *wasmpolicy.Binding {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if host == nil {
		h, err := wasmpolicy.NewHost(wasmpolicy.Options{})
		if err != nil {
			t.Fatal(err)
		}
		host = h
	}
	b, ok := bindings[name]
	if !ok {
		var err error
		if b, err = host.Bind("t", []string{name}, nil); err != nil {
			t.Fatalf("binding built-in %s: %v", name, err)
		}
		bindings[name] = b
	}
	return b
}

// Judge runs built-in name's module over set with context c and returns
// its rejections in the SDK's form (nil when every batch is accepted).
func Judge(t testing.TB, name string, c *abi.Context, set []byte) ([]abi.Rejection, error) {
	t.Helper()
	v, err := binding(t, name).Judge(context.Background(), *c, set)
	if err != nil {
		return nil, err
	}
	var rs []abi.Rejection
	for _, r := range v.Rejected {
		rs = append(rs, abi.Rejection{Batch: r.Batch, Code: r.Code, Reason: r.Reason})
	}
	return rs, nil
}
