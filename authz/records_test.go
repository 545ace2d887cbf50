package authz

import (
	"strings"
	"testing"
)

func TestRecordRoundTripAndName(t *testing.T) {
	b := Binding{ResourceType: ResourceTopic, Name: "logs/eu", Pattern: PatternPrefixed, Principal: "User:alice", Host: "*", Operation: OpRead, Permission: PermAllow}
	got, err := DecodeRecord(EncodeRecord(b))
	if err != nil || got != b {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if RecordName(b) != RecordName(got) || len(RecordName(b)) != 64 {
		t.Fatalf("record name %q", RecordName(b))
	}
	other := b
	other.Permission = PermDeny
	if RecordName(other) == RecordName(b) {
		t.Fatal("two bindings share a record name")
	}
	for _, bad := range []string{`{`, `{"resource_type":2,"name":"","pattern_type":3,"principal":"User:a","host":"*","operation":3,"permission":3}`, `[]`} {
		if _, err := DecodeRecord([]byte(bad)); err == nil || !strings.HasPrefix(err.Error(), "authz: ACL record") {
			t.Fatalf("DecodeRecord(%s): %v", bad, err)
		}
	}
}

func TestSetReplacesTheSet(t *testing.T) {
	a := New(Config{})
	read := Binding{ResourceType: ResourceTopic, Name: "t", Pattern: PatternLiteral, Principal: "User:a", Host: "*", Operation: OpRead, Permission: PermAllow}
	write := read
	write.Operation = OpWrite
	if err := a.Set([]Binding{read, read, write}); err != nil {
		t.Fatal(err)
	}
	if a.Len() != 2 || !a.Authorize("User:a", "h", OpWrite, ResourceTopic, "t", false) {
		t.Fatalf("after Set: %d ACLs", a.Len())
	}
	if err := a.Set([]Binding{read}); err != nil {
		t.Fatal(err)
	}
	if a.Len() != 1 || a.Authorize("User:a", "h", OpWrite, ResourceTopic, "t", false) || !a.Authorize("User:a", "h", OpRead, ResourceTopic, "t", false) {
		t.Fatal("Set did not replace the set")
	}
	bad := read
	bad.Principal = "alice"
	if err := a.Set([]Binding{write, bad}); err == nil || a.Len() != 1 {
		t.Fatalf("Set with an invalid binding: %v, %d ACLs", err, a.Len())
	}
}

// FuzzDecodeRecord: any record value decodes to a valid binding or an
// error, never a panic; what decodes re-encodes to the same binding and
// the same record name.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(EncodeRecord(Binding{ResourceType: ResourceCluster, Name: ClusterName, Pattern: PatternLiteral, Principal: "User:*", Host: "*", Operation: OpAlter, Permission: PermDeny}))
	f.Add([]byte(`{"resource_type":2,"name":"a","pattern_type":4,"principal":"User:x","host":"1.2.3.4","operation":2,"permission":3}`))
	f.Add([]byte(`{"resource_type":99}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := DecodeRecord(data)
		if err != nil {
			return
		}
		if err := b.Validate(); err != nil {
			t.Fatalf("decoded an invalid binding %s: %v", b, err)
		}
		again, err := DecodeRecord(EncodeRecord(b))
		if err != nil || again != b || RecordName(again) != RecordName(b) {
			t.Fatalf("re-encoded %+v decodes to %+v (%v)", b, again, err)
		}
	})
}
