package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/verbatim-kafka/verbatim/authn"
	"github.com/verbatim-kafka/verbatim/broker"
)

// formatCmd runs `verbatim format`, kafka-storage.sh format's counterpart:
// it creates and formats a data dir and stores the first SCRAM users
// (--add-scram, repeatable, kafka-storage's syntax). Exit codes: 0
// formatted (or already formatted with --ignore-formatted), 1 refused
// (already formatted, or not a verbatim data dir), 2 usage errors.
func formatCmd(args []string) int { return formatMain(args, os.Stdout, os.Stderr) }

// scramFlags collects repeated --add-scram values.
type scramFlags []string

func (s *scramFlags) String() string     { return fmt.Sprintf("%d entries", len(*s)) }
func (s *scramFlags) Set(v string) error { *s = append(*s, v); return nil }

func formatMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("format", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", "", "the data directory to create and format (required)")
	nodeID := fs.Int("node-id", 1, "the node id the data dir belongs to (serve's --node-id)")
	clusterID := fs.String("cluster-id", "", "the cluster id to write (default: a random one)")
	ignore := fs.Bool("ignore-formatted", false, "exit 0 without changing anything when the data dir is already formatted")
	var scrams scramFlags
	fs.Var(&scrams, "add-scram", "a SCRAM credential, as kafka-storage.sh: 'SCRAM-SHA-512=[name=admin,password=secret]' or "+
		"'SCRAM-SHA-256=[name=u,salt=<base64>,saltedpassword=<base64>,iterations=8192]' (no clear password in the arguments); repeatable")
	if code, ok := parseArgs(fs, args, stderr, "verbatim format"); !ok {
		return code
	}
	if *dataDir == "" {
		fmt.Fprintln(stderr, "verbatim format: --data-dir is required")
		return 2
	}
	if *nodeID < 0 || *nodeID > 1<<31-1 {
		fmt.Fprintf(stderr, "verbatim format: bad --node-id %d\n", *nodeID)
		return 2
	}
	if strings.ContainsAny(*clusterID, "\n\r=") {
		fmt.Fprintln(stderr, "verbatim format: bad --cluster-id")
		return 2
	}
	var entries []authn.ScramEntry
	for i, s := range scrams {
		e, err := authn.ParseAddScram(s)
		if err != nil {
			fmt.Fprintf(stderr, "verbatim format: --add-scram #%d: %v\n", i+1, err)
			return 2
		}
		entries = append(entries, e)
	}
	err := broker.Format(broker.FormatOptions{DataDir: *dataDir, NodeID: int32(*nodeID), ClusterID: *clusterID, SCRAM: entries})
	switch {
	case errors.Is(err, broker.ErrAlreadyFormatted) && *ignore:
		fmt.Fprintf(stdout, "%s is already formatted; ignoring it (--ignore-formatted)\n", *dataDir)
		return 0
	case errors.Is(err, broker.ErrAlreadyFormatted):
		fmt.Fprintf(stderr, "verbatim format: %s is already formatted; use --ignore-formatted to ignore it\n", *dataDir)
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "verbatim format: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "Formatted %s (node.id %d) with %d SCRAM credential(s)\n", *dataDir, *nodeID, len(entries))
	return 0
}
