package props

import "testing"

func TestParseJAAS(t *testing.T) {
	j, err := ParseJAAS(`org.apache.kafka.common.security.plain.PlainLoginModule required
   username="admin" password="a \"b\" = c;" user_alice=alice-secret;`)
	if err != nil {
		t.Fatal(err)
	}
	if j.LoginModule != "org.apache.kafka.common.security.plain.PlainLoginModule" || j.Flag != "required" {
		t.Errorf("module %q flag %q", j.LoginModule, j.Flag)
	}
	want := map[string]string{"username": "admin", "password": `a "b" = c;`, "user_alice": "alice-secret"}
	for k, v := range want {
		if j.Options[k] != v {
			t.Errorf("%s = %q, want %q", k, j.Options[k], v)
		}
	}
	if len(j.Keys) != 3 || j.Keys[2] != "user_alice" {
		t.Errorf("keys %v", j.Keys)
	}
	for _, bad := range []string{
		"", "Mod", "Mod required", "Mod never;", `Mod required a="x`, "Mod required a;", "Mod required a=1; Other required;",
	} {
		if _, err := ParseJAAS(bad); err == nil {
			t.Errorf("ParseJAAS(%q) accepted", bad)
		}
	}
}

func FuzzParseJAAS(f *testing.F) {
	f.Add(`org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";`)
	f.Add(`M optional a=b c="d\"e";`)
	f.Fuzz(func(t *testing.T, s string) {
		j, err := ParseJAAS(s)
		if err != nil {
			return
		}
		if j.LoginModule == "" || len(j.Keys) != len(j.Options) {
			t.Fatalf("inconsistent result %+v", j)
		}
	})
}
