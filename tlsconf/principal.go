package tlsconf

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strconv"
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
// beyond the pattern's groups is literal, as Kafka escapes it; a
// replacement Java cannot apply fails the authentication when the rule
// applies, as in Kafka). In the
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
	// atStart is ^(?:pattern): whether the pattern matches empty at a
	// position (Java's replaceAll finds an empty match right after a
	// non-empty one, which Go's FindAll skips); anchored patterns (^, \A)
	// never match there.
	atStart  *regexp.Regexp
	anchored bool
	repl     []replPart
	// replErr is the error Java raises applying the replacement (a group
	// the pattern does not have, a bad $ or \): the rule loads, as in
	// Kafka, and fails the authentication when it applies.
	replErr error
	lower   bool
	upper   bool
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
	if r.atStart, err = regexp.Compile(`^(?:` + pat + `)`); err != nil {
		return r, "", fmt.Errorf("rule %q: pattern: %v", firstRule(s), err)
	}
	r.anchored = hasBeginAnchor(pat)
	r.repl, r.replErr = parseReplacement(kafkaEscape(repl, r.re.NumSubexp()), r.re)
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

// hasBeginAnchor reports whether the pattern can only match at the start
// of the text (^ or \A outside multi-line mode, as DNs have no newlines).
func hasBeginAnchor(pat string) bool {
	re, err := syntax.Parse(pat, syntax.Perl)
	if err != nil {
		return false
	}
	var walk func(*syntax.Regexp) bool
	walk = func(r *syntax.Regexp) bool {
		switch r.Op {
		case syntax.OpBeginText, syntax.OpBeginLine:
			return true
		case syntax.OpConcat:
			return len(r.Sub) > 0 && walk(r.Sub[0])
		case syntax.OpCapture:
			return walk(r.Sub[0])
		case syntax.OpAlternate:
			for _, sub := range r.Sub {
				if !walk(sub) {
					return false
				}
			}
			return true
		}
		return false
	}
	return walk(re)
}

var backRefRE = regexp.MustCompile(`\$(\d+)`)

// kafkaEscape is Kafka's escapeLiteralBackReferences: a $n whose number
// (shortened digit by digit while above 9) still exceeds the groups gets
// a backslash, making it literal. As Kafka's, the positions are those of
// the original text, inserted into the text already changed.
func kafkaEscape(s string, groups int) string {
	if groups == 0 {
		return s
	}
	value := s
	for _, m := range backRefRE.FindAllStringSubmatchIndex(s, -1) {
		digits := s[m[2]:m[3]]
		if strings.HasPrefix(digits, "0") {
			continue
		}
		idx, err := strconv.Atoi(digits)
		if err != nil || len(digits) > 9 {
			// Java's Integer.parseInt fails: the apply fails (below, the
			// replacement names a group that does not exist).
			continue
		}
		for idx > groups && idx >= 10 {
			idx /= 10
		}
		if idx > groups {
			at := m[2] - 1
			if at > len(value) {
				at = len(value)
			}
			value = value[:at] + "\\" + value[at:]
		}
	}
	return value
}

// parseReplacement reads Java's replacement syntax (Matcher.replaceAll):
// \c is c, $n a group (further digits join while the number stays a
// group), ${name} a named group. The error is what Java throws.
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
				return nil, errors.New("character to be escaped is missing")
			}
			i++
			lit.WriteByte(s[i])
		case c == '$' && i+1 >= len(s):
			return nil, errors.New("illegal group reference: group index is missing")
		case c == '$' && s[i+1] == '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return nil, errors.New("named capturing group is missing trailing '}'")
			}
			name := s[i+2 : i+2+end]
			g := re.SubexpIndex(name)
			if name == "" || g < 0 {
				return nil, fmt.Errorf("no group with name {%s}", name)
			}
			flush()
			parts = append(parts, replPart{group: g})
			i += 2 + end
		case c == '$':
			if s[i+1] < '0' || s[i+1] > '9' {
				return nil, errors.New("illegal group reference")
			}
			ref := int(s[i+1] - '0')
			j := i + 2
			for j < len(s) && s[j] >= '0' && s[j] <= '9' && ref*10+int(s[j]-'0') <= groups {
				ref = ref*10 + int(s[j]-'0')
				j++
			}
			if ref > groups {
				return nil, fmt.Errorf("no group %d", ref)
			}
			flush()
			parts = append(parts, replPart{group: ref})
			i = j - 1
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
		if r.replErr != nil {
			return "", fmt.Errorf("ssl.principal.mapping.rules: applying %s: %w", r.re, r.replErr)
		}
		var b strings.Builder
		last := 0
		emit := func(loc []int, off int) {
			b.WriteString(dn[last : loc[0]+off])
			for _, p := range r.repl {
				if p.group < 0 {
					b.WriteString(p.lit)
				} else if s, e := loc[2*p.group], loc[2*p.group+1]; s >= 0 {
					b.WriteString(dn[s+off : e+off])
				}
			}
			last = loc[1] + off
		}
		for _, loc := range r.re.FindAllStringSubmatchIndex(dn, -1) {
			if loc[0] < last {
				continue
			}
			emit(loc, 0)
			// Java's replaceAll also takes an empty match right after a
			// non-empty one (Go's skips it).
			if loc[1] > loc[0] && !r.anchored {
				if e := r.atStart.FindStringSubmatchIndex(dn[loc[1]:]); e != nil && e[1] == 0 {
					emit(e, loc[1])
				}
			}
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
// the characters Java escapes (, = + < > # ; " \ anywhere, a space at
// either end) escaped with a backslash.
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
		case strings.ContainsRune(",=+\"\\<>;#", r),
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
