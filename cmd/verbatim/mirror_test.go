package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestMirrorAndVerifyUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"mirror"}, 2, "usage"},
		{[]string{"mirror", "sideways"}, 2, "unknown subcommand"},
		{[]string{"mirror", "push", "--dest", "127.0.0.1:1", "--topics", "a"}, 2, "--source and --dest are required"},
		{[]string{"mirror", "push", "--source", "127.0.0.1:1", "--dest", "127.0.0.1:1"}, 2, "--topics is required"},
		{[]string{"mirror", "push", "--source", "a:1", "--dest", "b:1", "--topics", "t", "--groups", "("}, 2, "--groups"},
		{[]string{"mirror", "push", "--source", "a:1", "--dest", "b:1", "--topics", "t", "--fetch-bytes", "10"}, 2, "--fetch-bytes"},
		{[]string{"mirror", "push", "--bogus"}, 2, "flag provided but not defined"},
		{[]string{"mirror", "push", "--source", "a:1", "--dest", "b:1", "--topics", "t", "extra"}, 2, "unexpected arguments"},
		{[]string{"mirror", "stop", "--topics", "t"}, 2, "--dest and --topics are required"},
		{[]string{"verify", "--source", "a:1", "--topics", "t"}, 2, "required"},
		{[]string{"verify", "--source", "a:1", "--dest", "b:1", "--topics", "t", "--groups", "(["}, 2, "--groups"},
		// Nothing listens on port 1: a connection problem is exit 2.
		{[]string{"verify", "--source", "127.0.0.1:1", "--dest", "127.0.0.1:1", "--topics", "t"}, 2, "could not run"},
		{[]string{"mirror", "push", "--source", "127.0.0.1:1", "--dest", "127.0.0.1:1", "--topics", "t", "--log-format", "json"}, 2, "destination"},
	} {
		var out, errb bytes.Buffer
		var code int
		switch tc.args[0] {
		case "mirror":
			code = mirrorMain(tc.args[1:], &out, &errb)
		case "verify":
			code = verifyMain(tc.args[1:], &out, &errb)
		}
		if code != tc.code || !strings.Contains(out.String()+errb.String(), tc.msg) {
			t.Errorf("%v: exit %d, want %d with %q; output:\n%s%s", tc.args, code, tc.code, tc.msg, out.String(), errb.String())
		}
	}
}
