// Command verbatim is the Verbatim broker and its tools, one binary with
// subcommands: serve, format, mirror, link, verify, policy, topic, group,
// cluster, version.
//
// It owns the command line: flags (and their precedence over `serve
// --config` and `--override`, which brokerconf translates), binding the
// configured listeners and the metrics endpoint (serve_metrics.go), cluster
// mode's wiring (serve_cluster.go: the embedded etcd member, the store, the
// replica fetchers, joining, the controller candidate, the controlled
// shutdown and the order things stop in), exit codes, output formats, signal
// handling, and the policy tools' replay of a segment file as one mirror
// partition (policy.go). `format` (format.go) parses --add-scram with
// package authn and formats through broker.Format. The admin commands
// (topic, group, cluster: admin.go) parse flags and map package admin's
// answers to tables, JSON and exit codes; the cluster link's commands
// (link create|list|describe|delete: link.go; mirror status|pause|resume|
// create|truncate and stop --link: mirror_link.go) do the same against
// the destination's link admin requests (--dest, --dest-config). Each subcommand wires a package (broker, mirror,
// verify, wasmpolicy, admin); it must not hold broker, storage, mirroring or
// verification logic itself.
package main
