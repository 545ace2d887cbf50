package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/verbatim-kafka/verbatim/admin"
	"github.com/verbatim-kafka/verbatim/mirror"
	"github.com/verbatim-kafka/verbatim/props"
)

const mirrorUsage = `usage:
  verbatim mirror push --source HOST:PORT --dest HOST:PORT --topics a,b [--create-topics] [--follow] [--groups REGEX]
                       [--source-config FILE] [--dest-config FILE]
  verbatim mirror stop --dest HOST:PORT (--topics a,b | --link NAME) [--dest-config FILE]

the cluster link's mirror topics (the broker mirrors them itself; see
verbatim link):
  verbatim mirror status --dest HOST:PORT [--link NAME] [--topics a,b] [--json] [--once]
  verbatim mirror pause|resume --dest HOST:PORT (--topics a,b | --link NAME)
  verbatim mirror create --dest HOST:PORT --link NAME --topics a,b [--truncate-to-common] [--keep-topic T]
  verbatim mirror truncate --dest HOST:PORT --topics t --to-divergence [--keep-topic T]

--source-config and --dest-config name Kafka client properties files
(security.protocol, ssl.*, sasl.mechanism, sasl.jaas.config) for the
connections to the source and the destination. Exit codes: 0 done,
1 divergence or refused by the broker, 2 usage or connection problems.
`

// mirrorCmd runs `verbatim mirror push|stop`. Exit codes: 0 done, 1
// divergence or refusal, 2 usage or connection problems.
func mirrorCmd(args []string) int {
	return mirrorMain(args, os.Stdout, os.Stderr)
}

func mirrorMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, mirrorUsage)
		return 2
	}
	switch args[0] {
	case "push":
		return mirrorPush(args[1:], stderr)
	case "stop":
		return mirrorStop(args[1:], stdout, stderr)
	case "status", "pause", "resume", "create", "truncate":
		return mirrorLinkMain(args[0], args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, mirrorUsage)
		return 0
	}
	fmt.Fprintf(stderr, "verbatim mirror: unknown subcommand %q\n%s", args[0], mirrorUsage)
	return 2
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func newLogger(stderr io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("bad --log-level %q", level)
	}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv})), nil
	case "json":
		return slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: lv})), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, got %q", format)
}

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func mirrorPush(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("mirror push", flag.ContinueOnError)
	fs.SetOutput(stderr)
	source := fs.String("source", "", "any broker of the source Kafka cluster (host:port)")
	dest := fs.String("dest", "", "the Verbatim destination (host:port)")
	topics := fs.String("topics", "", "comma-separated topics to mirror")
	create := fs.Bool("create-topics", false, "create missing destination topics like the source's, as mirror topics")
	follow := fs.Bool("follow", false, "keep tailing the source after catching up (until SIGINT/SIGTERM)")
	groups := fs.String("groups", "", "REGEX (whole name) of consumer groups whose committed offsets to copy")
	fetchBytes := fs.Int("fetch-bytes", 4<<20, "per-partition fetch size; a larger first batch is fetched whole")
	retryFor := fs.Duration("retry-for", 2*time.Minute, "how long to retry connection failures before giving up (exit 2)")
	logFormat := fs.String("log-format", "", "log format: text or json (default: text on a terminal, json otherwise)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	progress := fs.Bool("progress", false, "print per-partition progress lines (default: on when stderr is a terminal)")
	srcCfg, dstCfg := clientConfigFlags(fs)
	if code, ok := parseArgs(fs, args, stderr, "verbatim mirror push"); !ok {
		return code
	}
	if *fetchBytes < 1024 || *fetchBytes > 1<<30 {
		fmt.Fprintf(stderr, "verbatim mirror push: --fetch-bytes must be between 1024 and 1 GiB, got %d\n", *fetchBytes)
		return 2
	}
	tty := isTerminal(stderr)
	if *logFormat == "" {
		*logFormat = "json"
		if tty {
			*logFormat = "text"
		}
	}
	log, err := newLogger(stderr, *logFormat, *logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "verbatim mirror push: %v\n", err)
		return 2
	}
	o := mirror.Options{Source: *source, Dest: *dest, Topics: props.List(*topics), CreateTopics: *create, Follow: *follow,
		FetchBytes: int32(*fetchBytes), RetryFor: *retryFor, Logger: log}
	if o.SourceClient, o.DestClient, o.Groups, err = readPeers(*srcCfg, *dstCfg, *groups); err != nil {
		fmt.Fprintf(stderr, "verbatim mirror push: %v\n", err)
		return 2
	}
	if *progress || tty {
		o.Progress = stderr
	}
	ctx, cancel := signalContext()
	defer cancel()
	stats, err := mirror.Push(ctx, o)
	var batches, nbytes int64
	for _, s := range stats {
		batches += s.Batches
		nbytes += s.Bytes
	}
	if err != nil {
		log.Error("mirror push failed", "err", err, "batches", batches, "bytes", nbytes)
		fmt.Fprintf(stderr, "verbatim mirror push: %v\n", err)
		return mirror.ExitCode(err)
	}
	log.Info("mirror push done", "partitions", len(stats), "batches", batches, "bytes", nbytes)
	return 0
}

func mirrorStop(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mirror stop", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dest := fs.String("dest", "", "the Verbatim destination (host:port)")
	topics := fs.String("topics", "", "comma-separated mirror topics to stop (fail over)")
	link := fs.String("link", "", "stop every mirror topic of cluster link NAME")
	dstCfg := fs.String("dest-config", "", "Kafka client properties FILE for the destination (security.protocol, ssl.*, sasl.*)")
	if code, ok := parseArgs(fs, args, stderr, "verbatim mirror stop"); !ok {
		return code
	}
	_, co, err := readClientConfigs("", *dstCfg)
	if err != nil {
		fmt.Fprintf(stderr, "verbatim mirror stop: %v\n", err)
		return 2
	}
	ctx, cancel := signalContext()
	defer cancel()
	stopTopics, err := mirrorStopTopics(ctx, *dest, co, *link, props.List(*topics))
	if err != nil {
		fmt.Fprintf(stderr, "verbatim mirror stop: %v\n", err)
		if admin.IsRefused(err) {
			return 1
		}
		return 2
	}
	res, err := mirror.Stop(ctx, *dest, co, stopTopics)
	for _, r := range res {
		fmt.Fprintln(stdout, r.String())
	}
	if err != nil {
		fmt.Fprintf(stderr, "verbatim mirror stop: %v\n", err)
		return mirror.ExitCode(err)
	}
	return 0
}
