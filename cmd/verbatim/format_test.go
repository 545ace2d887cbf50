package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/verbatim-kafka/verbatim/authn"
	"github.com/verbatim-kafka/verbatim/broker"
	"github.com/verbatim-kafka/verbatim/internal/testkit"
)

func TestFormatAddScram(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	m, _ := authn.ScramMechanismByName(authn.SCRAMSHA256)
	salt := []byte("0123456789abcdef0123")
	sp, err := m.SaltedPassword("bob-secret", salt, 8192)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString
	var out, errb bytes.Buffer
	code := formatMain([]string{"--data-dir", dir, "--cluster-id", "abcdefghijklmnopqrstuv",
		"--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]",
		"--add-scram", "SCRAM-SHA-256=[name=bob,salt=" + b64(salt) + ",saltedpassword=" + b64(sp) + ",iterations=8192]",
	}, &out, &errb)
	if code != 0 {
		t.Fatalf("format: exit %d: %s", code, errb.String())
	}
	data, err := os.ReadFile(filepath.Join(dir, "verbatim-meta", "scram-credentials.json"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("admin-secret")) || bytes.Contains(data, []byte(b64(sp))) {
		t.Fatal("the credential file holds a password or salted password")
	}

	// Formatted again: refused (1), or ignored (0) with --ignore-formatted.
	if code := formatMain([]string{"--data-dir", dir, "--add-scram", "SCRAM-SHA-512=[name=x,password=y]"}, io.Discard, io.Discard); code != 1 {
		t.Fatalf("second format: exit %d, want 1", code)
	}
	if code := formatMain([]string{"--data-dir", dir, "--ignore-formatted"}, io.Discard, io.Discard); code != 0 {
		t.Fatalf("--ignore-formatted: exit %d", code)
	}

	// A broker on the data dir has the cluster id and both users.
	zero := time.Duration(0)
	srv, err := broker.Open(broker.Config{DataDir: dir, NodeID: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		SASL: map[string]*broker.SASLListenerConfig{"": {Mechanisms: []string{authn.SCRAMSHA256, authn.SCRAMSHA512}}}, FailedAuthenticationDelay: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if srv.ClusterID() != "abcdefghijklmnopqrstuv" {
		t.Errorf("cluster id %q", srv.ClusterID())
	}
	addr := testkit.ServeSASL(t, srv)
	ping := func(a scram.Auth, sha512 bool) error {
		m := a.AsSha256Mechanism()
		if sha512 {
			m = a.AsSha512Mechanism()
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(m), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return cl.Ping(ctx)
	}
	if err := ping(scram.Auth{User: "admin", Pass: "admin-secret"}, true); err != nil {
		t.Fatalf("admin: %v", err)
	}
	if err := ping(scram.Auth{User: "bob", Pass: "bob-secret"}, false); err != nil {
		t.Fatalf("bob (salted form): %v", err)
	}
	if err := ping(scram.Auth{User: "admin", Pass: "wrong"}, true); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v", err)
	}
}

func TestFormatUsage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	for _, args := range [][]string{
		{},
		{"--data-dir", dir, "extra"},
		{"--data-dir", dir, "--add-scram", "SCRAM-SHA-512=[name=admin]"},
		{"--data-dir", dir, "--add-scram", "SCRAM-SHA-1=[name=a,password=b]"},
		{"--data-dir", dir, "--bogus"},
	} {
		var errb bytes.Buffer
		if code := formatMain(args, io.Discard, &errb); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
		if strings.Contains(errb.String(), "password=b") {
			t.Errorf("%q: the message shows the password: %s", args, errb.String())
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused format created the data dir: %v", err)
	}
	// A directory that is not a verbatim data dir is refused (1).
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "x"), []byte("x"), 0o644)
	if code := formatMain([]string{"--data-dir", other}, io.Discard, io.Discard); code != 1 {
		t.Fatalf("non-empty foreign dir: exit %d, want 1", code)
	}
}
