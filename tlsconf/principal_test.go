package tlsconf

import (
	"bytes"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"testing"

	"github.com/verbatim-kafka/verbatim/internal/testcerts"
)

// The valid and invalid rules of Kafka's SslPrincipalMapperTest.
func TestPrincipalRulesParse(t *testing.T) {
	for _, r := range []string{
		"DEFAULT",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
		"RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
		"RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
		"RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
		"  DEFAULT  ,, RULE:a\\/b/c/ ",
		"",
	} {
		if _, err := ParsePrincipalRules(r); err != nil {
			t.Errorf("%q refused: %v", r, err)
		}
	}
	for _, r := range []string{
		"DEFAULT1", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
		"RULE:CN=(.*?),OU=ServiceUsers.*/$1",
		"RULE:CN=(.*?),OU=ServiceUsers.*/$1/LU",
		"RULE:CN=(.*?),OU=ServiceUsers.*/$1/L/U",
		"RULE:CN=(.*?),OU=ServiceUsers.*/L",
		"RULE:CN=(.*?),OU=ServiceUsers.*/U",
		"RULE:CN=(.*?),OU=ServiceUsers.*/LU",
		"RULE:(?<=x)a/b/", // lookbehind: Java's, not RE2's
		"RULE:a/x\\/",
		"garbage",
	} {
		if _, err := ParsePrincipalRules(r); err == nil {
			t.Errorf("%q accepted", r)
		}
	}
}

func TestPrincipalRulesApply(t *testing.T) {
	dn := "CN=Kafka1,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown"
	for _, tc := range []struct{ rules, dn, want string }{
		{"DEFAULT", dn, dn},
		{"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", dn, "Kafka1"},
		{"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT", dn, "kafka1"},
		{"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/U", dn, "KAFKA1"},
		{"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L", dn, "kafka1@serviceusers"},
		{"RULE:^CN=(.*?),OU=Admins.*$/admin-$1/,DEFAULT", dn, dn},
		{"RULE:^CN=(.*?),.*$/$1\\/x\\$y/L", dn, "kafka1/x$y"},
		{"RULE:(.*)/user-$1/", "CN=a", "user-CN=auser-"}, // Java's replaceAll: the empty match at the end too
		{"RULE:^(.*)$/user-$1/", "CN=a", "user-CN=a"},
		{"RULE:^CN=(.*?),.*$/$15/", dn, "Kafka15"},
		{"RULE:^CN=(.*?),(OU=.*)$/$2:$1/", dn, "OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown:Kafka1"},
		{"RULE:^CN=(?<name>[^,]*),.*$/${name}/", dn, "Kafka1"},
		{"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L", "OU=x,cn=Svc.A,O=y", "svc.a"},
	} {
		m, err := ParsePrincipalRules(tc.rules)
		if err != nil {
			t.Fatalf("%q: %v", tc.rules, err)
		}
		got, err := m.Name(tc.dn)
		if err != nil || got != tc.want {
			t.Errorf("%q on %q: %q, %v; want %q", tc.rules, tc.dn, got, err, tc.want)
		}
	}
	m, _ := ParsePrincipalRules("RULE:^CN=(.*?),OU=Admins$/$1/")
	if _, err := m.Name(dn); err == nil {
		t.Fatal("no rule applies, yet a name came out")
	}
	// Rules Kafka loads but cannot apply fail when they apply, as there.
	for _, r := range []string{"RULE:^CN=.*$/$1/", "RULE:^CN=(.*?),.*$/$1\\/x\\$2/", "RULE:^CN=(.*)$/${nope}/", "RULE:^CN=(.*)$/$/"} {
		m, err := ParsePrincipalRules(r + ",DEFAULT")
		if err != nil {
			t.Fatalf("%q refused: %v", r, err)
		}
		if got, err := m.Name(dn); err == nil {
			t.Errorf("%q applied as %q, want Java's error", r, got)
		}
		if got, err := m.Name("OU=x"); err != nil || got != "OU=x" {
			t.Errorf("%q on a name it does not match: %q, %v; want the DEFAULT", r, got, err)
		}
	}
}

func TestDistinguishedName(t *testing.T) {
	ca := testcerts.NewCA(t)
	uid := asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}
	email := asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}
	for _, tc := range []struct {
		name pkix.Name
		want string
	}{
		{pkix.Name{CommonName: "kafka1", OrganizationalUnit: []string{"Eng"}, Organization: []string{"Apache"}, Country: []string{"US"}},
			"CN=kafka1,OU=Eng,O=Apache,C=US"},
		{pkix.Name{CommonName: `a,b+c"d\e<f>g;h=i#j`}, `CN=a\,b\+c\"d\\e\<f\>g\;h\=i\#j`},
		{pkix.Name{CommonName: "#lead and trail "}, `CN=\#lead and trail\ `},
		{pkix.Name{CommonName: "u", Locality: []string{"Town"}, Province: []string{"State"}, StreetAddress: []string{"Main 1"},
			ExtraNames: []pkix.AttributeTypeAndValue{{Type: uid, Value: "jdoe"}}},
			"UID=jdoe,CN=u,STREET=Main 1,L=Town,ST=State"},
		{pkix.Name{CommonName: "e", ExtraNames: []pkix.AttributeTypeAndValue{{Type: email, Value: "e@x"}}},
			"1.2.840.113549.1.9.1=#0c03654078,CN=e"},
	} {
		leaf := ca.Client(t, "dn", tc.name)
		if got := DistinguishedName(leaf.Cert); got != tc.want {
			t.Errorf("subject %v: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func FuzzPrincipalRules(f *testing.F) {
	f.Add("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT", "CN=a,OU=ServiceUsers,O=x")
	f.Add("DEFAULT", "CN=a")
	f.Add("RULE:(a*)/$1$1\\$x${g}/U", "aaa")
	f.Fuzz(func(t *testing.T, rules, dn string) {
		m, err := ParsePrincipalRules(rules)
		if err != nil {
			return
		}
		if len(dn) > 4096 {
			dn = dn[:4096]
		}
		_, _ = m.Name(dn)
	})
}

// FuzzKeystorePEM: the lenient PEM reader and the key and certificate
// parsers behind it never panic, and whatever is read from a standard PEM
// encoding is the block pem.Encode wrote.
func FuzzKeystorePEM(f *testing.F) {
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), []byte{1, 2, 3})
	f.Add([]byte("-----BEGIN PRIVATE KEY----- AAAA -----END PRIVATE KEY-----"), []byte{})
	f.Add([]byte("-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n\nAA\n-----END RSA PRIVATE KEY-----"), []byte{0})
	f.Fuzz(func(t *testing.T, data, der []byte) {
		_, _ = pemCerts("x", data)
		_, _ = pemKey("x", data, false)
		enc := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		bs := decodePEM(enc)
		if len(bs) != 1 || bs[0].err != nil || !bytes.Equal(bs[0].der, der) {
			t.Fatalf("pem.Encode of %x read back as %+v", der, bs)
		}
	})
}
