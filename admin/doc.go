// Package admin is the application code of the admin CLI (`verbatim
// topic|group|cluster ...`): each command is one or a few ordinary Kafka
// admin requests (CreateTopics, DeleteTopics, CreatePartitions,
// IncrementalAlterConfigs, Metadata, DescribeConfigs, ListGroups,
// DescribeGroups, OffsetFetch, ListOffsets, DeleteGroups, and the
// standalone OffsetCommit of reset-offsets) sent through package client,
// so it answers the same against Verbatim and Apache Kafka. The cluster
// link's commands (`link ...`, `mirror status|pause|resume|create|
// truncate`: links.go) send Verbatim's link admin requests instead
// (wireext's codecs over client.RawRequest), only to a broker that
// advertises the feature verbatim.mirror.link (ErrNoLinks otherwise). It returns
// plain result values with JSON tags and renders them as human tables
// (Table) or JSON.
//
// A broker's refusal is a *Refused carrying Kafka's error code, its name
// and the broker's message; the refusals Kafka's tools make themselves
// (ErrGroupActive) count as refusals too (IsRefused); any other error is
// a usage or connection problem. Mapping those to exit codes and parsing
// flags belong to cmd/verbatim. It must not import the broker, speak the
// protocol below client's Conn, retry requests by itself, or read client
// properties other than through client.ReadConfig / client.FromProps.
package admin
