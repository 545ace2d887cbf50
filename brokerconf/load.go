package brokerconf

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/props"
)

// listenerPrefix starts Kafka's listener-scoped names:
// listener.name.<listener>.<name> and
// listener.name.<listener>.<mechanism>.<name>.
const listenerPrefix = "listener.name."

// finisher is a step run once every property is applied, with the merged
// properties: what needs several properties together (the listeners'
// protocols, their TLS configurations).
type finisher struct {
	order int
	run   func(cfg *broker.Config, st *State) error
}

var finishers []finisher

// RegisterFinish adds a step run after all properties are applied, in
// order (lower first). Called from init functions.
func RegisterFinish(order int, run func(cfg *broker.Config, st *State) error) {
	finishers = append(finishers, finisher{order, run})
	sort.SliceStable(finishers, func(i, j int) bool { return finishers[i].order < finishers[j].order })
}

// State is what a finishing step sees: the merged properties (the file
// with the overrides applied).
type State struct {
	all *props.Props
}

// Get returns a merged property.
func (st *State) Get(name string) (string, bool) { return st.all.Get(name) }

// ListenerProps returns the properties whose names start with prefix
// (e.g. "ssl."), as the listener sees them: the plain names overridden by
// listener.name.<listener>.<name> (listener matched without regard to
// case, as Kafka normalises listener names).
func (st *State) ListenerProps(listener, prefix string) *props.Props {
	out := props.New()
	lp := listenerPrefix + strings.ToLower(listener) + "."
	for _, k := range st.all.Keys() {
		if strings.HasPrefix(k, prefix) {
			v, _ := st.all.Get(k)
			out.Set(k, v)
		}
	}
	for _, k := range st.all.Keys() {
		if len(k) > len(lp) && strings.EqualFold(k[:len(lp)], lp) && strings.HasPrefix(k[len(lp):], prefix) {
			v, _ := st.all.Get(k)
			out.Set(k[len(lp):], v)
		}
	}
	return out
}

// entry is one property to apply.
type entry struct {
	key       string // as written
	prop      Property
	listener  string
	mechanism string
	value     string
	where     string // "line N" or "--override"
}

// Load turns server.properties (p; nil for none) and `name=value`
// overrides (which win over the file) into a broker.Config. Registered
// names are applied in their Order (plain names before prefixed ones);
// Kafka 4.4 broker names Verbatim does not implement are accepted and
// listed in the one warning returned; any other name is refused, naming
// it and its line. Listener-prefixed names must name a listener of
// `listeners` and a property of listener (or mechanism) scope.
func Load(p *props.Props, overrides []string) (broker.Config, []string, error) {
	var cfg broker.Config
	warnings, err := LoadInto(&cfg, p, overrides)
	return cfg, warnings, err
}

