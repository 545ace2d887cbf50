package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/verbatim-kafka/verbatim/admin"
	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/props"
)

const topicUsage = `usage:
  verbatim topic create NAME --partitions N [--replication-factor 1] [--config k=v ...]
  verbatim topic list
  verbatim topic describe NAME
  verbatim topic delete NAME
  verbatim topic alter-config NAME [--config k=v ...] [--delete-config k ...]
  verbatim topic add-partitions NAME --partitions N
`

const groupUsage = `usage:
  verbatim group list
  verbatim group describe NAME
  verbatim group delete NAME
  verbatim group reset-offsets NAME (--topic T[:P,P...] ... | --all-topics)
                               (--to-earliest | --to-latest | --to-offset N) [--dry-run | --execute]
`

const clusterUsage = `usage:
  verbatim cluster info
`

const adminFlagsUsage = `
every command takes --bootstrap-server HOST:PORT (default 127.0.0.1:9092),
--command-config FILE (Kafka client properties: security.protocol, ssl.*,
sasl.mechanism, sasl.jaas.config), --timeout and --json.
Exit codes: 0 done, 1 refused by the broker, 2 usage or connection problems.
`

// adminCmd is one parsed admin command: its cluster, output form and
// streams.
type adminCmd struct {
	fs                *flag.FlagSet
	bootstrap, cmdCfg *string
	// serverFlag and configFlag name the two flags above in messages
	// (--bootstrap-server and --command-config, or --dest and
	// --dest-config for the cluster link's commands).
	serverFlag, configFlag string
	timeout                *time.Duration
	asJSON                 *bool
	// needServer: the server flag has no default and must be given
	// (--dest).
	needServer     bool
	name           string // the command's NAME argument, if it takes one
	stdout, stderr io.Writer
	title          string // "verbatim topic create"
	noSub          bool   // no subcommand was given (other prints the usage)
}

// newAdminCmd defines the flags every admin command shares.
func newAdminCmd(title string, stdout, stderr io.Writer) *adminCmd {
	return newServerCmd(title, "bootstrap-server", "127.0.0.1:9092", "a broker of the cluster (HOST:PORT)", "command-config", stdout, stderr)
}

// newServerCmd is newAdminCmd with its own names of the broker and
// client-properties flags.
func newServerCmd(title, serverFlag, serverDefault, serverHelp, configFlag string, stdout, stderr io.Writer) *adminCmd {
	fs := flag.NewFlagSet(title, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &adminCmd{
		fs:         fs,
		bootstrap:  fs.String(serverFlag, serverDefault, serverHelp),
		cmdCfg:     fs.String(configFlag, "", "Kafka client properties FILE (security.protocol, ssl.*, sasl.*)"),
		serverFlag: serverFlag, configFlag: configFlag,
		timeout: fs.Duration("timeout", 30*time.Second, "give up after this long"),
		asJSON:  fs.Bool("json", false, "print the answer as JSON"),
		stdout:  stdout, stderr: stderr, title: title,
	}
}

// subcommand makes with newCmd the command of family's subcommand,
// args[0], and returns the subcommand and its arguments; with no
// subcommand, sub is "" and other answers the usage.
func subcommand(newCmd func(title string, stdout, stderr io.Writer) *adminCmd, family string, args []string, stdout, stderr io.Writer) (a *adminCmd, sub string, rest []string) {
	if len(args) == 0 {
		a = newCmd(family, stdout, stderr)
		a.noSub = true
		return a, "", nil
	}
	return newCmd(family+" "+args[0], stdout, stderr), args[0], args[1:]
}

// other answers a subcommand none of the family's cases took: without
// one, the usage on stderr (exit code 2); help, the usage on stdout (0);
// an unknown one is refused (2).
func (a *adminCmd) other(sub, usage, flagsUsage string) int {
	switch {
	case a.noSub:
		fmt.Fprint(a.stderr, usage+flagsUsage)
		return 2
	case sub == "help" || sub == "-h" || sub == "--help":
		fmt.Fprint(a.stdout, usage+flagsUsage)
		return 0
	}
	fmt.Fprintf(a.stderr, "%s: unknown subcommand\n%s", a.title, usage)
	return 2
}

// parse takes NAME first when needName (`topic create NAME --partitions
// 3`; --topic/--group NAME is accepted too, as Kafka's tools spell it),
// then the flags; ok is false when the command must exit with code.
func (a *adminCmd) parse(args []string, needName bool, nameFlag string) (code int, ok bool) {
	var named *string
	if needName {
		named = a.fs.String(nameFlag, "", "the "+nameFlag+" (or give it as the first argument)")
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			a.name, args = args[0], args[1:]
		}
	}
	if code, ok := parseArgs(a.fs, args, a.stderr, a.title); !ok {
		return code, false
	}
	if needName {
		if *named != "" {
			if a.name != "" && a.name != *named {
				fmt.Fprintf(a.stderr, "%s: NAME %q and --%s %q differ\n", a.title, a.name, nameFlag, *named)
				return 2, false
			}
			a.name = *named
		}
		if a.name == "" {
			fmt.Fprintf(a.stderr, "%s: a %s NAME is required\n", a.title, nameFlag)
			return 2, false
		}
	}
	if a.needServer && *a.bootstrap == "" {
		fmt.Fprintf(a.stderr, "%s: --%s HOST:PORT is required\n", a.title, a.serverFlag)
		return 2, false
	}
	return 0, true
}

