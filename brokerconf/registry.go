package brokerconf

import (
	"fmt"
	"sort"

	"github.com/verbatim-kafka/verbatim/broker"
)

// Scope says where a property may be set.
type Scope int

const (
	// ScopeBroker: only as the plain name.
	ScopeBroker Scope = iota
	// ScopeListener: also as listener.name.<listener>.<name>, which wins
	// over the plain name for that listener.
	ScopeListener
	// ScopeMechanism: as listener.name.<listener>.<mechanism>.<name>
	// (Kafka's per-mechanism sasl.jaas.config), and also per listener.
	ScopeMechanism
)

// Property is one broker property Verbatim implements.
type Property struct {
	// Name is Kafka's property name, e.g. "super.users".
	Name  string
	Scope Scope
	// Order sorts application: lower first (the listeners before the
	// properties scoped to them). Properties of the same order are
	// applied in name order, plain names before prefixed ones.
	Order int
	// Secret marks a password: its value never appears in messages.
	Secret bool
	// Doc is one line for `verbatim serve --help-config`.
	Doc string
	// Apply sets value on cfg. listener is "" for the plain name, else the
	// listener name as written in `listeners` (upper case, as Kafka
	// normalises it); mechanism is "" unless set per mechanism (upper
	// case, e.g. "SCRAM-SHA-512").
	Apply func(cfg *broker.Config, listener, mechanism, value string) error
}

var registry = map[string]Property{}

// Register adds p to the properties Verbatim implements. It is called from
// init functions; a name registered twice is a programming error.
func Register(p Property) {
	if p.Name == "" || p.Apply == nil {
		panic("brokerconf: property without name or Apply")
	}
	if _, dup := registry[p.Name]; dup {
		panic(fmt.Sprintf("brokerconf: property %q registered twice", p.Name))
	}
	registry[p.Name] = p
}

// Lookup returns the registered property of that (unprefixed) name.
func Lookup(name string) (Property, bool) {
	p, ok := registry[name]
	return p, ok
}

// Names lists the registered property names, sorted.
func Names() []string {
	n := make([]string, 0, len(registry))
	for k := range registry {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}
