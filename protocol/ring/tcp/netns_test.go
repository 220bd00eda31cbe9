package tcp_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/zooai/gym/protocol/ring/ringbench"
)

// The network-namespace test bed (ringbench.Bed: root, iproute2, HTB at
// 1 Gbit/s): one ring node process per namespace, over TLS. Opt in with
// GYM_NETNS=1; the namespaces are deleted afterwards, also after a failure.
//
// Every scenario runs four nodes in separate namespaces (each with its own
// namespace prefix); one of them (the victim) fails, the survivors' call
// fails naming it with their buffers untouched, and they retry twice
// without it on a new configuration and get the exact sum of their inputs.

// netnsTimeout is the nodes' ring timeout on the bed.
const netnsTimeout = 2 * time.Second

type netnsScenario struct {
	name   string
	tag    string // part of the namespace prefix, distinct per scenario
	victim int    // never node 0
}

// One node is killed during scatter-reduce; another scenario cuts a node's
// link during all-gather (no RST: its neighbours must time out), and after
// the survivors' first retry brings the link up again and lets the node go
// on while the survivors make their second call.
func TestNetnsKillAndCut(t *testing.T) {
	runNetns(t, []netnsScenario{
		{name: "kill-scatter", tag: "ks", victim: 2},
		{name: "cut-gather", tag: "cg", victim: 2},
	})
}

// A node is killed before the call: after it reported its address and
// before it got its order (its neighbours cannot connect: ErrNoSuccessor
// and ErrNoPredecessor name it), or right after it connected, before its
// first frame.
func TestNetnsKillBefore(t *testing.T) {
	runNetns(t, []netnsScenario{
		{name: "kill-before-order", tag: "kb", victim: 3},
		{name: "kill-connected", tag: "kc", victim: 1},
	})
}

// A node is stopped (SIGSTOP) in scatter-reduce round 1 and stays stopped
// past the ring timeout: the survivors time out naming it and retry without
// it. It is then resumed (SIGCONT) just before the survivors' second call
// on the new configuration: that call stays exact (the resumed node's
// frames of the old call cannot get into it), and the resumed node's own
// call ends with an error.
func TestNetnsPauseResume(t *testing.T) {
	runNetns(t, []netnsScenario{
		{name: "pause-scatter", tag: "ps", victim: 2},
	})
}

func runNetns(t *testing.T, scenarios []netnsScenario) {
	if os.Getenv("GYM_NETNS") != "1" {
		t.Skip("set GYM_NETNS=1 (root, iproute2) to run the network-namespace test bed")
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { sc.run(t) })
	}
}

