// Package tlsconf builds the server and client *tls.Config of a listener
// or of a client of another cluster from Kafka's ssl.* properties, with
// Kafka's names and defaults: keystores and truststores of type PEM
// (files, or the inline ssl.keystore.certificate.chain, ssl.keystore.key
// and ssl.truststore.certificates of KIP-651), PKCS12 (read with
// software.sslmate.com/src/go-pkcs12) and JKS (read with
// github.com/pavlo-v-chernykh/keystore-go/v4); ssl.client.auth,
// ssl.enabled.protocols and ssl.protocol (TLS 1.2 and 1.3 only),
// ssl.cipher.suites, ssl.endpoint.identification.algorithm, and
// ssl.principal.mapping.rules (Kafka's SslPrincipalMapper) turning a
// verified client certificate's RFC 2253 subject into a principal.
//
// A server configuration reloads its keystore and truststore files when
// they change, without a restart: handshakes check the files at most
// about once a second (size and modification time, then a content hash),
// new handshakes get the new certificate, and a file that fails to load
// keeps the previous material and is logged once.
//
// It owns only the translation of properties into crypto/tls settings.
// The caller resolves listener prefixes (listener.name.<l>.ssl.*) and the
// client properties' prefixes before handing the properties over; this
// package must not import the broker, listen or dial, and never puts a
// password or key material into an error or a log line.
package tlsconf
