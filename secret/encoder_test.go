package secret

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// fast keeps the tests quick: Kafka's minimum iteration count.
func fast(secret, old string) Config {
	return Config{Secret: secret, OldSecret: old, Iterations: MinIterations}
}

func mustNew(t *testing.T, c Config) *Encoder {
	t.Helper()
	e, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, c := range []Config{
		fast("s3cret", ""),
		{Secret: "s3cret", Iterations: MinIterations, CipherAlgorithm: cipherGCM},
		{Secret: "s3cret", Iterations: MinIterations, KeyLength: 256, KeyFactoryAlgorithm: "PBKDF2WithHmacSHA1"},
		{Secret: "s3cret", Iterations: MinIterations, KeyLength: 192, KeyFactoryAlgorithm: "PBKDF2WithHmacSHA256"},
	} {
		e := mustNew(t, c)
		for _, v := range []string{"", "p", "exactly16bytes!!", `org.apache.kafka.common.security.scram.ScramLoginModule required username="m" password="pä𝄞";`} {
			enc, err := e.Encode(v)
			if err != nil {
				t.Fatal(err)
			}
			if len(v) > 4 && strings.Contains(enc, v) {
				t.Fatalf("encoded value holds the clear one: %s", enc)
			}
			got, err := e.Decode(enc)
			if err != nil || got != v {
				t.Fatalf("%+v: Decode(Encode(%q)) = %q, %v", c, v, got, err)
			}
		}
	}
}

func TestEncodeFreshSaltAndIV(t *testing.T) {
	e := mustNew(t, fast("s", ""))
	a, _ := e.Encode("same")
	b, _ := e.Encode("same")
	fa, _ := Parse(a)
	fb, _ := Parse(b)
	if string(fa.Salt) == string(fb.Salt) || string(fa.IV) == string(fb.IV) || string(fa.Encrypted) == string(fb.Encrypted) {
		t.Fatal("two encodings of one value share salt, IV or ciphertext")
	}
}

// TestFormatFields checks the stored form field by field against what
// Kafka's EncryptingPasswordEncoder writes with its defaults.
func TestFormatFields(t *testing.T) {
	e := mustNew(t, Config{Secret: "s"})
	enc, err := e.Encode("pässword") // 8 UTF-16 units, 9 UTF-8 bytes
	if err != nil {
		t.Fatal(err)
	}
	m, err := parseMap(enc)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"keyFactoryAlgorithm": "PBKDF2WithHmacSHA512",
		"cipherAlgorithm":     "AES/CBC/PKCS5Padding",
		"keyLength":           "128",
		"iterations":          "4096",
		"passwordLength":      "8",
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %q, want %q", k, m[k], v)
		}
	}
	if len(m) != 8 {
		t.Errorf("%d fields, want 8: %v", len(m), m)
	}
	for k, n := range map[string]int{"salt": 256, "initializationVector": 16, "encryptedPassword": 16} {
		b, err := base64.StdEncoding.DecodeString(m[k])
		if err != nil || len(b) != n {
			t.Errorf("%s: %d bytes (%v), want %d", k, len(b), err, n)
		}
	}
	g := mustNew(t, Config{Secret: "s", CipherAlgorithm: cipherGCM, Iterations: MinIterations})
	enc, _ = g.Encode("x")
	f, err := Parse(enc)
	if err != nil || f.TagLength != 128 || len(f.IV) != 12 || len(f.Encrypted) != 1+16 {
		t.Fatalf("GCM fields %+v, %v", f, err)
	}
}

func TestDecodeWrongSecret(t *testing.T) {
	enc, _ := mustNew(t, fast("right", "")).Encode("hunter2-clear")
	for _, c := range []Config{fast("wrong", ""), fast("wrong", "also-wrong")} {
		if v, err := mustNew(t, c).Decode(enc); !errors.Is(err, ErrWrongSecret) {
			t.Fatalf("decoded with a wrong secret: %q, %v", v, err)
		}
	}
	genc, _ := mustNew(t, Config{Secret: "right", CipherAlgorithm: cipherGCM, Iterations: MinIterations}).Encode("x")
	if _, err := mustNew(t, fast("wrong", "")).Decode(genc); !errors.Is(err, ErrWrongSecret) {
		t.Fatalf("GCM decoded with a wrong secret: %v", err)
	}
	if _, err := mustNew(t, fast("wrong", "")).Decode(enc); strings.Contains(err.Error(), "hunter2") {
		t.Fatal("the error holds the clear value")
	}
}

