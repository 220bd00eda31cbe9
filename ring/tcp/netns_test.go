package tcp_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/zooai/gym/ring/ringbench"
)

// The network-namespace test bed (ringbench.Bed: root, iproute2, HTB at
// 1 Gbit/s): one ring node process per namespace, over TLS. Opt in with
// GYM_NETNS=1; the namespaces are deleted afterwards, also after a failure.
//
// Nodes in separate namespaces over shaped links: one is killed during
// scatter-reduce, another scenario cuts a node's link during all-gather
// (no RST: its neighbours must time out); survivors retry without it and
// get the exact sum.
func TestNetnsKillAndCut(t *testing.T) {
	if os.Getenv("GYM_NETNS") != "1" {
		t.Skip("set GYM_NETNS=1 (root, iproute2) to run the network-namespace test bed")
	}
	const n, victim, length = 4, 2, 1 << 20
	for _, fault := range []string{"kill-scatter", "cut-gather"} {
		t.Run(fault, func(t *testing.T) {
			bed := &ringbench.Bed{Prefix: fmt.Sprintf("gymrt%d-", os.Getpid()%10000), N: n, Rate: "1gbit"}
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
			for _, p := range ps {
				addrs = append(addrs, p.addr)
			}
			for i, p := range ps {
				o := childOrder{Members: addrs, Index: []int{0, 1, 2, 3}, Length: length, Step: 1}
				if i == victim {
					o.Fault = strings.Replace(fault, "cut-gather", "stop-gather", 1)
				}
				p.in.Encode(o)
			}
			if fault == "cut-gather" {
				if !ps[victim].out.Scan() || !strings.Contains(ps[victim].out.Text(), "pause_me") {
					t.Fatal("victim did not reach all-gather")
				}
				if err := bed.Cut(victim, true); err != nil {
					t.Fatal(err)
				}
			}
			survivors := []int{0, 1, 3}
			named := 0
			for _, i := range survivors {
				r := ps[i].result(t)
				if r.Err == "" || !r.Untouched {
					t.Fatalf("node %d: %+v", i, r)
				}
				if r.Suspect == victim {
					named++
				}
			}
			if named == 0 {
				t.Fatalf("no survivor named node %d", victim)
			}
			na := []string{addrs[0], addrs[1], addrs[3]}
			for _, i := range survivors {
				ps[i].in.Encode(childOrder{Members: na, Index: survivors, Length: length, Step: 1})
			}
			want := make([]float32, length)
			for _, i := range survivors {
				for j, v := range childInput(i, length) {
					want[j] += v
				}
			}
			for _, i := range survivors {
				if r := ps[i].result(t); r.Err != "" || r.Hash != hashF32(want) {
					t.Fatalf("retry: node %d: %+v", i, r)
				}
			}
			if fault == "cut-gather" {
				ps[victim].cmd.Process.Signal(syscall.SIGCONT)
			}
		})
	}
}
