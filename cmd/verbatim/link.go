package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/verbatim-kafka/verbatim/admin"
	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/props"
	"github.com/verbatim-kafka/verbatim/wireext"
)

const linkUsage = `usage:
  verbatim link create NAME --dest HOST:PORT --source HOST:PORT [--source-config FILE]
                       [--topics REGEX] [--exclude REGEX] [--groups REGEX] [--sync-configs]
                       [--sync-interval DUR] [--throttle BYTES_PER_SEC] [--validate-only]
  verbatim link list --dest HOST:PORT
  verbatim link describe NAME --dest HOST:PORT
  verbatim link delete NAME --dest HOST:PORT [--force]

A link is stored and run by the destination broker: it mirrors the source
topics matching --topics (and not --exclude) into mirror topics, and the
committed offsets of the groups matching --groups. --source-config is the
source's Kafka client properties (security.protocol, ssl.*, sasl.*), sent
to the broker, which keeps secrets encrypted and never shows them.
`

const destFlagsUsage = `
every command takes --dest HOST:PORT (the Verbatim broker), --dest-config
FILE (Kafka client properties for it), --timeout and --json.
Exit codes: 0 done, 1 refused by the broker, 2 usage or connection problems.
`

// newDestCmd is an admin command that talks to the destination broker
// (--dest, --dest-config).
func newDestCmd(title string, stdout, stderr io.Writer) *adminCmd {
	return newServerCmd(title, "dest", "", "the Verbatim destination broker (HOST:PORT, required)", "dest-config", stdout, stderr)
}

// parseDest parses like parse and requires --dest.
func (a *adminCmd) parseDest(args []string, needName bool, nameFlag string) (int, bool) {
	if code, ok := a.parse(args, needName, nameFlag); !ok {
		return code, false
	}
	if *a.bootstrap == "" {
		fmt.Fprintf(a.stderr, "%s: --dest HOST:PORT is required\n", a.title)
		return 2, false
	}
	return 0, true
}

func linkCmd(args []string) int { return linkMain(args, os.Stdout, os.Stderr) }

func linkMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, linkUsage+destFlagsUsage)
		return 2
	}
	a := newDestCmd("verbatim link "+args[0], stdout, stderr)
	args = args[1:]
	switch a.title[len("verbatim link "):] {
	case "create":
		return linkCreate(a, args)
	case "list":
		if code, ok := a.parseDest(args, false, ""); !ok {
			return code
		}
		return a.run(func(ctx context.Context, cl *client.Cluster) error {
			ls, err := admin.ListLinks(ctx, cl)
			if err != nil {
				return err
			}
			return answer(a, ls, admin.WriteLinks)
		})
	case "describe":
		if code, ok := a.parseDest(args, true, "link"); !ok {
			return code
		}
		return a.run(func(ctx context.Context, cl *client.Cluster) error {
			l, err := admin.DescribeLink(ctx, cl, a.name)
			if err != nil {
				return err
			}
			return answer(a, l, admin.WriteLink)
		})
	case "delete":
		force := a.fs.Bool("force", false, "delete the link although its topics are still mirrored (they go FAILED until stopped)")
		if code, ok := a.parseDest(args, true, "link"); !ok {
			return code
		}
		return a.run(func(ctx context.Context, cl *client.Cluster) error {
			if err := admin.DeleteLink(ctx, cl, a.name, *force); err != nil {
				return err
			}
			return a.done("deleted link " + a.name)
		})
	case "help", "-h", "--help":
		fmt.Fprint(stdout, linkUsage+destFlagsUsage)
		return 0
	}
	fmt.Fprintf(stderr, "%s: unknown subcommand\n%s", a.title, linkUsage)
	return 2
}

func linkCreate(a *adminCmd, args []string) int {
	source := a.fs.String("source", "", "a broker of the source cluster (HOST:PORT[,HOST:PORT...], required)")
	srcCfg := a.fs.String("source-config", "", "the source's Kafka client properties FILE (security.protocol, ssl.*, sasl.*)")
	topics := a.fs.String("topics", "", "REGEX (whole name) of the source topics to mirror")
	exclude := a.fs.String("exclude", "", "REGEX (whole name) of topics never to mirror")
	groups := a.fs.String("groups", "", "REGEX (whole name) of the consumer groups whose offsets to sync")
	syncConfigs := a.fs.Bool("sync-configs", false, "keep mirror topics' configs in step with the source")
	syncInterval := a.fs.Duration("sync-interval", 0, "metadata, config and offset sync period (0: the broker's default)")
	throttle := a.fs.Int64("throttle", 0, "cap on the link's fetch rate in bytes/s (0: none)")
	validate := a.fs.Bool("validate-only", false, "only check the link; create nothing")
	if code, ok := a.parseDest(args, true, "link"); !ok {
		return code
	}
	usage := func(msg string) int {
		fmt.Fprintf(a.stderr, "%s: %s\n", a.title, msg)
		return 2
	}
	switch {
	case *source == "":
		return usage("--source HOST:PORT is required")
	case *syncInterval < 0 || *syncInterval%time.Millisecond != 0:
		return usage("--sync-interval must be >= 0 and whole milliseconds")
	case *throttle < 0:
		return usage("--throttle must be >= 0")
	}
	cfg := wireext.LinkConfig{Name: a.name, SourceBootstrap: *source, Topics: *topics, Exclude: *exclude, Groups: *groups,
		SyncConfigs: *syncConfigs, SyncIntervalMs: syncInterval.Milliseconds(), ThrottleBytesPerSec: *throttle}
	if *srcCfg != "" {
		p, err := props.ReadFile(*srcCfg)
		if err != nil {
			return usage("--source-config: " + err.Error())
		}
		cfg.SourceConfig = map[string]string{}
		for _, k := range p.Keys() {
			cfg.SourceConfig[k], _ = p.Get(k)
		}
	}
	return a.run(func(ctx context.Context, cl *client.Cluster) error {
		if err := admin.CreateLink(ctx, cl, cfg, *validate); err != nil {
			return err
		}
		if *validate {
			return a.done("link " + a.name + " is valid (validate only: nothing created)")
		}
		return a.done("created link " + a.name)
	})
}

// topicsAnswer prints per-topic results and returns the first refusal.
func topicsAnswer(a *adminCmd, rs []admin.TopicResult, err error) error {
	if rs != nil {
		if perr := answer(a, rs, admin.WriteTopicResults); perr != nil {
			return perr
		}
	}
	return err
}
