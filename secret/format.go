package secret

import (
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The field names of Kafka's encoded password map (Kafka's PasswordEncoder
// and its cipher parameter encoders).
const (
	fieldKeyFactory = "keyFactoryAlgorithm"
	fieldCipher     = "cipherAlgorithm"
	fieldIV         = "initializationVector"
	fieldKeyLength  = "keyLength"
	fieldSalt       = "salt"
	fieldIterations = "iterations"
	fieldEncrypted  = "encryptedPassword"
	fieldPassLength = "passwordLength"
	fieldTagLength  = "authenticationTagLength"
)

// Bounds on what Parse accepts. Kafka checks none of them when it reads a
// value; they keep a corrupt or hostile stored value from costing minutes
// of PBKDF2 or gigabytes of memory.
const (
	// MaxIterations bounds the PBKDF2 iteration count of a value.
	MaxIterations = 1 << 22
	// maxEncoded bounds the length of an encoded value.
	maxEncoded = 1 << 20
)

// ErrFormat is wrapped by every error of Parse: the value is not Kafka's
// encoded password map.
var ErrFormat = errors.New("secret: not an encoded password")

// Fields is one encoded value, field by field.
type Fields struct {
	// KeyFactoryAlgorithm is Java's SecretKeyFactory name
	// (PBKDF2WithHmacSHA512, ...).
	KeyFactoryAlgorithm string
	// CipherAlgorithm is Java's Cipher transformation
	// (AES/CBC/PKCS5Padding or AES/GCM/NoPadding).
	CipherAlgorithm string
	// KeyLength is the derived key's length in bits.
	KeyLength  int
	Iterations int
	Salt       []byte
	// IV is the initialization vector (CBC) or nonce (GCM).
	IV []byte
	// TagLength is GCM's authentication tag length in bits (0 for CBC).
	TagLength int
	Encrypted []byte
	// PasswordLength is the clear value's length in UTF-16 code units.
	PasswordLength int
}

// String is the value in Kafka's stored form: key:value pairs joined by
// commas, binary fields in standard base64.
func (f Fields) String() string {
	b64 := base64.StdEncoding.EncodeToString
	parts := []string{
		fieldKeyFactory + ":" + f.KeyFactoryAlgorithm,
		fieldCipher + ":" + f.CipherAlgorithm,
		fieldKeyLength + ":" + strconv.Itoa(f.KeyLength),
		fieldSalt + ":" + b64(f.Salt),
		fieldIterations + ":" + strconv.Itoa(f.Iterations),
		fieldEncrypted + ":" + b64(f.Encrypted),
		fieldPassLength + ":" + strconv.Itoa(f.PasswordLength),
		fieldIV + ":" + b64(f.IV),
	}
	if f.TagLength != 0 {
		parts = append(parts, fieldTagLength+":"+strconv.Itoa(f.TagLength))
	}
	return strings.Join(parts, ",")
}

// csvSep is Kafka's separator of map entries: a comma with any white space
// around it.
var csvSep = regexp.MustCompile(`\s*,\s*`)

// parseMap splits s as Kafka's Csv.parseCsvMap does: entries separated by
// commas (white space around them ignored), each split at its last colon,
// key and value trimmed; a later entry replaces an earlier one of the same
// key; trailing empty entries are dropped, as Java's String.split drops
// them. An entry without a colon, which Kafka fails on, is an error.
func parseMap(s string) (map[string]string, error) {
	m := map[string]string{}
	if s == "" {
		return m, nil
	}
	entries := csvSep.Split(s, -1)
	for len(entries) > 0 && entries[len(entries)-1] == "" {
		entries = entries[:len(entries)-1]
	}
	for i, e := range entries {
		c := strings.LastIndexByte(e, ':')
		if c < 0 {
			return nil, fmt.Errorf("%w: entry %d has no ':'", ErrFormat, i+1)
		}
		m[strings.TrimSpace(e[:c])] = strings.TrimSpace(e[c+1:])
	}
	return m, nil
}

// Parse reads a value in Kafka's stored form. Field order does not matter
// and unknown fields are ignored, as in Kafka; a missing
// keyFactoryAlgorithm is Kafka's default, PBKDF2WithHmacSHA512. Parse
// checks the form and the bounds, not the algorithms (Decode does).
func Parse(encoded string) (Fields, error) {
	var f Fields
	if len(encoded) > maxEncoded {
		return f, fmt.Errorf("%w: %d bytes, more than %d", ErrFormat, len(encoded), maxEncoded)
	}
	m, err := parseMap(encoded)
	if err != nil {
		return f, err
	}
	need := func(k string) (string, error) {
		v, ok := m[k]
		if !ok {
			return "", fmt.Errorf("%w: no %s", ErrFormat, k)
		}
		return v, nil
	}
	num := func(k string, lo, hi int) (int, error) {
		v, err := need(k)
		if err != nil {
			return 0, err
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return 0, fmt.Errorf("%w: %s is not a number in [%d, %d]", ErrFormat, k, lo, hi)
		}
		return n, nil
	}
	bin := func(k string) ([]byte, error) {
		v, err := need(k)
		if err != nil {
			return nil, err
		}
		b, err := decodeBase64(v)
		if err != nil {
			return nil, fmt.Errorf("%w: %s is not base64", ErrFormat, k)
		}
		return b, nil
	}
	f.KeyFactoryAlgorithm = m[fieldKeyFactory]
	if f.KeyFactoryAlgorithm == "" {
		f.KeyFactoryAlgorithm = DefaultKeyFactoryAlgorithm
	}
	if f.CipherAlgorithm, err = need(fieldCipher); err != nil {
		return f, err
	}
	if f.KeyLength, err = num(fieldKeyLength, 8, 1024); err != nil {
		return f, err
	}
	if f.Iterations, err = num(fieldIterations, 1, MaxIterations); err != nil {
		return f, err
	}
	if f.PasswordLength, err = num(fieldPassLength, 0, maxEncoded); err != nil {
		return f, err
	}
	if f.Salt, err = bin(fieldSalt); err != nil {
		return f, err
	}
	if f.IV, err = bin(fieldIV); err != nil {
		return f, err
	}
	if f.Encrypted, err = bin(fieldEncrypted); err != nil {
		return f, err
	}
	if _, ok := m[fieldTagLength]; ok {
		if f.TagLength, err = num(fieldTagLength, 1, 1024); err != nil {
			return f, err
		}
	}
	return f, nil
}

// decodeBase64 reads standard base64 with or without padding, as Java's
// Base64 decoder does.
func decodeBase64(s string) ([]byte, error) {
	if strings.HasSuffix(s, "=") {
		return base64.StdEncoding.DecodeString(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}
