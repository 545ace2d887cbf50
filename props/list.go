package props

import "strings"

// List splits a value of Kafka's LIST type: comma-separated items with
// the blanks around them trimmed, empty items dropped.
func List(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
