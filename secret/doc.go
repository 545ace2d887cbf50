// Package secret encodes passwords at rest the way Kafka's broker encodes
// its dynamically configured passwords (password.encoder.secret, Kafka's
// EncryptingPasswordEncoder), so that what Verbatim stores is what Kafka
// would store and either side can read the other's values.
//
// The scheme: a key is derived from the broker's secret with PBKDF2
// (password.encoder.keyfactory.algorithm, default PBKDF2WithHmacSHA512;
// a fresh random 256-byte salt per value; password.encoder.iterations,
// default 4096; password.encoder.key.length bits, default 128) and the
// value's UTF-8 bytes are encrypted with password.encoder.cipher.algorithm
// (default AES/CBC/PKCS5Padding with a fresh random IV; AES/GCM/NoPadding
// is also read and written). The stored form is Kafka's comma-separated
// map: keyFactoryAlgorithm, cipherAlgorithm, keyLength, salt, iterations,
// encryptedPassword, passwordLength (the value's length in UTF-16 code
// units, as Java counts it) and initializationVector (GCM adds
// authenticationTagLength), binary fields in standard base64. Parse reads
// that form in any field order, as Kafka's Csv.parseCsvMap does.
//
// Rotation: an Encoder built with an old secret (password.encoder.old.secret)
// decodes with the current secret first and then with the old one;
// Reencode turns a value encoded with either into one encoded with the
// current secret, which the owner of the stored values writes back. CBC
// carries no authentication: a wrong secret is detected by the padding,
// the UTF-8 check and the recorded length, as in Kafka, which leaves a
// small chance (well under one in ten thousand) of taking a wrong secret
// for the right one. GCM values are authenticated.
//
// It also knows which Kafka client properties hold secrets (IsSecretName:
// the PASSWORD-typed client configs) and the mask they are shown with
// (Hidden), and seals, opens and masks a property map with them
// (SealConfig, OpenConfig, MaskConfig).
//
// It owns only the encoding: it must not do I/O, log, import anything
// outside the standard library, or put a clear value into an error.
package secret
