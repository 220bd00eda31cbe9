package state

import (
	"slices"
	"strings"
	"testing"
)

// With Ring.Groups the built ring is a two-level one: the event carries
// balanced groups (bound into the configuration id), a member removed
// leaves its group one smaller, and only its two neighbours in its
// group's ring remove a member — reports from across groups (a shard
// ring's cascade) do not.
func TestRingGroups(t *testing.T) {
	cfg := testConfig()
	cfg.Ring.Groups = 2
	h := harnessWith(t, cfg)
	names := []string{"a", "b", "c", "d", "e", "f"}
	for _, n := range names {
		h.run("register " + n + " vram=24576")
		h.run("deposit " + n + " 10000")
		h.run("bond " + n + " 10000")
	}
	h.run("submit epochs=2 min=6 max=6 steps=100")
	const job = "job-00000001"
	for _, n := range names {
		var links []string
		for _, p := range names {
			if p != n {
				links = append(links, p+"=1000")
			}
		}
		h.run("bandwidth " + n + " " + job + " " + strings.Join(links, " "))
	}
	j, ok := h.m.Job(job)
	if !ok || j.State != Running {
		t.Fatalf("job %+v not running", j.State)
	}
	if !slices.Equal(j.RingGroups, []int{3, 3}) {
		t.Fatalf("groups %v, want [3 3]", j.RingGroups)
	}
	if j.ConfigID != ConfigID(job, j.Generation, j.Ring, 3, 3) || j.ConfigID == ConfigID(job, j.Generation, j.Ring) {
		t.Fatal("the configuration id does not bind the groups")
	}
	name := func(id string) string {
		for _, n := range names {
			if h.id(n) == id {
				return n
			}
		}
		t.Fatalf("unknown id %s", id)
		return ""
	}
	// The last member of group 0: its flat-order successor is in group 1,
	// its group-ring successor is the group's first member.
	x, first, second, next := name(j.Ring[2]), name(j.Ring[0]), name(j.Ring[1]), name(j.Ring[3])
	h.run("suspect " + next + " " + job + " " + x + " timeout")
	h.run("suspect " + second + " " + job + " " + x + " timeout")
	if j, _ := h.m.Job(job); !slices.Contains(j.Ring, h.id(x)) {
		t.Fatal("removed by a report from another group")
	}
	h.run("suspect " + first + " " + job + " " + x + " timeout")
	j, _ = h.m.Job(job)
	if slices.Contains(j.Ring, h.id(x)) {
		t.Fatalf("%s is still in the ring after both group neighbours named it", x)
	}
	if !slices.Equal(j.RingGroups, []int{2, 3}) || len(j.Ring) != 5 {
		t.Fatalf("after the removal: ring of %d, groups %v; want its group one smaller", len(j.Ring), j.RingGroups)
	}
}
