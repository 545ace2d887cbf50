package props

import (
	"fmt"
	"strings"
)

// JAAS is one login module entry of a `sasl.jaas.config` value, Kafka's
// JAAS syntax: `<LoginModule class> <flag> key="value" key=value ...;`.
type JAAS struct {
	// LoginModule is the class name, e.g.
	// org.apache.kafka.common.security.scram.ScramLoginModule.
	LoginModule string
	// Flag is required, requisite, sufficient or optional.
	Flag string
	// Options in definition order of their keys; values unquoted.
	Options map[string]string
	Keys    []string
}

// ParseJAAS parses a `sasl.jaas.config` value. Kafka allows exactly one
// login module in it; so does this. Quoted values may contain any
// character but an unescaped quote; a backslash in a quoted value escapes
// the next character.
func ParseJAAS(s string) (JAAS, error) {
	var j JAAS
	t := &jaasLexer{s: s}
	var err error
	if j.LoginModule, err = t.word(); err != nil {
		return j, fmt.Errorf("sasl.jaas.config: login module: %w", err)
	}
	if j.Flag, err = t.word(); err != nil {
		return j, fmt.Errorf("sasl.jaas.config: flag: %w", err)
	}
	switch strings.ToLower(j.Flag) {
	case "required", "requisite", "sufficient", "optional":
		j.Flag = strings.ToLower(j.Flag)
	default:
		return j, fmt.Errorf("sasl.jaas.config: flag %q is not required, requisite, sufficient or optional", j.Flag)
	}
	j.Options = map[string]string{}
	for {
		t.skipSpace()
		if t.eof() {
			return j, fmt.Errorf("sasl.jaas.config: missing ';' at the end")
		}
		if t.s[t.i] == ';' {
			t.i++
			t.skipSpace()
			if !t.eof() {
				return j, fmt.Errorf("sasl.jaas.config: more than one login module (Kafka allows one)")
			}
			return j, nil
		}
		k, err := t.word()
		if err != nil {
			return j, fmt.Errorf("sasl.jaas.config: option name: %w", err)
		}
		t.skipSpace()
		if t.eof() || t.s[t.i] != '=' {
			return j, fmt.Errorf("sasl.jaas.config: option %q has no '='", k)
		}
		t.i++
		t.skipSpace()
		v, err := t.value()
		if err != nil {
			return j, fmt.Errorf("sasl.jaas.config: option %q: %w", k, err)
		}
		if _, dup := j.Options[k]; !dup {
			j.Keys = append(j.Keys, k)
		}
		j.Options[k] = v
	}
}

type jaasLexer struct {
	s string
	i int
}

func (t *jaasLexer) eof() bool { return t.i >= len(t.s) }

func (t *jaasLexer) skipSpace() {
	for !t.eof() && strings.IndexByte(" \t\r\n", t.s[t.i]) >= 0 {
		t.i++
	}
}

// word reads an unquoted token: up to space, '=', ';' or a quote.
func (t *jaasLexer) word() (string, error) {
	t.skipSpace()
	start := t.i
	for !t.eof() && strings.IndexByte(" \t\r\n=;\"", t.s[t.i]) < 0 {
		t.i++
	}
	if t.i == start {
		return "", fmt.Errorf("expected a name at offset %d", start)
	}
	return t.s[start:t.i], nil
}

// value reads a quoted or unquoted option value.
func (t *jaasLexer) value() (string, error) {
	if t.eof() || t.s[t.i] != '"' {
		return t.word()
	}
	t.i++
	var b strings.Builder
	for !t.eof() {
		c := t.s[t.i]
		t.i++
		switch c {
		case '\\':
			if t.eof() {
				return "", fmt.Errorf("unterminated quoted value")
			}
			b.WriteByte(t.s[t.i])
			t.i++
		case '"':
			return b.String(), nil
		default:
			b.WriteByte(c)
		}
	}
	return "", fmt.Errorf("unterminated quoted value")
}
