package state

import (
	"strings"
	"testing"
)

// harnessWith is a harness over a machine with config cfg (replays still
// use testConfig: Apply does not depend on the fields tests change).
func harnessWith(t *testing.T, cfg Config) *harness {
	h := newHarness(t)
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.m, h.log = m, m.Start(h.now)
	return h
}

func wantPrefix(t *testing.T, h *harness, cmd, prefix string) {
	t.Helper()
	if got := h.run(cmd); !strings.HasPrefix(got, prefix) {
		t.Fatalf("%s: got %q, want %q…", cmd, got, prefix)
	}
}

// TestUnstakedNodesCannotFillRegistry: unstaked keys hold at most
// MaxUnstakedNodes places, so staked nodes are admitted up to MaxNodes
// however many free keys register first.
func TestUnstakedNodesCannotFillRegistry(t *testing.T) {
	cfg := testConfig()
	cfg.MaxNodes, cfg.MaxUnstakedNodes = 4, 2
	h := harnessWith(t, cfg)
	wantPrefix(t, h, "register u1", "node_registered")
	wantPrefix(t, h, "register u2", "node_registered")
	wantPrefix(t, h, "register u3", "error: state: resource exhausted: the registry holds its limit of 2 nodes without stake")
	// A known unstaked node registers again (it holds its place already).
	h.run("advance 2s")
	wantPrefix(t, h, "register u1 vram=16384", "node_registered")
	for _, s := range []string{"s1", "s2"} {
		wantPrefix(t, h, "deposit "+s+" 10000", "minted")
		wantPrefix(t, h, "bond "+s+" 10000", "bonded")
		wantPrefix(t, h, "register "+s, "node_registered")
	}
	wantPrefix(t, h, "deposit s3 10000", "minted")
	wantPrefix(t, h, "bond s3 10000", "bonded")
	wantPrefix(t, h, "register s3", "error: state: resource exhausted: the registry holds its limit of 4 nodes")
	h.checkReplay()
}

// TestNodeInJobNotExpired: a member of a running job whose stake a slash
// took below the minimum stays registered while the job holds it; once
// out of the job it expires like any unstaked node.
func TestNodeInJobNotExpired(t *testing.T) {
	h := newHarness(t)
	for _, n := range []string{"a", "b", "c"} {
		wantPrefix(t, h, "register "+n, "node_registered")
		wantPrefix(t, h, "deposit "+n+" 10000", "minted")
		wantPrefix(t, h, "bond "+n+" 10000", "bonded")
	}
	wantPrefix(t, h, "submit epochs=2 min=3 max=3 vram=16384", "job_submitted")
	h.run("advance 5s beat=a,b,c")
	wantPrefix(t, h, "bandwidth a job-00000001 b=1000 c=1000", "bandwidth_reported")
	wantPrefix(t, h, "bandwidth b job-00000001 a=1000 c=1000", "bandwidth_reported")
	wantPrefix(t, h, "bandwidth c job-00000001 a=1000 b=1000", "bandwidth_reported")
	if got := h.run("jobs"); !strings.Contains(got, "running") {
		t.Fatalf("job not running: %s", got)
	}
	wantPrefix(t, h, "slash a bad delta", "slashed") // 5%: below a node's minimum
	if out := h.run("advance 2h beat=a,b,c"); strings.Contains(out, "node_expired") {
		t.Fatalf("a member of a running job expired:\n%s", out)
	}
	if _, ok := h.m.Node(h.id("a")); !ok {
		t.Fatal("a is gone")
	}
	wantPrefix(t, h, "fail job-00000001 over", "job_transitioned")
	if out := h.run("advance 2s beat=a,b,c"); !strings.Contains(out, `node_expired {"node":"a"`) || strings.Contains(out, `"node":"b"`) {
		t.Fatalf("want a (unstaked, out of the job) expired, b and c kept:\n%s", out)
	}
	h.checkReplay()
}
