package interop

import (
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verbatim-kafka/verbatim/internal/testcerts"
	"github.com/verbatim-kafka/verbatim/tlsconf"
)

// TestTLSPrincipalNamesAsKafka compares tlsconf's RFC 2253 subjects with
// Java's X500Principal.getName() and its ssl.principal.mapping.rules with
// Kafka's own SslPrincipalMapper (kafka-clients 4.4), case by case.
func TestTLSPrincipalNamesAsKafka(t *testing.T) {
	ca := testcerts.NewCA(t)
	oid := func(ids ...int) asn1.ObjectIdentifier { return asn1.ObjectIdentifier(ids) }
	subjects := []pkix.Name{
		{CommonName: "kafka1", OrganizationalUnit: []string{"Eng"}, Organization: []string{"Apache"}, Country: []string{"US"}},
		{CommonName: `a,b+c"d\e<f>g;h=i#j`},
		{CommonName: "#lead", Organization: []string{" both ends "}},
		{CommonName: "Zoë Ünïcode", Locality: []string{"Zürich"}, Province: []string{"ZH"}, StreetAddress: []string{"Main 1"}},
		{CommonName: "svc", ExtraNames: []pkix.AttributeTypeAndValue{
			{Type: oid(0, 9, 2342, 19200300, 100, 1, 1), Value: "jdoe"},
			{Type: oid(0, 9, 2342, 19200300, 100, 1, 25), Value: "example"},
			{Type: oid(1, 2, 840, 113549, 1, 9, 1), Value: "svc@example.com"},
			{Type: oid(2, 5, 4, 5), Value: "1234"},
		}},
	}
	dir := t.TempDir()
	var input strings.Builder
	var want []string
	for i, s := range subjects {
		p := ca.Client(t, fmt.Sprintf("c%d", i), s)
		fmt.Fprintf(&input, "DN\t%s\n", p.CertFile)
		want = append(want, tlsconf.DistinguishedName(p.Cert))
	}
	dn := "CN=Kafka1,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown"
	rules := []string{
		"DEFAULT",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/U",
		"RULE:^CN=(.*?),OU=Admins.*$/$1/",
		"RULE:^CN=(.*?),.*$/$1\\/x\\$2/",
		"RULE:^CN=(.*?),.*$/$1\\/x\\$y/L",
		"RULE:(.*)/user-$1/",
		"RULE:(.*?)/x/",
		"RULE:^(.*)$/user-$1/",
		"RULE:CN=(.*?),(.*)/$2/",
		"RULE:^CN=(.*)$/${nope}/",
		"RULE:^CN=(?<name>[^,]*),.*$/${name}/",
		"RULE:^CN=.*$/$1/",
		"RULE:^CN=(.*)$/$/",
		"RULE:^CN=(.*?),.*$/$15/",
		"RULE:^CN=(.*?),.*$/u-$1-$9/",
		"RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
		"  RULE:^CN=(.*?),.*$/$1/ , DEFAULT ",
		"DEFAULT1", "DEFAULT/L", "RULE:CN=(.*?),OU=ServiceUsers.*/$1/LU", "RULE:CN=(.*?)/L", "garbage",
	}
	for _, r := range rules {
		fmt.Fprintf(&input, "MAP\t%s\t%s\n", r, dn)
		m, err := tlsconf.ParsePrincipalRules(r)
		if err != nil {
			want = append(want, "INVALID")
			continue
		}
		name, err := m.Name(dn)
		var nm *tlsconf.NoMatchingRule
		switch {
		case errors.As(err, &nm):
			want = append(want, "NOMATCH")
		case err != nil:
			want = append(want, "ERROR")
		default:
			want = append(want, name)
		}
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	lib, err := KafkaLibDir()
	if err != nil {
		t.Fatal(err)
	}
	argv := append([]string{javaBinary(t)}, defaultToolJVMOpts...)
	argv = append(argv, "-cp", filepath.Join(lib, "*"), filepath.Join(root, "interop", "testdata", "tlsnames", "TLSNames.java"))
	res, err := runTool(t, Cmd{Stdin: strings.NewReader(input.String()), Dir: dir}, argv)
	if err != nil {
		t.Fatalf("TLSNames.java: %v", err)
	}
	got := res.Lines()
	if len(got) != len(want) {
		t.Fatalf("Java answered %d lines, want %d:\n%s", len(got), len(want), res.Stdout)
	}
	inputs := strings.Split(strings.TrimSpace(input.String()), "\n")
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%q: Kafka/Java %q, Verbatim %q", inputs[i], got[i], want[i])
		}
	}
}
