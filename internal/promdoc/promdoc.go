// Package promdoc checks that a Prometheus text exposition and the tables
// of docs/metrics.md name the same metrics with the same types, so the
// documentation cannot drift from what a process exports. For tests.
package promdoc

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

var (
	typeLine = regexp.MustCompile(`(?m)^# TYPE (\S+) (\S+)$`)
	docRow   = regexp.MustCompile("(?m)^\\| `(gym_[a-z_]+)` \\| (\\w+) \\|")
)

// Compare lists every disagreement, for the metrics whose names start
// with prefix, between exposition (what a /metrics endpoint served) and
// doc (a markdown file with rows "| `name` | type | …"). No metric of the
// prefix in the exposition is a disagreement too.
func Compare(exposition, doc []byte, prefix string) []string {
	exported, documented := map[string]string{}, map[string]string{}
	for _, m := range typeLine.FindAllSubmatch(exposition, -1) {
		if name := string(m[1]); strings.HasPrefix(name, prefix) {
			exported[name] = string(m[2])
		}
	}
	for _, m := range docRow.FindAllSubmatch(doc, -1) {
		if name := string(m[1]); strings.HasPrefix(name, prefix) {
			documented[name] = string(m[2])
		}
	}
	var out []string
	if len(exported) == 0 {
		out = append(out, fmt.Sprintf("no %s* metric exported", prefix))
	}
	for name, typ := range exported {
		if documented[name] != typ {
			out = append(out, fmt.Sprintf("%s is exported as a %s; the doc says %q", name, typ, documented[name]))
		}
	}
	for name := range documented {
		if _, ok := exported[name]; !ok {
			out = append(out, fmt.Sprintf("the doc lists %s, which is not exported", name))
		}
	}
	sort.Strings(out)
	return out
}