func TestOldSecretRotation(t *testing.T) {
	oldEnc, _ := mustNew(t, fast("old", "")).Encode("pw")
	rot := mustNew(t, fast("new", "old"))
	if !rot.Rotating() {
		t.Fatal("not rotating")
	}
	if v, err := rot.Decode(oldEnc); err != nil || v != "pw" {
		t.Fatalf("old value under rotation: %q, %v", v, err)
	}
	re, changed, err := rot.Reencode(oldEnc)
	if err != nil || !changed || re == oldEnc {
		t.Fatalf("Reencode: changed %v, %v", changed, err)
	}
	// The re-encoded value needs only the new secret.
	if v, err := mustNew(t, fast("new", "")).Decode(re); err != nil || v != "pw" {
		t.Fatalf("re-encoded value with the new secret: %q, %v", v, err)
	}
	if _, err := mustNew(t, fast("new", "")).Decode(oldEnc); !errors.Is(err, ErrWrongSecret) {
		t.Fatalf("old value without the old secret: %v", err)
	}
	// A value already under the new secret is left as it is.
	if same, changed, err := rot.Reencode(re); err != nil || changed || same != re {
		t.Fatalf("Reencode of a current value: changed %v, %v", changed, err)
	}
}

func TestNewRefusesBadSettings(t *testing.T) {
	for _, c := range []Config{
		{},
		{Secret: "s", Iterations: 1023},
		{Secret: "s", KeyLength: 64},
		{Secret: "s", CipherAlgorithm: "AES"},
		{Secret: "s", KeyFactoryAlgorithm: "PBKDF2WithHmacMD5"},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
}

// TestParseLikeKafka reads the stored form as Kafka's Csv.parseCsvMap
// does: any order, white space around commas, the last colon splits.
func TestParseLikeKafka(t *testing.T) {
	e := mustNew(t, fast("s", ""))
	enc, _ := e.Encode("pw")
	parts := strings.Split(enc, ",")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	shuffled := strings.Join(parts, " ,  ") + ", extra:ignored,"
	if v, err := e.Decode(shuffled); err != nil || v != "pw" {
		t.Fatalf("reordered value: %q, %v", v, err)
	}
	noFactory := strings.Replace(enc, "keyFactoryAlgorithm:PBKDF2WithHmacSHA512,", "", 1)
	if v, err := e.Decode(noFactory); err != nil || v != "pw" {
		t.Fatalf("without keyFactoryAlgorithm (Kafka's default): %q, %v", v, err)
	}
	for _, bad := range []string{"", "nocolon", strings.Replace(enc, "iterations:1024", "iterations:x", 1),
		strings.Replace(enc, "cipherAlgorithm:AES/CBC/PKCS5Padding", "cipherAlgorithm:DES", 1)} {
		if _, err := e.Decode(bad); !errors.Is(err, ErrFormat) {
			t.Errorf("Decode(%.40q) = %v, want ErrFormat", bad, err)
		}
	}
}

// TestDecodeKafkaVector decodes a value Kafka 4.4's EncryptingPasswordEncoder
// wrote (secret "verbatim-test-secret", defaults; see
// testdata/kafka-encoded.txt for how it was made).
func TestDecodeKafkaVector(t *testing.T) {
	for _, tc := range kafkaVectors {
		e := mustNew(t, Config{Secret: tc.secret})
		if v, err := e.Decode(tc.encoded); err != nil || v != tc.clear {
			t.Fatalf("%s: %q, %v; want %q", tc.name, v, err, tc.clear)
		}
	}
}
