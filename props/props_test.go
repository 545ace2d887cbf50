package props

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	in := "# comment\n! other comment\n" +
		"listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093\n" +
		"  spaced.key  =  spaced value  \n" +
		"colon.key: v2\n" +
		"ws.key v3\n" +
		"empty.key=\n" +
		"bare.key\n" +
		"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n" +
		"    username=\"admin\" \\\n" +
		"    password=\"s=cr:et\";\n" +
		"esc\\=key=a\\tb\\u0041\\\\\n" +
		"dup=1\n" +
		"dup=2\n"
	p, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"listeners":        "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093",
		"spaced.key":       "spaced value  ",
		"colon.key":        "v2",
		"ws.key":           "v3",
		"empty.key":        "",
		"bare.key":         "",
		"sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="s=cr:et";`,
		"esc=key":          "a\tbA\\",
		"dup":              "2",
	}
	if p.Len() != len(want) {
		t.Errorf("got %d keys %v, want %d", p.Len(), p.Keys(), len(want))
	}
	for k, v := range want {
		got, ok := p.Get(k)
		if !ok || got != v {
			t.Errorf("%q = %q (%v), want %q", k, got, ok, v)
		}
	}
	if l := p.Line("sasl.jaas.config"); l != 9 {
		t.Errorf("line of sasl.jaas.config = %d, want 9", l)
	}
	if l := p.Line("dup"); l != 14 {
		t.Errorf("line of dup = %d, want 14 (the last definition)", l)
	}
	if k := p.Keys(); k[0] != "listeners" || k[len(k)-1] != "dup" {
		t.Errorf("keys not in definition order: %v", k)
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{"a=\\u12\n", "a=\\uzzzz\n", "a=\xff\n"} {
		if _, err := Parse(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("Parse(%q) = %v, want an error naming line 1", in, err)
		}
	}
	if _, err := Parse(strings.NewReader("a=" + strings.Repeat("x", maxLine+1))); err == nil {
		t.Error("a line over the bound was accepted")
	}
}

func TestMerge(t *testing.T) {
	a, b := New(), New()
	a.Set("x", "1")
	a.Set("y", "1")
	b.Set("y", "2")
	b.Set("z", "2")
	a.Merge(b)
	if v, _ := a.Get("y"); v != "2" || a.Len() != 3 {
		t.Errorf("merge: y=%q len=%d", v, a.Len())
	}
}

// FuzzParse checks the parser never panics, and that every key it returns
// survives being written back escaped and parsed again.
func FuzzParse(f *testing.F) {
	f.Add("a=b\n")
	f.Add("k\\\n  v=1\\\\\n# c\n")
	f.Add("x:\\u0041\\t\n")
	f.Fuzz(func(t *testing.T, in string) {
		p, err := Parse(strings.NewReader(in))
		if err != nil {
			return
		}
		var b strings.Builder
		for _, k := range p.Keys() {
			v, _ := p.Get(k)
			b.WriteString(escape(k, true) + "=" + escape(v, false) + "\n")
		}
		q, err := Parse(strings.NewReader(b.String()))
		if err != nil {
			t.Fatalf("re-parse of %q: %v", b.String(), err)
		}
		for _, k := range p.Keys() {
			v, _ := p.Get(k)
			if w, ok := q.Get(k); !ok || w != v {
				t.Fatalf("key %q: %q after round trip, want %q", k, w, v)
			}
		}
	})
}

// escape writes s so that Parse reads it back (test helper).
func escape(s string, key bool) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == '\\' || r == '=' || r == ':' || r == '#' || r == '!':
			b.WriteString("\\" + string(r))
		case r == '\n':
			b.WriteString("\\n")
		case r == '\r':
			b.WriteString("\\r")
		case r == '\t':
			b.WriteString("\\t")
		case r == '\f':
			b.WriteString("\\f")
		case r == ' ' && (key || i == 0):
			b.WriteString("\\ ")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestList(t *testing.T) {
	for in, want := range map[string]string{"": "", " a , b,,c ": "a|b|c", ",": "", "TLSv1.2": "TLSv1.2"} {
		if got := strings.Join(List(in), "|"); got != want {
			t.Errorf("List(%q) = %q, want %q", in, got, want)
		}
	}
}
