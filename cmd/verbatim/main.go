package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// Version is set at build time with -ldflags "-X main.Version=...".
var Version = "dev"

const usage = `usage: verbatim <command> [flags]

commands:
  serve     run a broker (verbatim serve --listen 127.0.0.1:9092 --data-dir DIR)
  format    create a data dir with its first SCRAM users (verbatim format --data-dir DIR --add-scram ...)
  mirror    copy topics from a Kafka cluster at their offsets (mirror push|stop),
            and the cluster link's mirror topics (mirror status|pause|resume|create|truncate)
  link      create, list, describe, delete cluster links (the broker mirrors a source by itself)
  verify    prove that a destination holds a source's topics exactly
  policy    inspect and test mirror policy modules
  topic     create, list, describe, delete, alter-config, add-partitions topics
  group     list, describe (members, offsets, lag), delete consumer groups
  cluster   cluster info (id, controller, brokers)
  version   print the version
`

func main() {
	os.Exit(run(os.Args[1:]))
}

// run dispatches a subcommand and returns the process exit code: 0 done,
// 1 divergence or refusal, 2 usage or connection problems.
func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serveCmd(args[1:])
	case "format":
		return formatCmd(args[1:])
	case "version", "--version", "-version":
		fmt.Println("verbatim", Version)
		return 0
	case "mirror":
		return mirrorCmd(args[1:])
	case "verify":
		return verifyCmd(args[1:])
	case "policy":
		return policyCmd(args[1:])
	case "topic":
		return topicCmd(args[1:])
	case "group":
		return groupCmd(args[1:])
	case "cluster":
		return clusterCmd(args[1:])
	case "link":
		return linkCmd(args[1:])
	case "help", "-h", "--help":
		fmt.Print(usage)
		return 0
	}
	fmt.Fprintf(os.Stderr, "verbatim: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// parseArgs parses a subcommand's flags and refuses positional arguments.
// ok is false when the command must exit with code: 0 after -h, 2 for a
// usage error (the flag package has printed it) or unexpected arguments.
func parseArgs(fs *flag.FlagSet, args []string, stderr io.Writer, cmd string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected arguments %q\n", cmd, fs.Args())
		return 2, false
	}
	return 0, true
}
