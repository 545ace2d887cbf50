package main

import (
	"flag"
	"fmt"
	"regexp"

	"github.com/verbatim-kafka/verbatim/client"
)

// clientConfigFlags defines --source-config and --dest-config: Kafka
// client properties files (security.protocol, ssl.*, sasl.mechanism,
// sasl.jaas.config) for the connections to each side, so that secrets
// stay out of process arguments.
func clientConfigFlags(fs *flag.FlagSet) (source, dest *string) {
	source = fs.String("source-config", "", "Kafka client properties FILE for the source (security.protocol, ssl.*, sasl.*)")
	dest = fs.String("dest-config", "", "Kafka client properties FILE for the destination (security.protocol, ssl.*, sasl.*)")
	return source, dest
}

// readClientConfigs reads the files given (an empty path: plaintext, no
// authentication); errors name the flag, the file and the line, never a
// value.
func readClientConfigs(source, dest string) (src, dst client.Options, err error) {
	if source != "" {
		if src, err = client.ReadConfig(source); err != nil {
			return src, dst, fmt.Errorf("--source-config: %w", err)
		}
	}
	if dest != "" {
		if dst, err = client.ReadConfig(dest); err != nil {
			return src, dst, fmt.Errorf("--dest-config: %w", err)
		}
	}
	return src, dst, nil
}

// readPeers is readClientConfigs and the compiled --groups pattern (nil
// when groups is "").
func readPeers(source, dest, groups string) (src, dst client.Options, re *regexp.Regexp, err error) {
	if src, dst, err = readClientConfigs(source, dest); err != nil || groups == "" {
		return src, dst, nil, err
	}
	re, err = client.CompileGroups(groups)
	return src, dst, re, err
}