// run connects and calls fn, mapping its error to the exit code: 1 for a
// broker's refusal (its error name, code and message printed), 2 for
// anything else.
func (a *adminCmd) run(fn func(ctx context.Context, cl *client.Cluster) error) int {
	var o client.Options
	if *a.cmdCfg != "" {
		var err error
		if o, err = client.ReadConfig(*a.cmdCfg); err != nil {
			fmt.Fprintf(a.stderr, "%s: --%s: %v\n", a.title, a.configFlag, err)
			return 2
		}
	}
	cl, err := client.NewCluster(*a.bootstrap, o)
	if err != nil {
		fmt.Fprintf(a.stderr, "%s: --%s: %v\n", a.title, a.serverFlag, err)
		return 2
	}
	defer cl.Close()
	ctx, cancel := signalContext()
	defer cancel()
	if *a.timeout > 0 { // 0: the command bounds its own requests
		var cancelT context.CancelFunc
		ctx, cancelT = context.WithTimeout(ctx, *a.timeout)
		defer cancelT()
	}
	if err := fn(ctx, cl); err != nil {
		if admin.IsRefused(err) {
			fmt.Fprintf(a.stderr, "%s: refused: %v\n", a.title, err)
			return 1
		}
		fmt.Fprintf(a.stderr, "%s: %v\n", a.title, err)
		return 2
	}
	return 0
}

// answer prints v as JSON under --json, else through the human writer.
func answer[T any](a *adminCmd, v T, human func(io.Writer, T) error) error {
	if *a.asJSON {
		return admin.WriteJSON(a.stdout, v)
	}
	return human(a.stdout, v)
}

// query parses args (no NAME) and prints what get answers (answer).
func query[T any](a *adminCmd, args []string, get func(context.Context, *client.Cluster) (T, error), human func(io.Writer, T) error) int {
	return queryNamed(a, args, "", func(ctx context.Context, cl *client.Cluster, _ string) (T, error) { return get(ctx, cl) }, human)
}

// queryNamed parses args, with a NAME when nameFlag is not "" (parse),
// and prints what get answers for it (answer).
func queryNamed[T any](a *adminCmd, args []string, nameFlag string, get func(context.Context, *client.Cluster, string) (T, error), human func(io.Writer, T) error) int {
	if code, ok := a.parse(args, nameFlag != "", nameFlag); !ok {
		return code
	}
	return a.run(func(ctx context.Context, cl *client.Cluster) error {
		v, err := get(ctx, cl, a.name)
		if err != nil {
			return err
		}
		return answer(a, v, human)
	})
}

