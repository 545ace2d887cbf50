package authn

import (
	"strings"
	"testing"
)

func TestCredentialRecordRoundTrip(t *testing.T) {
	m, _ := ScramMechanismByName(SCRAMSHA256)
	c, err := m.NewCredential("secret", 4096)
	if err != nil {
		t.Fatal(err)
	}
	name := RecordName(SCRAMSHA256, "team/alice")
	if name != "SCRAM-SHA-256/team/alice" {
		t.Fatalf("record name %q", name)
	}
	user, gm, got, err := DecodeRecord(name, EncodeRecord(c))
	if err != nil || user != "team/alice" || gm.Name != SCRAMSHA256 || string(got.StoredKey) != string(c.StoredKey) || got.Iterations != 4096 {
		t.Fatalf("decoded %q %s %+v %v", user, gm.Name, got, err)
	}
	if strings.Contains(string(EncodeRecord(c)), "secret") {
		t.Fatal("the password is in the record")
	}
	for _, bad := range []struct{ name, value string }{
		{"SCRAM-SHA-256", string(EncodeRecord(c))},       // no user
		{"SCRAM-SHA-256/", string(EncodeRecord(c))},      // empty user
		{"SCRAM-SHA-1/alice", string(EncodeRecord(c))},   // unknown mechanism
		{"SCRAM-SHA-512/alice", string(EncodeRecord(c))}, // keys of the wrong size
		{"SCRAM-SHA-256/alice", `{"salt":"AA==","iterations":1}`},
		{"SCRAM-SHA-256/alice", `{`},
	} {
		if _, _, _, err := DecodeRecord(bad.name, []byte(bad.value)); err == nil || !strings.Contains(err.Error(), "SCRAM credential record") {
			t.Fatalf("DecodeRecord(%q, %q): %v", bad.name, bad.value, err)
		}
	}
}

func TestStoreSetReplaces(t *testing.T) {
	m, _ := ScramMechanismByName(SCRAMSHA512)
	c, _ := m.NewCredential("pw", 4096)
	st := NewStore(func([]byte) error { t.Fatal("Set persisted"); return nil })
	users := map[string]map[string]Credential{"a": {SCRAMSHA512: c}, "empty": {}}
	st.Set(users)
	delete(users["a"], SCRAMSHA512) // Set copied
	if _, ok := st.Lookup("a", SCRAMSHA512); !ok || len(st.Users()) != 1 {
		t.Fatalf("after Set: users %v", st.Users())
	}
	st.Set(nil)
	if len(st.Users()) != 0 {
		t.Fatalf("after Set(nil): users %v", st.Users())
	}
}

// FuzzDecodeRecord: any credential record decodes to a checked credential
// or an error, never a panic; what decodes re-encodes to the same one.
func FuzzDecodeRecord(f *testing.F) {
	m, _ := ScramMechanismByName(SCRAMSHA256)
	c, _ := m.NewCredential("x", 4096)
	f.Add("SCRAM-SHA-256/alice", EncodeRecord(c))
	f.Add("SCRAM-SHA-512/a/b", []byte(`{"salt":"AA==","iterations":4096}`))
	f.Add("nope", []byte(`{}`))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		user, m, c, err := DecodeRecord(name, data)
		if err != nil {
			return
		}
		if user == "" || RecordName(m.Name, user) != name || m.check(c) != nil {
			t.Fatalf("decoded %q as user %q, mechanism %s", name, user, m.Name)
		}
		u2, m2, c2, err := DecodeRecord(name, EncodeRecord(c))
		if err != nil || u2 != user || m2.Name != m.Name || string(c2.ServerKey) != string(c.ServerKey) || string(c2.Salt) != string(c.Salt) || c2.Iterations != c.Iterations {
			t.Fatalf("re-encoded record decodes differently: %v", err)
		}
	})
}
