package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
	"io"
	"unicode/utf16"
	"unicode/utf8"
)

// Kafka's defaults (PasswordEncoderConfigs).
const (
	DefaultKeyFactoryAlgorithm = "PBKDF2WithHmacSHA512"
	DefaultCipherAlgorithm     = "AES/CBC/PKCS5Padding"
	DefaultKeyLength           = 128
	DefaultIterations          = 4096
	// MinIterations is Kafka's lower bound of password.encoder.iterations.
	MinIterations = 1024
)

const (
	cipherCBC = "AES/CBC/PKCS5Padding"
	cipherGCM = "AES/GCM/NoPadding"
	// saltBytes is the salt length Kafka draws per value.
	saltBytes = 256
	// gcmIVBytes and gcmTagBits are what Java's AES/GCM cipher picks when
	// initialised without parameters.
	gcmIVBytes = 12
	gcmTagBits = 128
)

// ErrWrongSecret: the value does not decode with the secrets given (a
// wrong or rotated-away secret, or a corrupt value).
var ErrWrongSecret = errors.New("secret: the password could not be decoded (wrong password.encoder.secret, or password.encoder.old.secret missing after a rotation)")

// Config is the broker's password.encoder.* settings; the zero values of
// the algorithm, length and iteration fields are Kafka's defaults.
type Config struct {
	Secret, OldSecret   string
	KeyFactoryAlgorithm string
	CipherAlgorithm     string
	KeyLength           int
	Iterations          int
}

// Encoder encodes and decodes values with a broker's secret.
type Encoder struct {
	cfg Config
	// Rand is the source of salts and IVs (crypto/rand when nil).
	Rand io.Reader
}

// New checks cfg and returns its Encoder. cfg.Secret must be set (a
// broker without password.encoder.secret has no Encoder).
func New(cfg Config) (*Encoder, error) {
	if cfg.Secret == "" {
		return nil, errors.New("secret: password.encoder.secret is empty")
	}
	if cfg.KeyFactoryAlgorithm == "" {
		cfg.KeyFactoryAlgorithm = DefaultKeyFactoryAlgorithm
	}
	if cfg.CipherAlgorithm == "" {
		cfg.CipherAlgorithm = DefaultCipherAlgorithm
	}
	if cfg.KeyLength == 0 {
		cfg.KeyLength = DefaultKeyLength
	}
	if cfg.Iterations == 0 {
		cfg.Iterations = DefaultIterations
	}
	if _, err := prf(cfg.KeyFactoryAlgorithm); err != nil {
		return nil, fmt.Errorf("password.encoder.keyfactory.algorithm: %w", err)
	}
	if cfg.CipherAlgorithm != cipherCBC && cfg.CipherAlgorithm != cipherGCM {
		return nil, fmt.Errorf("password.encoder.cipher.algorithm: %q is not supported (%s or %s)", cfg.CipherAlgorithm, cipherCBC, cipherGCM)
	}
	if err := checkKeyLength(cfg.KeyLength); err != nil {
		return nil, fmt.Errorf("password.encoder.key.length: %w", err)
	}
	if cfg.Iterations < MinIterations || cfg.Iterations > MaxIterations {
		return nil, fmt.Errorf("password.encoder.iterations: %d is not in [%d, %d]", cfg.Iterations, MinIterations, MaxIterations)
	}
	return &Encoder{cfg: cfg}, nil
}

// Rotating reports whether an old secret is configured (values encoded
// with it are to be re-encoded).
func (e *Encoder) Rotating() bool { return e.cfg.OldSecret != "" }

func checkKeyLength(bits int) error {
	switch bits {
	case 128, 192, 256:
		return nil
	}
	return fmt.Errorf("%d bits is not an AES key length (128, 192 or 256)", bits)
}