// mutateNamed parses args with a NAME (parse), runs do on it and reports
// "did NAME" (done).
func (a *adminCmd) mutateNamed(args []string, nameFlag string, do func(context.Context, *client.Cluster, string) error, did string) int {
	if code, ok := a.parse(args, true, nameFlag); !ok {
		return code
	}
	return a.run(func(ctx context.Context, cl *client.Cluster) error {
		if err := do(ctx, cl, a.name); err != nil {
			return err
		}
		return a.done(did + " " + a.name)
	})
}

// usage refuses the command's arguments with msg (exit code 2).
func (a *adminCmd) usage(msg string) int {
	fmt.Fprintf(a.stderr, "%s: %s\n", a.title, msg)
	return 2
}

// done reports a mutation: a line for humans, {"ok":true,...} for --json.
func (a *adminCmd) done(what string) error {
	if *a.asJSON {
		return admin.WriteJSON(a.stdout, map[string]any{"ok": true, "result": what})
	}
	_, err := fmt.Fprintln(a.stdout, what)
	return err
}

// kvList is a repeatable k=v flag.
type kvList struct{ m map[string]string }

func (l *kvList) String() string { return "" }
func (l *kvList) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want k=v, got %q", s)
	}
	if l.m == nil {
		l.m = map[string]string{}
	}
	l.m[k] = v
	return nil
}

// strList is a repeatable string flag.
type strList []string

func (l *strList) String() string     { return strings.Join(*l, ",") }
func (l *strList) Set(s string) error { *l = append(*l, s); return nil }

func topicCmd(args []string) int { return topicMain(args, os.Stdout, os.Stderr) }

func topicMain(args []string, stdout, stderr io.Writer) int {
	a, sub, args := subcommand(newAdminCmd, "verbatim topic", args, stdout, stderr)
	switch sub {
	case "create":
		parts := a.fs.Int("partitions", 0, "number of partitions (required)")
		rf := a.fs.Int("replication-factor", 1, "replication factor")
		var cfg kvList
		a.fs.Var(&cfg, "config", "topic config k=v (repeatable)")
		if code, ok := a.parse(args, true, "topic"); !ok {
			return code
		}
		if *parts < 1 || *rf < 1 {
			return a.usage("--partitions N (N >= 1) is required and --replication-factor must be >= 1")
		}
		return a.run(func(ctx context.Context, cl *client.Cluster) error {
			if err := admin.CreateTopic(ctx, cl, a.name, int32(*parts), int16(*rf), cfg.m); err != nil {
				return err
			}
			return a.done(fmt.Sprintf("created topic %s (%d partitions)", a.name, *parts))
		})
	case "list":
		return query(a, args, admin.ListTopics, admin.WriteTopics)
	case "describe":
		return queryNamed(a, args, "topic", admin.DescribeTopic, admin.WriteTopic)
	case "delete":
		return a.mutateNamed(args, "topic", admin.DeleteTopic, "deleted topic")
	case "alter-config":
		var set kvList
		var del strList
		a.fs.Var(&set, "config", "set topic config k=v (repeatable)")
		a.fs.Var(&del, "delete-config", "delete topic config k (repeatable)")
		if code, ok := a.parse(args, true, "topic"); !ok {
			return code
		}
		if len(set.m) == 0 && len(del) == 0 {
			return a.usage("nothing to change: give --config k=v or --delete-config k")
		}
		return a.run(func(ctx context.Context, cl *client.Cluster) error {
			if err := admin.AlterTopicConfig(ctx, cl, a.name, set.m, del); err != nil {
				return err
			}
			return a.done("altered configs of topic " + a.name)
		})
	case "add-partitions":
		parts := a.fs.Int("partitions", 0, "the new total number of partitions (required)")
		if code, ok := a.parse(args, true, "topic"); !ok {
			return code
		}
		if *parts < 1 {
			return a.usage("--partitions N (the new total) is required")
		}
		return a.run(func(ctx context.Context, cl *client.Cluster) error {
			if err := admin.AddPartitions(ctx, cl, a.name, int32(*parts)); err != nil {
				return err
			}
			return a.done(fmt.Sprintf("topic %s now has %d partitions", a.name, *parts))
		})
	}
	return a.other(sub, topicUsage, adminFlagsUsage)
}

