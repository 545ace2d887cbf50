package props

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Props is a parsed properties file: keys in the order they were first
// defined, a later definition of a key replacing its value (as Java's).
type Props struct {
	keys []string
	vals map[string]string
	line map[string]int
}

// New returns an empty Props.
func New() *Props { return &Props{vals: map[string]string{}, line: map[string]int{}} }

// Set defines key (line 0: not from a file).
func (p *Props) Set(key, value string) { p.set(key, value, 0) }

func (p *Props) set(key, value string, line int) {
	if _, ok := p.vals[key]; !ok {
		p.keys = append(p.keys, key)
	}
	p.vals[key] = value
	p.line[key] = line
}

// Get returns key's value and whether it is defined.
func (p *Props) Get(key string) (string, bool) {
	v, ok := p.vals[key]
	return v, ok
}

// Line is the line of the file where key was last defined (0 if it was
// not read from a file or is not defined).
func (p *Props) Line(key string) int { return p.line[key] }

// Keys returns the defined keys in definition order.
func (p *Props) Keys() []string { return append([]string(nil), p.keys...) }

// Sorted returns the defined keys sorted.
func (p *Props) Sorted() []string {
	k := p.Keys()
	sort.Strings(k)
	return k
}

// Len is the number of defined keys.
func (p *Props) Len() int { return len(p.keys) }

// Merge defines every key of o in p, o's values winning.
func (p *Props) Merge(o *Props) {
	for _, k := range o.keys {
		p.set(k, o.vals[k], o.line[k])
	}
}

// ReadFile parses the file at path.
func ReadFile(path string) (*Props, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// maxLine bounds one logical line (after continuations), so a hostile
// file cannot make the parser hold unbounded memory in one value.
const maxLine = 1 << 20

// Parse reads properties from r. Errors name the line.
func Parse(r io.Reader) (*Props, error) {
	p := New()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	n := 0
	for sc.Scan() {
		n++
		start := n
		line := strings.TrimLeft(sc.Text(), " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		// Join continuation lines: an odd number of trailing backslashes.
		for continues(line) {
			line = line[:len(line)-1]
			if !sc.Scan() {
				break
			}
			n++
			line += strings.TrimLeft(sc.Text(), " \t\f")
			if len(line) > maxLine {
				return nil, fmt.Errorf("line %d: logical line longer than %d bytes", start, maxLine)
			}
		}
		k, v, err := split(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", start, err)
		}
		p.set(k, v, start)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", n+1, err)
	}
	return p, nil
}

// continues reports whether line ends with an unescaped backslash.
func continues(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// split cuts a logical line into its unescaped key and value: the key ends
// at the first unescaped '=', ':' or whitespace; whitespace around the
// separator is skipped (one '=' or ':' at most).
func split(line string) (string, string, error) {
	i := 0
	for i < len(line) {
		c := line[i]
		if c == '\\' {
			i += 2
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			break
		}
		i++
	}
	i = min(i, len(line))
	rawKey := line[:i]
	rest := strings.TrimLeft(line[i:], " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	k, err := unescape(rawKey)
	if err != nil {
		return "", "", err
	}
	v, err := unescape(rest)
	if err != nil {
		return "", "", err
	}
	return k, v, nil
}

func unescape(s string) (string, error) {
	if !strings.Contains(s, "\\") {
		if !utf8.ValidString(s) {
			return "", fmt.Errorf("invalid UTF-8")
		}
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i == len(s) {
			break // a lone trailing backslash is dropped, as Java does
		}
		switch c = s[i]; c {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("malformed \\u escape")
			}
			r, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf("malformed \\u escape %q", s[i-1:i+5])
			}
			b.WriteRune(rune(r))
			i += 4
		default:
			b.WriteByte(c)
		}
	}
	out := b.String()
	if !utf8.ValidString(out) {
		return "", fmt.Errorf("invalid UTF-8")
	}
	return out, nil
}