// prf returns the HMAC hash of a Java PBKDF2 SecretKeyFactory name.
func prf(alg string) (func() hash.Hash, error) {
	switch alg {
	case "PBKDF2WithHmacSHA512":
		return sha512.New, nil
	case "PBKDF2WithHmacSHA384":
		return sha512.New384, nil
	case "PBKDF2WithHmacSHA256":
		return sha256.New, nil
	case "PBKDF2WithHmacSHA224":
		return sha256.New224, nil
	case "PBKDF2WithHmacSHA1":
		return sha1.New, nil
	}
	return nil, fmt.Errorf("%q is not supported (PBKDF2WithHmacSHA512, SHA384, SHA256, SHA224 or SHA1)", alg)
}

// javaLength is s's length as Java's String.length counts it.
func javaLength(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

func (e *Encoder) random(b []byte) error {
	r := e.Rand
	if r == nil {
		r = rand.Reader
	}
	_, err := io.ReadFull(r, b)
	return err
}

// Encode encrypts value with the current secret and returns Kafka's
// stored form.
func (e *Encoder) Encode(value string) (string, error) {
	f := Fields{
		KeyFactoryAlgorithm: e.cfg.KeyFactoryAlgorithm,
		CipherAlgorithm:     e.cfg.CipherAlgorithm,
		KeyLength:           e.cfg.KeyLength,
		Iterations:          e.cfg.Iterations,
		Salt:                make([]byte, saltBytes),
		PasswordLength:      javaLength(value),
	}
	if err := e.random(f.Salt); err != nil {
		return "", fmt.Errorf("secret: salt: %w", err)
	}
	if f.CipherAlgorithm == cipherGCM {
		f.IV, f.TagLength = make([]byte, gcmIVBytes), gcmTagBits
	} else {
		f.IV = make([]byte, aes.BlockSize)
	}
	if err := e.random(f.IV); err != nil {
		return "", fmt.Errorf("secret: iv: %w", err)
	}
	block, err := deriveBlock(e.cfg.Secret, f)
	if err != nil {
		return "", err
	}
	if f.CipherAlgorithm == cipherGCM {
		aead, err := cipher.NewGCMWithNonceSize(block, len(f.IV))
		if err != nil {
			return "", fmt.Errorf("secret: %w", err)
		}
		f.Encrypted = aead.Seal(nil, f.IV, []byte(value), nil)
	} else {
		f.Encrypted = pad([]byte(value))
		cipher.NewCBCEncrypter(block, f.IV).CryptBlocks(f.Encrypted, f.Encrypted)
	}
	return f.String(), nil
}

// deriveBlock is the AES block cipher of the key PBKDF2 derives from
// secret with f's algorithm, salt, iterations and length.
func deriveBlock(secret string, f Fields) (cipher.Block, error) {
	h, err := prf(f.KeyFactoryAlgorithm)
	if err != nil {
		return nil, fmt.Errorf("%w: keyFactoryAlgorithm %v", ErrFormat, err)
	}
	if err := checkKeyLength(f.KeyLength); err != nil {
		return nil, fmt.Errorf("%w: keyLength %v", ErrFormat, err)
	}
	key, err := pbkdf2.Key(h, secret, f.Salt, f.Iterations, f.KeyLength/8)
	if err != nil {
		return nil, fmt.Errorf("secret: pbkdf2: %w", err)
	}
	return aes.NewCipher(key)
}

// pad is PKCS#5/7 padding to the AES block size (always at least one
// byte, as Java's PKCS5Padding).
func pad(b []byte) []byte {
	n := aes.BlockSize - len(b)%aes.BlockSize
	out := make([]byte, len(b)+n)
	copy(out, b)
	for i := len(b); i < len(out); i++ {
		out[i] = byte(n)
	}
	return out
}

// unpad removes PKCS#5/7 padding; ok is false when it is not valid.
func unpad(b []byte) ([]byte, bool) {
	if len(b) == 0 || len(b)%aes.BlockSize != 0 {
		return nil, false
	}
	n := int(b[len(b)-1])
	if n == 0 || n > aes.BlockSize {
		return nil, false
	}
	for _, c := range b[len(b)-n:] {
		if int(c) != n {
			return nil, false
		}
	}
	return b[:len(b)-n], true
}

// Decode returns the clear value of an encoded one: with the current
// secret, else (while rotating) with the old one. The algorithms are the
// value's own, as in Kafka, so values encoded under other settings stay
// readable. Errors wrap ErrFormat (not an encoded value, or one naming
// algorithms Verbatim does not implement) or are ErrWrongSecret.
func (e *Encoder) Decode(encoded string) (string, error) {
	v, _, err := e.decode(encoded)
	return v, err
}

// Reencode returns encoded as the current secret encodes it: unchanged
// (changed false) when the current secret decodes it, else decoded with
// the old secret and encoded anew.
func (e *Encoder) Reencode(encoded string) (out string, changed bool, err error) {
	v, old, err := e.decode(encoded)
	if err != nil {
		return "", false, err
	}
	if !old {
		return encoded, false, nil
	}
	out, err = e.Encode(v)
	return out, err == nil, err
}

// decode decodes encoded; old reports that the old secret did.
func (e *Encoder) decode(encoded string) (v string, old bool, err error) {
	f, err := Parse(encoded)
	if err != nil {
		return "", false, err
	}
	if v, err = decodeWith(e.cfg.Secret, f); err == nil || e.cfg.OldSecret == "" || !errors.Is(err, ErrWrongSecret) {
		return v, false, err
	}
	v, err = decodeWith(e.cfg.OldSecret, f)
	return v, err == nil, err
}

// decodeWith decrypts f with secret and checks the result as Kafka does
// (the recorded length) and as a Java string must be (UTF-8).
func decodeWith(secret string, f Fields) (string, error) {
	block, err := deriveBlock(secret, f)
	if err != nil {
		return "", err
	}
	var clear []byte
	switch f.CipherAlgorithm {
	case cipherCBC:
		if len(f.IV) != aes.BlockSize || len(f.Encrypted) == 0 || len(f.Encrypted)%aes.BlockSize != 0 {
			return "", fmt.Errorf("%w: initializationVector or encryptedPassword has the wrong length for %s", ErrFormat, cipherCBC)
		}
		buf := append([]byte(nil), f.Encrypted...)
		cipher.NewCBCDecrypter(block, f.IV).CryptBlocks(buf, buf)
		var ok bool
		if clear, ok = unpad(buf); !ok {
			return "", ErrWrongSecret
		}
	case cipherGCM:
		if f.TagLength%8 != 0 || f.TagLength/8 < 12 || f.TagLength/8 > 16 || len(f.IV) == 0 {
			return "", fmt.Errorf("%w: authenticationTagLength or initializationVector not usable for %s", ErrFormat, cipherGCM)
		}
		aead, err := gcm(block, len(f.IV), f.TagLength/8)
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrFormat, err)
		}
		if clear, err = aead.Open(nil, f.IV, f.Encrypted, nil); err != nil {
			return "", ErrWrongSecret
		}
	default:
		return "", fmt.Errorf("%w: cipherAlgorithm %q is not supported (%s or %s)", ErrFormat, f.CipherAlgorithm, cipherCBC, cipherGCM)
	}
	if !utf8.Valid(clear) || javaLength(string(clear)) != f.PasswordLength {
		return "", ErrWrongSecret
	}
	return string(clear), nil
}

// gcm is AES-GCM with a nonce and tag size of Java's choosing (Go's
// constructors take one non-default size at a time).
func gcm(block cipher.Block, nonce, tag int) (cipher.AEAD, error) {
	switch {
	case tag == 16:
		return cipher.NewGCMWithNonceSize(block, nonce)
	case nonce == gcmIVBytes:
		return cipher.NewGCMWithTagSize(block, tag)
	}
	return nil, fmt.Errorf("a %d-byte GCM nonce with a %d-byte tag is not supported", nonce, tag)
}
