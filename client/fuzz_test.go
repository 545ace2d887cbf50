package client

import (
	"strings"
	"testing"

	"github.com/verbatim-kafka/verbatim/props"
)

// FuzzSkipTags: response header tags are skipped or refused, never
// over-read.
func FuzzSkipTags(f *testing.F) {
	f.Add([]byte{0, 1, 2})
	f.Add([]byte{1, 5, 2, 9, 9, 7})
	f.Add([]byte{2, 1, 200})
	f.Fuzz(func(t *testing.T, b []byte) {
		rest, err := skipTags(b)
		if err == nil && len(rest) > len(b) {
			t.Fatalf("rest longer than input")
		}
	})
}

// FuzzFromProps: any client properties text either gives options or an
// error; FromProps never panics, and no error carries the value of a
// password property or of the JAAS password option. (Store locations
// are dropped: a fuzzed path could name a device that never ends.)
func FuzzFromProps(f *testing.F) {
	f.Add("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"u\" password=\"pw-secret-1\";\n")
	f.Add("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"u\" password=\"pw-secret-2\";\n")
	f.Add("security.protocol=SSL\nssl.keystore.password=pw-secret-3\nssl.keystore.type=PKCS12\n")
	f.Add("request.timout.ms=1\n")
	f.Add("security.protocol=sasl_plaintext\nsasl.mechanism=GSSAPI\n")
	f.Fuzz(func(t *testing.T, text string) {
		p, err := props.Parse(strings.NewReader(text))
		if err != nil {
			return
		}
		q := props.New()
		var secrets []string
		for _, k := range p.Keys() {
			v, _ := p.Get(k)
			if strings.HasSuffix(k, ".location") {
				continue
			}
			q.Set(k, v)
			if strings.HasSuffix(k, "password") && len(v) >= 6 {
				secrets = append(secrets, v)
			}
			if k == "sasl.jaas.config" {
				if j, err := props.ParseJAAS(v); err == nil && len(j.Options["password"]) >= 6 {
					secrets = append(secrets, j.Options["password"])
				}
			}
		}
		_, err = FromProps(q)
		if err == nil {
			return
		}
		for _, sec := range secrets {
			if strings.Contains(err.Error(), sec) {
				t.Fatalf("error %q carries a secret", err)
			}
		}
	})
}
