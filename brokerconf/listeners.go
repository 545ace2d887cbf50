package brokerconf

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/props"
)

// Orders of the listener properties: the listeners first, then what names
// them, then what is scoped to them.
const (
	orderListeners    = 0
	orderListenerMaps = 1
	orderListenerTLS  = 10
	// finishProtocols and finishTLS are the finishing steps' orders.
	finishProtocols = 0
	finishTLS       = 10
)

func init() {
	Register(Property{Name: "listeners", Scope: ScopeBroker, Order: orderListeners,
		Doc:   "Comma-separated NAME://host:port listeners to bind (port 0: any free port); default: --listen as PLAINTEXT.",
		Apply: applyListeners})
	Register(Property{Name: "listener.security.protocol.map", Scope: ScopeBroker, Order: orderListenerMaps,
		Doc:   "NAME:PROTOCOL pairs giving each listener its security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); a listener named as a protocol needs none.",
		Apply: applyProtocolMap})
	Register(Property{Name: "advertised.listeners", Scope: ScopeBroker, Order: orderListenerMaps,
		Doc:   "NAME://host:port that Metadata and FindCoordinator name to clients of each listener; default: the bound address.",
		Apply: applyAdvertised})
	// Accepted so that a Kafka KRaft server.properties loads: Verbatim
	// has no KRaft controller (etcd holds the cluster state). The
	// listeners named in controller.listener.names are not bound.
	// inter.broker.listener.name is cluster mode's (cluster.go).
	for _, n := range []string{"controller.listener.names", "process.roles"} {
		Register(Property{Name: n, Scope: ScopeBroker, Order: orderListeners,
			Doc:   "Accepted for Kafka compatibility; no effect on a single node (controller listeners are not bound).",
			Apply: func(*broker.Config, string, string, string) error { return nil }})
	}
	RegisterFinish(finishProtocols, finishListeners)
}

// parseEndpoint reads NAME://host:port (host may be empty or a bracketed
// IPv6 address).
func parseEndpoint(s string) (name, host string, port int, err error) {
	name, addr, ok := strings.Cut(strings.TrimSpace(s), "://")
	if !ok || name == "" {
		return "", "", 0, fmt.Errorf("%q: expected NAME://host:port", s)
	}
	for _, r := range name {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return "", "", 0, fmt.Errorf("%q: bad listener name %q", s, name)
		}
	}
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", "", 0, fmt.Errorf("%q: %v", s, err)
	}
	port, err = strconv.Atoi(ps)
	if err != nil || port < 0 || port > 65535 {
		return "", "", 0, fmt.Errorf("%q: bad port %q", s, ps)
	}
	return strings.ToUpper(name), host, port, nil
}

func applyListeners(cfg *broker.Config, _, _, value string) error {
	cfg.Listeners = nil
	seen := map[string]bool{}
	for _, item := range props.List(value) {
		name, host, port, err := parseEndpoint(item)
		if err != nil {
			return err
		}
		if seen[name] {
			return fmt.Errorf("listener %s is listed twice", name)
		}
		seen[name] = true
		l := &broker.Listener{Name: name, Bind: net.JoinHostPort(host, strconv.Itoa(port))}
		if p := broker.SecurityProtocol(name); p.Valid() {
			l.Protocol = p // Kafka's default map names each protocol after itself
		}
		cfg.Listeners = append(cfg.Listeners, l)
	}
	if len(cfg.Listeners) == 0 {
		return fmt.Errorf("no listener in %q", value)
	}
	return nil
}

func applyProtocolMap(cfg *broker.Config, _, _, value string) error {
	for _, item := range props.List(value) {
		name, proto, ok := strings.Cut(item, ":")
		p := broker.SecurityProtocol(strings.ToUpper(strings.TrimSpace(proto)))
		if !ok || !p.Valid() {
			return fmt.Errorf("%q: expected NAME:PROTOCOL with PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", item)
		}
		name = strings.ToUpper(strings.TrimSpace(name))
		for _, l := range cfg.Listeners {
			if l.Name == name {
				l.Protocol = p
			}
		}
	}
	return nil
}

func applyAdvertised(cfg *broker.Config, _, _, value string) error {
	for _, item := range props.List(value) {
		name, host, port, err := parseEndpoint(item)
		if err != nil {
			return err
		}
		if len(cfg.Listeners) == 0 && name == string(broker.ProtocolPlaintext) {
			cfg.AdvertisedHost, cfg.AdvertisedPort = host, int32(port)
			continue
		}
		found := false
		for _, l := range cfg.Listeners {
			if l.Name == name {
				l.Advertised, found = net.JoinHostPort(host, strconv.Itoa(port)), true
			}
		}
		if !found {
			return fmt.Errorf("%s is not a listener of listeners", name)
		}
	}
	return nil
}

// finishListeners drops the controller listeners and checks that every
// listener has a protocol.
func finishListeners(cfg *broker.Config, st *State) error {
	controllers := map[string]bool{}
	if v, ok := st.Get("controller.listener.names"); ok {
		for _, n := range props.List(v) {
			controllers[strings.ToUpper(n)] = true
		}
	}
	kept := cfg.Listeners[:0]
	for _, l := range cfg.Listeners {
		if controllers[l.Name] {
			continue
		}
		if !l.Protocol.Valid() {
			return fmt.Errorf("listener %s has no security protocol: name it in listener.security.protocol.map (e.g. %s:SSL)", l.Name, l.Name)
		}
		kept = append(kept, l)
	}
	if len(cfg.Listeners) > 0 && len(kept) == 0 {
		return fmt.Errorf("listeners names only controller listeners (%s)", strings.Join(keys(controllers), ","))
	}
	cfg.Listeners = kept
	return nil
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
