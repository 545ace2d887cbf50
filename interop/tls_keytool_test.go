package interop

import (
	"context"
	"crypto/tls"
	"net"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/verbatim-kafka/verbatim/props"
	"github.com/verbatim-kafka/verbatim/tlsconf"
)

// keytool runs the JDK's keytool (the tool Kafka's documentation uses to
// make keystores).
func keytool(t *testing.T, args ...string) {
	t.Helper()
	kt, err := exec.LookPath("keytool")
	if err != nil {
		missingPeer(t, "keytool (JDK 17+)", err)
	}
	if res, err := runTool(t, Cmd{Timeout: time.Minute}, append([]string{kt}, args...)); err != nil {
		t.Fatalf("keytool %v: %v\n%s", args, err, res.Stderr)
	}
}

// TestKeytoolStores: PKCS12 and JKS keystores and truststores made by
// keytool, as an operator following Kafka's documentation makes them, load
// in tlsconf on both sides of a handshake.
func TestKeytoolStores(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	for _, typ := range []string{"PKCS12", "JKS"} {
		keytool(t, "-genkeypair", "-alias", "broker", "-keyalg", "EC", "-groupname", "secp256r1",
			"-dname", "CN=localhost,OU=broker,O=Verbatim tests", "-ext", "SAN=ip:127.0.0.1,dns:localhost", "-validity", "2",
			"-keystore", p("broker."+typ), "-storetype", typ, "-storepass", "store-secret", "-keypass", "store-secret")
	}
	keytool(t, "-exportcert", "-rfc", "-alias", "broker", "-keystore", p("broker.PKCS12"), "-storetype", "PKCS12",
		"-storepass", "store-secret", "-file", p("broker.pem"))
	keytool(t, "-exportcert", "-rfc", "-alias", "broker", "-keystore", p("broker.JKS"), "-storetype", "JKS",
		"-storepass", "store-secret", "-file", p("broker-jks.pem"))
	for _, typ := range []string{"PKCS12", "JKS"} {
		for _, cert := range []string{"broker.pem", "broker-jks.pem"} {
			keytool(t, "-importcert", "-noprompt", "-alias", cert, "-file", p(cert),
				"-keystore", p("trust."+typ), "-storetype", typ, "-storepass", "trust-secret")
		}
	}
	for _, ks := range []string{"PKCS12", "JKS"} {
		for _, ts := range []string{"PKCS12", "JKS"} {
			sp := props.New()
			sp.Set("ssl.keystore.type", ks)
			sp.Set("ssl.keystore.location", p("broker."+ks))
			sp.Set("ssl.keystore.password", "store-secret")
			sp.Set("ssl.key.password", "store-secret")
			srv, err := tlsconf.ServerConfig(sp)
			if err != nil {
				t.Fatalf("%s keystore: %v", ks, err)
			}
			cp := props.New()
			cp.Set("security.protocol", "SSL")
			cp.Set("ssl.truststore.type", ts)
			cp.Set("ssl.truststore.location", p("trust."+ts))
			cp.Set("ssl.truststore.password", "trust-secret")
			cli, err := tlsconf.ClientConfig(cp)
			if err != nil {
				t.Fatalf("%s truststore: %v", ts, err)
			}
			cli.ServerName = "localhost"
			if err := loopbackHandshake(srv, cli); err != nil {
				t.Fatalf("%s keystore, %s truststore: %v", ks, ts, err)
			}
		}
	}
}

func loopbackHandshake(srv, cli *tls.Config) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	errc := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			errc <- err
			return
		}
		defer c.Close()
		errc <- tls.Server(c, srv).HandshakeContext(context.Background())
	}()
	d := tls.Dialer{Config: cli, NetDialer: &net.Dialer{Timeout: 10 * time.Second}}
	c, err := d.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		return err
	}
	c.Close()
	return <-errc
}
