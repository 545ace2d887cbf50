package authn

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

func TestStoreUpdatePersistDecode(t *testing.T) {
	var saved []byte
	fail := false
	st := NewStore(func(b []byte) error {
		if fail {
			return errors.New("disk full")
		}
		saved = append([]byte(nil), b...)
		return nil
	})
	m, _ := ScramMechanismByName(SCRAMSHA512)
	c, err := m.NewCredential("secret", 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(func(tx *Tx) error { tx.Put("admin", SCRAMSHA512, c); return nil }); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(saved, []byte("secret")) {
		t.Fatal("the password is in the store's encoding")
	}
	fail = true
	if err := st.Update(func(tx *Tx) error { tx.Delete("admin", SCRAMSHA512); return nil }); err == nil {
		t.Fatal("a failed persist was reported as success")
	}
	if _, ok := st.Lookup("admin", SCRAMSHA512); !ok {
		t.Fatal("a change whose persist failed became visible")
	}
	fail = false
	st2, err := DecodeStore(saved, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := st2.Lookup("admin", SCRAMSHA512)
	if !ok || !bytes.Equal(got.StoredKey, c.StoredKey) || got.Iterations != 4096 {
		t.Fatalf("decoded %+v", got)
	}
	if d := st2.Describe("admin"); len(d) != 1 || d[0].Mechanism.Type != 2 || d[0].Iterations != 4096 {
		t.Fatalf("describe %+v", d)
	}
	if u := st2.Users(); len(u) != 1 || u[0] != "admin" {
		t.Fatalf("users %v", u)
	}
	if err := st.Update(func(tx *Tx) error {
		if !tx.Has("admin", SCRAMSHA512) {
			t.Error("Has: missing")
		}
		tx.Delete("admin", SCRAMSHA512)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(st.Users()) != 0 {
		t.Fatal("user left after its last credential was deleted")
	}
	for _, bad := range []string{
		``, `{}`, `{"version":2,"users":{}}`,
		`{"version":1,"users":{"a":{"SCRAM-SHA-1":{}}}}`,
		`{"version":1,"users":{"a":{"SCRAM-SHA-256":{"salt":"AA==","iterations":4096,"stored_key":"AA==","server_key":"AA=="}}}}`,
	} {
		if _, err := DecodeStore([]byte(bad), nil); err == nil {
			t.Errorf("DecodeStore(%s) accepted", bad)
		}
	}
}

func TestParseAddScram(t *testing.T) {
	e, err := ParseAddScram("SCRAM-SHA-512=[name=admin,password=admin-secret]")
	if err != nil {
		t.Fatal(err)
	}
	if e.User != "admin" || e.Mechanism.Name != SCRAMSHA512 || e.Credential.Iterations != 4096 || len(e.Credential.Salt) == 0 {
		t.Fatalf("%+v", e)
	}
	// The salted form gives the same credential as the password with the
	// same salt: the stored keys do not depend on the form.
	m, _ := ScramMechanismByName(SCRAMSHA256)
	salt := []byte("0123456789abcdef")
	sp, _ := m.SaltedPassword("alice-secret", salt, 8192)
	b64 := base64.StdEncoding.EncodeToString
	e1, err := ParseAddScram("SCRAM-SHA-256=[name=\"alice\",salt=" + b64(salt) + ",saltedpassword=" + b64(sp) + ",iterations=8192]")
	if err != nil {
		t.Fatal(err)
	}
	e2, err := ParseAddScram("SCRAM-SHA-256=[name=alice,password=\"alice-secret\",salt=" + b64(salt) + ",iterations=8192]")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(e1.Credential.StoredKey, e2.Credential.StoredKey) || !bytes.Equal(e1.Credential.ServerKey, e2.Credential.ServerKey) || e1.Credential.Iterations != 8192 {
		t.Fatalf("salted %+v password %+v", e1.Credential, e2.Credential)
	}
	for arg, want := range map[string]string{
		"SCRAM-SHA-512":                                      "equals sign",
		"SCRAM-SHA-1=[name=a,password=b]":                    "not supported",
		"SCRAM-SHA-512=name=a,password=b]":                   "start with [",
		"SCRAM-SHA-512=[name=a,password=b":                   "end with ]",
		"SCRAM-SHA-512=[password=b]":                         "'name'",
		"SCRAM-SHA-512=[name=a]":                             "one of 'password' or 'saltedpassword'",
		"SCRAM-SHA-512=[name=a,saltedpassword=AAAA]":         "'salt' with 'saltedpassword'",
		"SCRAM-SHA-512=[name=a,password=b,iterations=4095]":  ">= 4096",
		"SCRAM-SHA-512=[name=a,password=b,iterations=16385]": "<= 16384",
		"SCRAM-SHA-512=[name=a,password=b,iterations=x]":     "iterations count",
		"SCRAM-SHA-512=[name=a,password=b,color=red]":        "unknown SCRAM configurations: color",
		"SCRAM-SHA-512=[name=a,password=se,cret]":            "no equals sign",
		"SCRAM-SHA-512=[name=a,password=b,salt=!!]":          "salt",
	} {
		_, err := ParseAddScram(arg)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", arg, err, want)
		}
		if err != nil && (strings.Contains(err.Error(), "cret") || strings.Contains(err.Error(), "password=b")) {
			t.Errorf("%s: the error shows the password: %v", arg, err)
		}
	}
}