func (sc netnsScenario) run(t *testing.T) {
	const n, length = 4, 1 << 20
	victim := sc.victim
	timeoutMs := int(netnsTimeout / time.Millisecond)
	bed := &ringbench.Bed{Prefix: fmt.Sprintf("gymrt%d-%s-", os.Getpid()%10000, sc.tag), N: n, Rate: "1gbit"}
	if err := bed.Up(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bed.Down)
	ps := startChildrenWith(t, n, func(i int) *exec.Cmd {
		cmd := bed.Exec(i, os.Args[0], "-test.run=^$")
		cmd.Env = []string{"GYM_RING_LISTEN=" + bed.Addr(i) + ":0"}
		return cmd
	})
	var addrs []string
	var all, survivors []int
	for i, p := range ps {
		addrs = append(addrs, p.addr)
		all = append(all, i)
		if i != victim {
			survivors = append(survivors, i)
		}
	}
	pred, succ := (victim+n-1)%n, (victim+1)%n

	if sc.name == "kill-before-order" {
		// It has reported its address (its listener was up) and dies
		// before it learns the configuration.
		ps[victim].cmd.Process.Kill()
		ps[victim].waitKilled(t)
	}
	victimFault := map[string]string{
		"kill-scatter":   "kill-scatter",
		"cut-gather":     "stop-gather",
		"kill-connected": "kill-connected",
		"pause-scatter":  "stop-scatter",
	}
	for i, p := range ps {
		if i == victim && sc.name == "kill-before-order" {
			continue
		}
		o := childOrder{Members: addrs, Index: all, Length: length, Step: 1, TimeoutMs: timeoutMs}
		if i == victim {
			o.Fault = victimFault[sc.name]
		}
		p.in.Encode(o)
	}
	switch sc.name {
	case "cut-gather":
		ps[victim].awaitPause(t) // blocked in its first all-gather send
		if err := bed.Cut(victim, true); err != nil {
			t.Fatal(err)
		}
	case "pause-scatter":
		ps[victim].awaitPause(t) // blocked in a scatter-reduce round-1 send
		if err := ps[victim].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		waitStopped(t, ps[victim].cmd.Process.Pid) // the node itself, not a wrapper
	}

	// The failed call: every survivor fails with its buffer untouched, and
	// the victim is named.
	named := map[int]childResult{}
	for _, i := range survivors {
		r := ps[i].result(t)
		if r.Err == "" {
			t.Fatalf("node %d succeeded without node %d: %+v", i, victim, r)
		}
		if !r.Untouched {
			t.Fatalf("node %d: the failed call changed its buffer: %+v", i, r)
		}
		if r.Suspect == victim {
			named[i] = r
		}
		t.Logf("node %d: %s", i, r.Err)
	}
	if len(named) == 0 { // the aborts cascade; at least one neighbour names it
		t.Fatalf("no survivor named node %d", victim)
	}
	switch sc.name {
	case "kill-before-order":
		// Connecting is the only thing that can fail for its neighbours,
		// and only on the victim's side.
		for _, i := range []int{pred, succ} {
			if r, ok := named[i]; !ok || !r.Connect {
				t.Fatalf("node %d (neighbour of node %d): %+v, want a connect error naming %d", i, victim, r, victim)
			}
		}
	case "pause-scatter", "cut-gather":
		if !slices.ContainsFunc(survivors, func(i int) bool { r, ok := named[i]; return ok && r.Timeout }) {
			t.Fatalf("no survivor timed out naming node %d: %+v", victim, named)
		}
	}
	switch sc.name {
	case "kill-scatter", "kill-connected":
		ps[victim].waitKilled(t)
	}

	want := make([]float32, length)
	for _, i := range survivors {
		for j, v := range childInput(i, length) {
			want[j] += v
		}
	}
	var na []string
	for _, i := range survivors {
		na = append(na, addrs[i])
	}
	retry := func(step uint64) {
		t.Helper()
		for _, i := range survivors {
			ps[i].in.Encode(childOrder{Members: na, Index: survivors, Length: length, Step: step})
		}
	}
	check := func(call string) {
		t.Helper()
		for _, i := range survivors {
			if r := ps[i].result(t); r.Err != "" || r.Hash != hashF32(want) {
				t.Fatalf("%s: node %d: %+v, want hash %s", call, i, r, hashF32(want))
			}
		}
	}
	// The orchestrator (this test) removes the victim.
	retry(1)
	check("retry")

	// The victim comes back (a paused one is still stopped, a cut one
	// still blocked in its send) just before the survivors' next call.
	switch sc.name {
	case "cut-gather":
		if err := bed.Cut(victim, false); err != nil {
			t.Fatal(err)
		}
		fallthrough
	case "pause-scatter":
		if err := ps[victim].cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	retry(2)
	switch sc.name {
	case "cut-gather", "pause-scatter":
		if r := ps[victim].result(t); r.Err == "" || !r.Untouched {
			t.Fatalf("resumed node %d: %+v, want its call failed with its buffer untouched", victim, r)
		} else {
			t.Logf("resumed node %d: %s", victim, r.Err)
		}
	}
	check("second call")
}

// waitStopped waits until process pid is stopped (state T in /proc).
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) && b[i+2] == 'T' {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d is not stopped: %s", pid, b)
		}
	}
}