// LoadInto is Load applying the properties over cfg's values (the command
// starts from its flags' defaults, then applies the flags given on the
// command line again). cfg.Logger, when set, receives the TLS reload
// lines of the listeners built.
func LoadInto(cfg *broker.Config, p *props.Props, overrides []string) ([]string, error) {
	all := props.New()
	if p != nil {
		all.Merge(p)
	}
	fromOverride := map[string]bool{}
	for _, o := range overrides {
		k, v, ok := strings.Cut(o, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("--override %q: must be name=value", redactOverride(o))
		}
		all.Set(k, v)
		fromOverride[k] = true
	}
	where := func(k string) string {
		if fromOverride[k] {
			return "--override " + k
		}
		if n := all.Line(k); n > 0 {
			return fmt.Sprintf("line %d", n)
		}
		return k
	}
	var (
		entries  []entry
		unknown  []string
		ignored  []string
		problems []string
	)
	for _, k := range all.Keys() {
		v, _ := all.Get(k)
		e, kind, msg := classify(k)
		switch kind {
		case kindRegistered:
			e.value, e.where = v, where(k)
			entries = append(entries, e)
		case kindKafka:
			ignored = append(ignored, k)
		case kindBad:
			problems = append(problems, fmt.Sprintf("%s: %s", where(k), msg))
		default:
			unknown = append(unknown, fmt.Sprintf("%s: %q", where(k), k))
		}
	}
	if len(unknown) > 0 {
		problems = append(problems, "unknown broker properties, neither Kafka 4.4's nor Verbatim's (a typo?): "+strings.Join(unknown, ", "))
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	sort.SliceStable(entries, func(i, j int) bool {
		a, b := entries[i], entries[j]
		if a.prop.Order != b.prop.Order {
			return a.prop.Order < b.prop.Order
		}
		if (a.listener == "") != (b.listener == "") {
			return a.listener == ""
		}
		if (a.mechanism == "") != (b.mechanism == "") {
			return a.mechanism == ""
		}
		return a.key < b.key
	})
	for _, e := range entries {
		if e.listener != "" && !hasListener(cfg, e.listener) {
			return nil, fmt.Errorf("%s: %s names listener %s, which is not in listeners", e.where, e.key, e.listener)
		}
		if err := e.prop.Apply(cfg, e.listener, e.mechanism, e.value); err != nil {
			msg := err.Error()
			if e.prop.Secret && strings.TrimSpace(e.value) != "" {
				msg = strings.ReplaceAll(msg, e.value, "[hidden]")
			}
			return nil, fmt.Errorf("%s: %s: %s", e.where, e.key, msg)
		}
	}
	st := &State{all: all}
	for _, f := range finishers {
		if err := f.run(cfg, st); err != nil {
			return nil, err
		}
	}
	var warnings []string
	if len(ignored) > 0 {
		sort.Strings(ignored)
		warnings = append(warnings, fmt.Sprintf("%d Kafka broker properties are not implemented by Verbatim and are ignored: %s",
			len(ignored), strings.Join(ignored, ", ")))
	}
	return warnings, nil
}

// redactOverride shows an override's name only: its value may be a
// password.
func redactOverride(o string) string {
	if k, _, ok := strings.Cut(o, "="); ok {
		return k + "=..."
	}
	if len(o) > 40 {
		return o[:40] + "..."
	}
	return o
}

type kind int

const (
	kindUnknown kind = iota
	kindRegistered
	kindKafka
	kindBad
)

// classify decides what a property name is: registered (with its listener
// and mechanism when prefixed), a Kafka name Verbatim ignores, a
// malformed prefixed name, or unknown.
func classify(k string) (entry, kind, string) {
	if p, ok := registry[k]; ok {
		return entry{key: k, prop: p}, kindRegistered, ""
	}
	if !strings.HasPrefix(k, listenerPrefix) {
		if IsKafkaBrokerProperty(k) {
			return entry{}, kindKafka, ""
		}
		return entry{}, kindUnknown, ""
	}
	listener, rest, ok := strings.Cut(k[len(listenerPrefix):], ".")
	if !ok || listener == "" || rest == "" {
		return entry{}, kindBad, fmt.Sprintf("%q: expected listener.name.<listener>.<property>", k)
	}
	listener = strings.ToUpper(listener)
	if p, ok := registry[rest]; ok {
		if p.Scope == ScopeBroker {
			return entry{}, kindBad, fmt.Sprintf("%s cannot be set per listener", rest)
		}
		return entry{key: k, prop: p, listener: listener}, kindRegistered, ""
	}
	if mech, name, ok := strings.Cut(rest, "."); ok {
		if p, ok := registry[name]; ok && p.Scope == ScopeMechanism {
			return entry{key: k, prop: p, listener: listener, mechanism: strings.ToUpper(mech)}, kindRegistered, ""
		}
		if IsKafkaBrokerProperty(name) && isMechanism(mech) {
			return entry{}, kindKafka, ""
		}
	}
	if IsKafkaBrokerProperty(rest) {
		return entry{}, kindKafka, ""
	}
	return entry{}, kindUnknown, ""
}

// isMechanism reports whether s looks like a SASL mechanism name in a
// listener.name.<l>.<mechanism>. prefix (lower case in Kafka's examples).
func isMechanism(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// hasListener reports whether cfg has a listener of that (upper case)
// name; without `listeners` the one implicit listener is PLAINTEXT.
func hasListener(cfg *broker.Config, name string) bool {
	if len(cfg.Listeners) == 0 {
		return name == string(broker.ProtocolPlaintext)
	}
	for _, l := range cfg.Listeners {
		if l.Name == name {
			return true
		}
	}
	return false
}
