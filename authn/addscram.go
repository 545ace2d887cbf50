package authn

import (
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// ScramEntry is one parsed `--add-scram` argument: a user's credential
// for one mechanism.
type ScramEntry struct {
	Mechanism  ScramMechanism
	User       string
	Credential Credential
}

// ParseAddScram parses kafka-storage.sh's `--add-scram` syntax,
// MECHANISM=[key=value,...] with the keys name (required), password, or
// saltedpassword with salt (both base64), and iterations (default 4096,
// at most 16384); a value may be in double quotes. A password is salted
// here with salt when given, else a random one.
func ParseAddScram(arg string) (ScramEntry, error) {
	var e ScramEntry
	arg = strings.TrimSpace(arg)
	mech, conf, ok := strings.Cut(arg, "=")
	if !ok {
		return e, fmt.Errorf("failed to find equals sign in SCRAM argument %q", redactScram(arg))
	}
	m, ok := ScramMechanismByName(mech)
	if !ok {
		return e, fmt.Errorf("the add-scram mechanism %s is not supported", mech)
	}
	e.Mechanism = m
	if !strings.HasPrefix(conf, "[") {
		return e, fmt.Errorf("expected configuration string to start with [")
	}
	if !strings.HasSuffix(conf, "]") || len(conf) < 2 {
		return e, fmt.Errorf("expected configuration string to end with ]")
	}
	kv := map[string]string{}
	for _, c := range strings.Split(conf[1:len(conf)-1], ",") {
		k, v, ok := strings.Cut(c, "=")
		if !ok {
			// Not quoted: it may be the part of a password after a comma.
			return e, fmt.Errorf("no equals sign found in a SCRAM component (values cannot contain a comma)")
		}
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		kv[k] = v
	}
	take := func(k string) (string, bool) {
		v, ok := kv[k]
		delete(kv, k)
		return v, ok
	}
	name, ok := take("name")
	if !ok {
		return e, fmt.Errorf("you must supply 'name' to add-scram")
	}
	e.User = name
	var salt []byte
	saltStr, haveSalt := take("salt")
	if haveSalt {
		if salt, ok = decodeJavaBase64(saltStr); !ok || len(salt) == 0 {
			return e, fmt.Errorf("failed to decode given salt")
		}
	}
	iterations := MinIterations
	if s, ok := take("iterations"); ok {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return e, fmt.Errorf("failed to parse iterations count: %q", s)
		}
		iterations = int(n)
	}
	password, havePassword := take("password")
	saltedStr, haveSalted := take("saltedpassword")
	var salted []byte
	switch {
	case havePassword:
	case !haveSalted:
		return e, fmt.Errorf("you must supply one of 'password' or 'saltedpassword' to add-scram")
	case !haveSalt:
		return e, fmt.Errorf("you must supply 'salt' with 'saltedpassword' to add-scram")
	default:
		if salted, ok = decodeJavaBase64(saltedStr); !ok || len(salted) == 0 {
			return e, fmt.Errorf("failed to decode given saltedpassword")
		}
	}
	if len(kv) > 0 {
		return e, fmt.Errorf("unknown SCRAM configurations: %s", strings.Join(slices.Sorted(maps.Keys(kv)), ", "))
	}
	if iterations < MinIterations {
		return e, fmt.Errorf("the 'iterations' value must be >= %d for add-scram using %s", MinIterations, m.Name)
	}
	if iterations > MaxIterations {
		return e, fmt.Errorf("the 'iterations' value must be <= %d for add-scram using %s", MaxIterations, m.Name)
	}
	if e.User == "" {
		return e, fmt.Errorf("the 'name' of add-scram must not be empty")
	}
	if salted == nil {
		if salt == nil {
			c, err := m.NewCredential(password, iterations)
			e.Credential = c
			return e, err
		}
		var err error
		if salted, err = m.SaltedPassword(password, salt, iterations); err != nil {
			return e, err
		}
	}
	e.Credential = m.Credential(salt, salted, iterations)
	return e, nil
}

// decodeJavaBase64 decodes as java.util.Base64's basic decoder: the
// standard alphabet, padding optional.
func decodeJavaBase64(s string) ([]byte, bool) {
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return b, true
	}
	b, err := base64.RawStdEncoding.DecodeString(s)
	return b, err == nil
}

// redactScram keeps a message about a malformed argument free of what may
// be a password: only the mechanism part is shown.
func redactScram(arg string) string {
	if i := strings.IndexAny(arg, "[,"); i >= 0 {
		return arg[:i] + "..."
	}
	if len(arg) > 20 {
		return arg[:20] + "..."
	}
	return arg
}
