package admin

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// Table writes rows under a header as aligned columns, the form every
// human answer of the admin commands takes.
func Table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// WriteJSON writes v as indented JSON followed by a newline.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteTopics renders `topic list`.
func WriteTopics(w io.Writer, ts []TopicSummary) error {
	rows := make([][]string, 0, len(ts))
	for _, t := range ts {
		rows = append(rows, []string{t.Name, fmt.Sprint(t.Partitions), fmt.Sprint(t.Replicas), t.ID})
	}
	return Table(w, []string{"NAME", "PARTITIONS", "REPLICAS", "ID"}, rows)
}

// WriteTopic renders `topic describe`.
func WriteTopic(w io.Writer, d *TopicDescription) error {
	fmt.Fprintf(w, "NAME      %s\nID        %s\nINTERNAL  %v\n\n", d.Name, d.ID, d.Internal)
	var rows [][]string
	for _, k := range sortedKeys(d.Configs) {
		rows = append(rows, []string{k, d.Configs[k]})
	}
	if len(rows) > 0 {
		if err := Table(w, []string{"CONFIG", "VALUE"}, rows); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	rows = rows[:0]
	for _, p := range d.Partitions {
		rows = append(rows, []string{fmt.Sprint(p.Partition), fmt.Sprint(p.Leader), fmt.Sprint(p.LeaderEpoch), ints(p.Replicas), ints(p.ISR), p.Error})
	}
	return Table(w, []string{"PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "ERROR"}, rows)
}

// WriteGroups renders `group list`.
func WriteGroups(w io.Writer, gs []GroupSummary) error {
	rows := make([][]string, 0, len(gs))
	for _, g := range gs {
		rows = append(rows, []string{g.Group, g.State, g.ProtocolType})
	}
	return Table(w, []string{"GROUP", "STATE", "PROTOCOL-TYPE"}, rows)
}

// WriteGroup renders `group describe`: the group, its members, then one
// row per committed partition with its lag (kafka-consumer-groups'
// columns).
func WriteGroup(w io.Writer, d *GroupDescription) error {
	fmt.Fprintf(w, "GROUP     %s\nSTATE     %s\nPROTOCOL  %s/%s\nMEMBERS   %d\n\n", d.Group, d.State, d.ProtocolType, d.Protocol, len(d.Members))
	var rows [][]string
	for _, m := range d.Members {
		var as []string
		for _, t := range sortedTopics(m.Assignment) {
			as = append(as, t+":"+ints(m.Assignment[t]))
		}
		rows = append(rows, []string{m.MemberID, m.ClientID, m.Host, strings.Join(as, " ")})
	}
	if len(rows) > 0 {
		if err := Table(w, []string{"MEMBER-ID", "CLIENT-ID", "HOST", "ASSIGNMENT"}, rows); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	rows = rows[:0]
	for _, o := range d.Offsets {
		m := o.MemberID
		if m == "" {
			m = "-"
		}
		rows = append(rows, []string{o.Topic, fmt.Sprint(o.Partition), fmt.Sprint(o.Committed), fmt.Sprint(o.LogEnd), fmt.Sprint(o.Lag), m})
	}
	return Table(w, []string{"TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID"}, rows)
}

// WriteCluster renders `cluster info`.
func WriteCluster(w io.Writer, ci *ClusterInfo) error {
	fmt.Fprintf(w, "CLUSTER-ID  %s\nCONTROLLER  %d\n\n", ci.ClusterID, ci.ControllerID)
	rows := make([][]string, 0, len(ci.Brokers))
	for _, b := range ci.Brokers {
		rows = append(rows, []string{fmt.Sprint(b.NodeID), b.Host, fmt.Sprint(b.Port), b.Rack})
	}
	return Table(w, []string{"NODE", "HOST", "PORT", "RACK"}, rows)
}

func ints(s []int32) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = fmt.Sprint(v)
	}
	return strings.Join(parts, ",")
}

func sortedTopics(m map[string][]int32) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// WriteReset renders `group reset-offsets` (kafka-consumer-groups'
// columns, with the offset committed before).
func WriteReset(w io.Writer, p *ResetPlan) error {
	rows := make([][]string, 0, len(p.Offsets))
	for _, o := range p.Offsets {
		was := "-"
		if o.Previous >= 0 {
			was = fmt.Sprint(o.Previous)
		}
		rows = append(rows, []string{p.Group, o.Topic, fmt.Sprint(o.Partition), was, fmt.Sprint(o.NewOffset)})
	}
	if err := Table(w, []string{"GROUP", "TOPIC", "PARTITION", "PREVIOUS-OFFSET", "NEW-OFFSET"}, rows); err != nil {
		return err
	}
	if !p.Executed {
		_, err := fmt.Fprintln(w, "\n(dry run: nothing committed; add --execute to commit these offsets)")
		return err
	}
	return nil
}
