package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/verbatim-kafka/verbatim/admin"
	"github.com/verbatim-kafka/verbatim/client"
	"github.com/verbatim-kafka/verbatim/props"
)

// The mirror commands of the cluster link: status, pause, resume, create
// (topics of a link) and truncate (after a divergence), all against the
// destination broker's link admin requests; and the link's topics for
// `mirror stop --link`.

// mirrorLinkMain runs `verbatim mirror status|pause|resume|create|truncate`.
func mirrorLinkMain(sub string, args []string, stdout, stderr io.Writer) int {
	a := newDestCmd("verbatim mirror "+sub, stdout, stderr)
	switch sub {
	case "status":
		return mirrorStatus(a, args)
	case "pause", "resume":
		link := a.fs.String("link", "", "every mirror topic of link NAME")
		topics := a.fs.String("topics", "", "comma-separated mirror topics")
		if code, ok := a.parse(args, false, ""); !ok {
			return code
		}
		if *link == "" && *topics == "" {
			return a.usage("give --topics a,b or --link NAME")
		}
		return a.run(func(ctx context.Context, cl *client.Cluster) error {
			rs, err := admin.PauseMirrorTopics(ctx, cl, *link, props.List(*topics), sub == "pause")
			return topicsAnswer(a, rs, err)
		})
	case "create":
		link := a.fs.String("link", "", "the link the topics mirror (required)")
		topics := a.fs.String("topics", "", "comma-separated source topics to mirror (required)")
		truncate := a.fs.Bool("truncate-to-common", false, "turn existing writable topics into mirrors (failback): truncate each to the last offset it shares with the source, keeping what is cut")
		keep := a.fs.String("keep-topic", "", "topic that keeps the records a truncation removes (default <topic>.truncated)")
		if code, ok := a.parse(args, false, ""); !ok {
			return code
		}
		if *link == "" || *topics == "" {
			return a.usage("--link NAME and --topics a,b are required")
		}
		return a.run(func(ctx context.Context, cl *client.Cluster) error {
			rs, err := admin.StartMirrorTopics(ctx, cl, *link, props.List(*topics), *truncate, *keep)
			return topicsAnswer(a, rs, err)
		})
	case "truncate":
		topics := a.fs.String("topics", "", "comma-separated FAILED mirror topics (required)")
		toDivergence := a.fs.Bool("to-divergence", false, "truncate to the point the logs share with the source and resume (required: the only mode)")
		keep := a.fs.String("keep-topic", "", "topic that keeps the records the truncation removes (default <topic>.truncated)")
		if code, ok := a.parse(args, false, ""); !ok {
			return code
		}
		if *topics == "" || !*toDivergence {
			return a.usage("--topics a,b and --to-divergence are required")
		}
		return a.run(func(ctx context.Context, cl *client.Cluster) error {
			rs, err := admin.TruncateMirrorTopics(ctx, cl, props.List(*topics), *keep)
			return topicsAnswer(a, rs, err)
		})
	}
	return 2
}

// mirrorStatus runs `mirror status`: one table (or JSON), or on a
// terminal a live table refreshed every second until interrupted.
func mirrorStatus(a *adminCmd, args []string) int {
	link := a.fs.String("link", "", "only link NAME's mirror partitions")
	topics := a.fs.String("topics", "", "only these comma-separated topics")
	once := a.fs.Bool("once", false, "print one table, also on a terminal")
	if code, ok := a.parse(args, false, ""); !ok {
		return code
	}
	live := !*once && !*a.asJSON && isTerminal(a.stdout)
	perRequest := *a.timeout
	if live {
		*a.timeout = 0 // until interrupted; each refresh has its own bound
	}
	return a.run(func(ctx context.Context, cl *client.Cluster) error {
		fetch := func(ctx context.Context) (*admin.MirrorStatus, error) {
			rctx, cancel := context.WithTimeout(ctx, perRequest)
			defer cancel()
			return admin.DescribeMirrors(rctx, cl, *link, props.List(*topics))
		}
		if !live {
			st, err := fetch(ctx)
			if err != nil {
				return err
			}
			return answer(a, st, admin.WriteMirrorStatus)
		}
		return watchStatus(ctx, a.stdout, fetch, refreshEvery)
	})
}

// watchStatus is the live table: fetched and redrawn every period until
// ctx ends (an interruption: nil) or a fetch fails.
func watchStatus(ctx context.Context, w io.Writer, fetch func(context.Context) (*admin.MirrorStatus, error), every time.Duration) error {
	for {
		st, err := fetch(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		fmt.Fprint(w, clearScreen)
		if err := admin.WriteMirrorStatus(w, st); err != nil {
			return err
		}
		if waitOrDone(ctx, every) {
			return nil
		}
	}
}

// clearScreen moves the cursor home and clears the terminal (ANSI).
const clearScreen = "\x1b[H\x1b[2J"

// refreshEvery is the live status table's refresh period.
const refreshEvery = time.Second

// waitOrDone waits d; true when ctx ended first.
func waitOrDone(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return true
	case <-t.C:
		return false
	}
}

// mirrorStopTopics resolves `mirror stop`'s topics: --topics, or the
// mirror topics of --link (from the destination's DescribeMirrors).
func mirrorStopTopics(ctx context.Context, dest string, co client.Options, link string, topics []string) ([]string, error) {
	if link == "" {
		return topics, nil
	}
	if len(topics) > 0 {
		return nil, errors.New("give --topics or --link, not both")
	}
	cl, err := client.NewCluster(dest, co)
	if err != nil {
		return nil, fmt.Errorf("--dest: %w", err)
	}
	defer cl.Close()
	ts, err := admin.LinkTopics(ctx, cl, link)
	if err == nil && len(ts) == 0 {
		err = fmt.Errorf("link %s has no mirror topics", link)
	}
	return ts, err
}
