// Package logbuf is the log sink that tests hand to code logging from
// several goroutines (a broker, a controller, TLS handshakes) and then read.
// It imports only the standard library, so the tests of any package may use
// it, those testkit cannot serve because testkit imports the broker.
package logbuf
