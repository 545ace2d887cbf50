// Package props reads Java .properties files, the format of Kafka's
// server.properties and client.properties: `key=value`, `key: value` or
// `key value` lines, `#` and `!` comments, backslash line continuations
// and escapes (\t, \n, \r, \f, \u and four hex digits, a backslash before any other
// character meaning that character), as java.util.Properties.load does.
// The bytes are read as UTF-8 (Java reads an InputStream as ISO-8859-1;
// the two agree on ASCII, which is all Kafka property names use).
//
// It owns only the syntax: which names exist and what values mean belong
// to the callers (the broker's configuration, the client configurations
// of the mirroring tools). It keeps where each key was defined so callers
// can name the line in their messages, and must not import anything
// outside the standard library.
package props
