package verify

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// ExitCode is the verify exit code for a report: 0 exact (including
// source-compacted-since and compacted-equivalent), 1 mismatch.
func (r *Report) ExitCode() int {
	if r.Exact {
		return 0
	}
	return 1
}

// WriteJSON writes the report as one JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes a human summary: one line per partition and a verdict.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, p := range r.Partitions {
		fmt.Fprintf(&b, "%s/%d: %s, %d batches, %d bytes in offsets [%d, %d)", p.Topic, p.Partition, p.Status, p.Batches, p.Bytes, p.CommonRange[0], p.CommonRange[1])
		if m := p.FirstMismatch; m != nil {
			fmt.Fprintf(&b, "; first mismatch at offset %d, field %s", m.Offset, m.Field)
			if m.Detail != "" {
				fmt.Fprintf(&b, ": %s", m.Detail)
			}
		}
		b.WriteByte('\n')
		for _, u := range p.Undecodable {
			fmt.Fprintf(&b, "%s/%d: batch at offset %d (%s) cannot be decompressed: %s\n", p.Topic, p.Partition, u.Offset, u.Codec, u.Reason)
		}
	}
	for _, t := range r.Topics {
		switch t.TopicIDs {
		case TopicIDsEqual:
			fmt.Fprintf(&b, "topic %s: topic ids equal (%s)\n", t.Topic, t.SourceTopicID)
		case TopicIDsDifferent:
			fmt.Fprintf(&b, "topic %s: topic ids differ (source %s, destination %s; the destination was not created with the source's id, which does not affect the data verdict)\n", t.Topic, t.SourceTopicID, t.DestTopicID)
		}
	}
	for _, g := range r.Groups {
		fmt.Fprintf(&b, "group %s %s/%d: %s (source %d, expected %d, destination %d)", g.Group, g.Topic, g.Partition, g.Status, g.SourceOffset, g.Expected, g.DestOffset)
		if g.Field != "" {
			fmt.Fprintf(&b, ", first difference: %s", g.Field)
		}
		b.WriteByte('\n')
	}
	if r.Exact {
		b.WriteString("exact: the destination holds the source's topics exactly\n")
	} else {
		b.WriteString("NOT exact: see the mismatches above\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
