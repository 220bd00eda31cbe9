package state

import (
	"fmt"
	"strings"

	"github.com/zooai/gym/protocol/hardware"
)

// NodeFit is one node's eligibility for a job: how it would run it (Fit)
// and, when it cannot take it, why (Why, with the numbers). Busy is the
// job it is in, when another.
type NodeFit struct {
	Node string
	Fit  hardware.Fit
	Why  string
	Busy string
}

// Eligibility is every registered node's fit for job j at time now, in
// node id order (a view: nothing is decided or logged).
func (m *Machine) Eligibility(j *Job, now int64) []NodeFit {
	out := make([]NodeFit, 0, len(m.ids))
	for _, id := range m.nodeIDs() {
		n := m.nodes[id]
		f, why := m.JobFit(n, j, now)
		nf := NodeFit{Node: id, Fit: f, Why: why}
		if n.Job != "" && n.Job != j.ID {
			nf.Busy = n.Job
		}
		out = append(out, nf)
	}
	return out
}

// PendingReason says why Pending job j waits, with the numbers: how many
// eligible nodes it needs, how many there are and how many of them are
// busy, and the reasons the others are not eligible (the most common
// first, with one node each names). "" when j is not Pending.
func (m *Machine) PendingReason(j *Job, now int64) string {
	if j.State != Pending {
		return ""
	}
	fits := m.Eligibility(j, now)
	eligible, idle := 0, 0
	type group struct {
		why   string
		nodes []string
	}
	var groups []*group
	byWhy := map[string]*group{}
	for _, f := range fits {
		if f.Why == "" {
			eligible++
			if f.Busy == "" {
				idle++
			}
			continue
		}
		// Group by the reason without its numbers' node-specific part:
		// the full text of the first node stands for the group.
		key := reasonKind(f.Why)
		g := byWhy[key]
		if g == nil {
			g = &group{why: f.Why}
			byWhy[key] = g
			groups = append(groups, g)
		}
		g.nodes = append(g.nodes, f.Node)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "needs %d eligible idle nodes: %d of %d registered are eligible", j.Spec.MinNodes, eligible, len(fits))
	if eligible > idle {
		fmt.Fprintf(&b, " (%d busy in other jobs)", eligible-idle)
	}
	if j.Shape == nil {
		b.WriteString("; no memory estimate (hanzod has not read the base's config.json: publish the base into its artifact store), matched by min_vram_mib alone")
	}
	for _, g := range groups {
		fmt.Fprintf(&b, "; %d ineligible: %s (node %s", len(g.nodes), g.why, short(g.nodes[0]))
		if len(g.nodes) > 1 {
			fmt.Fprintf(&b, " and %d more", len(g.nodes)-1)
		}
		b.WriteString(")")
	}
	if len(fits) == 0 {
		b.WriteString("; no node has registered")
	}
	return b.String()
}

// reasonKind is the first words of a reason, up to its first colon or
// digit: "memory", "bonded stake", "backend torch", …
func reasonKind(why string) string {
	if i := strings.IndexAny(why, ":0123456789"); i > 0 {
		return strings.TrimSpace(why[:i])
	}
	return why
}

// short is a node id's first 12 characters.
func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
