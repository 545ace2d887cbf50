package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/verbatim-kafka/verbatim/props"
	"github.com/verbatim-kafka/verbatim/verify"
)

// verifyCmd runs `verbatim verify`. Exit codes: 0 exact (including a
// source compacted since the copy), 1 mismatch, 2 could not run.
func verifyCmd(args []string) int {
	return verifyMain(args, os.Stdout, os.Stderr)
}

func verifyMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	source := fs.String("source", "", "any broker of the source Kafka cluster (host:port)")
	dest := fs.String("dest", "", "the Verbatim destination (host:port)")
	topics := fs.String("topics", "", "comma-separated topics to verify")
	groups := fs.String("groups", "", "REGEX (whole name) of consumer groups whose committed offsets to compare")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	srcCfg, dstCfg := clientConfigFlags(fs)
	if code, ok := parseArgs(fs, args, stderr, "verbatim verify"); !ok {
		return code
	}
	o := verify.Options{Source: *source, Dest: *dest, Topics: props.List(*topics)}
	var err error
	if o.SourceClient, o.DestClient, o.Groups, err = readPeers(*srcCfg, *dstCfg, *groups); err != nil {
		fmt.Fprintf(stderr, "verbatim verify: %v\n", err)
		return 2
	}
	ctx, cancel := signalContext()
	defer cancel()
	rep, err := verify.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "verbatim verify: could not run: %v\n", err)
		return 2
	}
	if *asJSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "verbatim verify: %v\n", err)
		return 2
	}
	return rep.ExitCode()
}
