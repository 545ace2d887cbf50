package main

import (
	"context"
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
	a := newServerCmd(title, "dest", "", "the Verbatim destination broker (HOST:PORT, required)", "dest-config", stdout, stderr)
	a.needServer = true
	return a
}

func linkCmd(args []string) int { return linkMain(args, os.Stdout, os.Stderr) }

func linkMain(args []string, stdout, stderr io.Writer) int {
	a, sub, args := subcommand(newDestCmd, "verbatim link", args, stdout, stderr)
	switch sub {
	case "create":
		return linkCreate(a, args)
	case "list":
		return query(a, args, admin.ListLinks, admin.WriteLinks)
	case "describe":
		return queryNamed(a, args, "link", admin.DescribeLink, admin.WriteLink)
	case "delete":
		force := a.fs.Bool("force", false, "delete the link although its topics are still mirrored (they go FAILED until stopped)")
		return a.mutateNamed(args, "link", func(ctx context.Context, cl *client.Cluster, name string) error {
			return admin.DeleteLink(ctx, cl, name, *force)
		}, "deleted link")
	}
	return a.other(sub, linkUsage, destFlagsUsage)
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
	if code, ok := a.parse(args, true, "link"); !ok {
		return code
	}
	switch {
	case *source == "":
		return a.usage("--source HOST:PORT is required")
	case *syncInterval < 0 || *syncInterval%time.Millisecond != 0:
		return a.usage("--sync-interval must be >= 0 and whole milliseconds")
	case *throttle < 0:
		return a.usage("--throttle must be >= 0")
	}
	cfg := wireext.LinkConfig{Name: a.name, SourceBootstrap: *source, Topics: *topics, Exclude: *exclude, Groups: *groups,
		SyncConfigs: *syncConfigs, SyncIntervalMs: syncInterval.Milliseconds(), ThrottleBytesPerSec: *throttle}
	if *srcCfg != "" {
		p, err := props.ReadFile(*srcCfg)
		if err != nil {
			return a.usage("--source-config: " + err.Error())
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
