package tlsconf

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// PrincipalMapper is Kafka's ssl.principal.mapping.rules: a comma
// separated list of rules tried in order, each DEFAULT (the distinguished
// name unchanged) or RULE:pattern/replacement/ with an optional L or U
// after the last slash (lower or upper case the result). A RULE applies
// when its pattern matches the whole name; the result is the name with
// every match of the pattern replaced by the replacement ($n and ${name}
// are groups, a backslash quotes the next character; a group number
// beyond the pattern's groups is literal, as Kafka escapes it). In the
// pattern and the replacement a backslash also quotes a slash or a comma.
// Patterns are Go regular expressions (RE2), which agree with Java's for
// the character classes, groups and quantifiers rules use; Java-only
// constructs (lookaround, backreferences in the pattern) are refused when
// the rules are parsed.
type PrincipalMapper struct {
	rules []principalRule
	text  string
}

type principalRule struct {
	isDefault bool
	whole     *regexp.Regexp // ^(?:pattern)$: does the rule apply
	re        *regexp.Regexp // pattern: what is replaced
	repl      []replPart
	lower     bool
	upper     bool
}

// replPart is a literal (group < 0) or a group reference.
type replPart struct {
	lit   string
	group int
}

// maxRulesLen bounds the rules text: it comes from a configuration file,
// but the parser is also fuzzed with arbitrary input.
const maxRulesLen = 64 << 10

// ParsePrincipalRules parses ssl.principal.mapping.rules.
func ParsePrincipalRules(s string) (*PrincipalMapper, error) {
	if len(s) > maxRulesLen {
		return nil, fmt.Errorf("rules are %d bytes, more than %d", len(s), maxRulesLen)
	}
	m := &PrincipalMapper{text: s}
	rest := strings.TrimFunc(s, isJavaSpace)
	for {
		rest = strings.TrimLeftFunc(rest, isJavaSpace)
		if rest == "" {
			break
		}
		var (
			r   principalRule
			err error
		)
		switch {
		case rest[0] == ',':
			// An empty rule is ignored, as Kafka does.
			rest = rest[1:]
			continue
		case strings.HasPrefix(rest, "DEFAULT"):
			r.isDefault = true
			rest = rest[len("DEFAULT"):]
		case strings.HasPrefix(rest, "RULE:"):
			if r, rest, err = parseRule(rest); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("invalid rule %q: a rule is DEFAULT or RULE:pattern/replacement/[LU]", firstRule(rest))
		}
		rest = strings.TrimLeftFunc(rest, isJavaSpace)
		if rest != "" && rest[0] != ',' {
			return nil, fmt.Errorf("invalid rule: unexpected %q after a rule", firstRule(rest))
		}
		if rest != "" {
			rest = rest[1:]
		}
		m.rules = append(m.rules, r)
	}
	return m, nil
}

func isJavaSpace(r rune) bool { return r <= ' ' }

func firstRule(s string) string {
	if i := strings.IndexByte(s, ','); i >= 0 {
		s = s[:i]
	}
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return s
}

// field reads up to an unquoted slash, keeping backslash escapes as they
// are (the pattern hands them to the regexp, the replacement reads them).
func field(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 >= len(s) {
				return "", s, false
			}
			i++
		case '/':
			return s[:i], s[i+1:], true
		}
	}
	return "", s, false
}

func parseRule(s string) (principalRule, string, error) {
	var r principalRule
	body := s[len("RULE:"):]
	pat, rest, ok := field(body)
	if !ok {
		return r, "", fmt.Errorf("invalid rule %q: expected RULE:pattern/replacement/[LU]", firstRule(s))
	}
	repl, rest, ok := field(rest)
	if !ok {
		return r, "", fmt.Errorf("invalid rule %q: expected RULE:pattern/replacement/[LU]", firstRule(s))
	}
	if rest != "" && (rest[0] == 'L' || rest[0] == 'U') {
		r.lower, r.upper = rest[0] == 'L', rest[0] == 'U'
		rest = rest[1:]
	}
	pat = unquoteSlashes(pat)
	var err error
	if r.re, err = regexp.Compile(pat); err != nil {
		return r, "", fmt.Errorf("rule %q: pattern: %v", firstRule(s), err)
	}
	if r.whole, err = regexp.Compile(`^(?:` + pat + `)$`); err != nil {
		return r, "", fmt.Errorf("rule %q: pattern: %v", firstRule(s), err)
	}
	if r.repl, err = parseReplacement(repl, r.re); err != nil {
		return r, "", fmt.Errorf("rule %q: replacement: %v", firstRule(s), err)
	}
	return r, rest, nil
}