func groupCmd(args []string) int { return groupMain(args, os.Stdout, os.Stderr) }

func groupMain(args []string, stdout, stderr io.Writer) int {
	a, sub, args := subcommand(newAdminCmd, "verbatim group", args, stdout, stderr)
	switch sub {
	case "list":
		return query(a, args, admin.ListGroups, admin.WriteGroups)
	case "describe":
		return queryNamed(a, args, "group", admin.DescribeGroup, admin.WriteGroup)
	case "delete":
		return a.mutateNamed(args, "group", admin.DeleteGroup, "deleted group")
	case "reset-offsets":
		return groupReset(a, args)
	}
	return a.other(sub, groupUsage, adminFlagsUsage)
}

func clusterCmd(args []string) int { return clusterMain(args, os.Stdout, os.Stderr) }

func clusterMain(args []string, stdout, stderr io.Writer) int {
	a, sub, args := subcommand(newAdminCmd, "verbatim cluster", args, stdout, stderr)
	if sub == "info" {
		return query(a, args, admin.DescribeCluster, admin.WriteCluster)
	}
	return a.other(sub, clusterUsage, adminFlagsUsage)
}

// groupReset runs `group reset-offsets`: a dry run unless --execute, as
// Kafka's kafka-consumer-groups.
func groupReset(a *adminCmd, args []string) int {
	var topicSpecs strList
	a.fs.Var(&topicSpecs, "topic", "topic T or T:P,P... to reset (repeatable)")
	all := a.fs.Bool("all-topics", false, "reset every topic the group has committed offsets for")
	earliest := a.fs.Bool("to-earliest", false, "reset to each partition's log start")
	latest := a.fs.Bool("to-latest", false, "reset to each partition's log end")
	toOffset := a.fs.Int64("to-offset", -1, "reset to offset N (clamped to the log's range)")
	dry := a.fs.Bool("dry-run", false, "only show the new offsets (the default)")
	execute := a.fs.Bool("execute", false, "commit the new offsets")
	if code, ok := a.parse(args, true, "group"); !ok {
		return code
	}
	targets := 0
	for _, b := range []bool{*earliest, *latest, *toOffset >= 0} {
		if b {
			targets++
		}
	}
	switch {
	case targets != 1:
		return a.usage("give exactly one of --to-earliest, --to-latest, --to-offset N (N >= 0)")
	case *all == (len(topicSpecs) > 0):
		return a.usage("give either --all-topics or --topic T[:P,P...]")
	case *dry && *execute:
		return a.usage("--dry-run and --execute exclude each other")
	}
	topics := map[string][]int32{}
	for _, spec := range topicSpecs {
		name, parts, err := parseTopicSpec(spec)
		if err != nil {
			return a.usage(err.Error())
		}
		topics[name] = parts
	}
	to := admin.ResetTo{Earliest: *earliest, Latest: *latest, Offset: *toOffset}
	return a.run(func(ctx context.Context, cl *client.Cluster) error {
		plan, err := admin.ResetOffsets(ctx, cl, a.name, topics, to, *execute)
		if err != nil {
			return err
		}
		return answer(a, plan, admin.WriteReset)
	})
}

// parseTopicSpec parses Kafka's --topic T or T:P,P,... of reset-offsets:
// nil partitions mean every partition of T.
func parseTopicSpec(spec string) (string, []int32, error) {
	name, list, hasParts := strings.Cut(spec, ":")
	if name == "" {
		return "", nil, fmt.Errorf("--topic %q: no topic name", spec)
	}
	if !hasParts {
		return name, nil, nil
	}
	var parts []int32
	for _, f := range props.List(list) {
		p, err := strconv.ParseInt(f, 10, 32)
		if err != nil || p < 0 {
			return "", nil, fmt.Errorf("--topic %q: bad partition %q", spec, f)
		}
		parts = append(parts, int32(p))
	}
	if parts == nil {
		return "", nil, fmt.Errorf("--topic %q: no partitions after ':'", spec)
	}
	return name, parts, nil
}