// unquoteSlashes turns \/ and \, into / and , (RE2 accepts the escaped
// forms too, but a plain character reads better in messages).
func unquoteSlashes(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' && i+1 < len(p) {
			if p[i+1] == '/' || p[i+1] == ',' {
				b.WriteByte(p[i+1])
			} else {
				b.WriteByte(p[i])
				b.WriteByte(p[i+1])
			}
			i++
			continue
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// parseReplacement reads Java's replacement syntax as Kafka's rules use
// it: \c is c, $n a group (further digits join while the number stays a
// group, a first digit beyond the groups is literal), ${name} a named
// group.
func parseReplacement(s string, re *regexp.Regexp) ([]replPart, error) {
	groups := re.NumSubexp()
	var parts []replPart
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, replPart{lit: lit.String(), group: -1})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 >= len(s) {
				return nil, errors.New("a backslash ends the replacement")
			}
			i++
			lit.WriteByte(s[i])
		case c == '$' && i+1 < len(s) && s[i+1] == '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return nil, errors.New("${ without }")
			}
			name := s[i+2 : i+2+end]
			g := re.SubexpIndex(name)
			if g < 0 {
				return nil, fmt.Errorf("no group named %q", name)
			}
			flush()
			parts = append(parts, replPart{group: g})
			i += 2 + end
		case c == '$' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			ref := int(s[i+1] - '0')
			if ref > groups {
				if groups == 0 {
					return nil, fmt.Errorf("group %d referenced but the pattern has no group", ref)
				}
				lit.WriteByte('$') // Kafka escapes a reference beyond the groups
				continue
			}
			j := i + 2
			for j < len(s) && s[j] >= '0' && s[j] <= '9' && ref*10+int(s[j]-'0') <= groups {
				ref = ref*10 + int(s[j]-'0')
				j++
			}
			flush()
			parts = append(parts, replPart{group: ref})
			i = j - 1
		case c == '$':
			return nil, errors.New("$ must be followed by a group number or {name} (quote it as \\$)")
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return parts, nil
}

// NoMatchingRule is the error of a name no rule applies to.
type NoMatchingRule struct{ DN, Rules string }

func (e *NoMatchingRule) Error() string {
	return fmt.Sprintf("no ssl.principal.mapping.rules apply to %q (rules %q)", e.DN, e.Rules)
}

// Name maps a distinguished name to a principal name: the result of the
// first rule that applies, or a *NoMatchingRule error.
func (m *PrincipalMapper) Name(dn string) (string, error) {
	for _, r := range m.rules {
		if r.isDefault {
			return dn, nil
		}
		if !r.whole.MatchString(dn) {
			continue
		}
		var b strings.Builder
		last := 0
		for _, loc := range r.re.FindAllStringSubmatchIndex(dn, -1) {
			b.WriteString(dn[last:loc[0]])
			for _, p := range r.repl {
				if p.group < 0 {
					b.WriteString(p.lit)
				} else if s, e := loc[2*p.group], loc[2*p.group+1]; s >= 0 {
					b.WriteString(dn[s:e])
				}
			}
			last = loc[1]
		}
		b.WriteString(dn[last:])
		out := b.String()
		switch {
		case r.lower:
			out = strings.ToLower(out)
		case r.upper:
			out = strings.ToUpper(out)
		}
		return out, nil
	}
	return "", &NoMatchingRule{DN: dn, Rules: m.text}
}

// rfc2253Keywords are the attribute types Java's X500Principal.getName()
// names by keyword; any other type is written as its dotted OID with the
// value's DER as #hex, as RFC 2253 says.
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

// DistinguishedName is the certificate's subject in RFC 2253 form, as
// Java's X500Principal.getName() writes it and Kafka maps it: the RDNs
// from the last to the first, keywords for the RFC 2253 attribute types,
// special characters escaped with a backslash.
func DistinguishedName(c *x509.Certificate) string {
	var seq []rawRDNSET
	if rest, err := asn1.Unmarshal(c.RawSubject, &seq); err != nil || len(rest) > 0 {
		return c.Subject.String()
	}
	var b strings.Builder
	for i := len(seq) - 1; i >= 0; i-- {
		if i != len(seq)-1 {
			b.WriteByte(',')
		}
		for j, atv := range seq[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			oid := atv.Type.String()
			var s string
			kw, known := rfc2253Keywords[oid]
			if known {
				if rest, err := asn1.Unmarshal(atv.Value.FullBytes, &s); err != nil || len(rest) > 0 || !utf8.ValidString(s) {
					known = false
				}
			}
			if known {
				b.WriteString(kw)
				b.WriteByte('=')
				b.WriteString(escapeRFC2253(s))
				continue
			}
			b.WriteString(oid)
			b.WriteString("=#")
			b.WriteString(hex.EncodeToString(atv.Value.FullBytes))
		}
	}
	return b.String()
}

// rawATV is an attribute of a name with its value's DER kept, so an
// unnamed type is written with the bytes the certificate holds.
type rawATV struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// rawRDNSET is one relative distinguished name (an ASN.1 SET OF; the
// suffix tells encoding/asn1 so).
type rawRDNSET []rawATV

func escapeRFC2253(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case strings.ContainsRune(",+\"\\<>;", r),
			r == '#' && i == 0,
			r == ' ' && (i == 0 || i == len(s)-1):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == 0:
			b.WriteString(`\00`)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
