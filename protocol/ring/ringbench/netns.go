package ringbench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Bed is a network-namespace test bed: N namespaces Prefix0..Prefix{N-1},
// each with interface eth0 (10.98.7.i+1/24) on a veth into bridge br0 in
// the namespace Prefix+"sw". With Rate set, every node's eth0 is shaped
// with HTB (a 16 KiB bucket and a 1000-packet FIFO: this kernel has no
// netem, and TBF with a small bucket drops GSO packets; see
// ../shared/bench/README.md). It needs root and iproute2.
type Bed struct {
	Prefix string
	N      int
	Rate   string // tc rate, e.g. "1gbit"; empty: unshaped
	// Delay, when > 0, is added one way to every packet crossing the
	// bridge, by Delayer (argv of a program running Delay on NFQUEUE 0,
	// e.g. `gym ring nfqdelay --delay 20ms`) started in the switch
	// namespace behind an iptables NFQUEUE rule. Needs iptables.
	Delay time.Duration
	// Loss, when > 0, is the fraction of packets crossing the bridge that
	// the Delayer drops (it must be told the same loss, e.g. `gym ring
	// nfqdelay --loss 0.001`); it only makes Up start the Delayer.
	Loss    float64
	Delayer []string
	// Groups, when set (sizes of consecutive nodes' groups), gives packets
	// between two nodes of the same group GroupDelay instead of Delay: they
	// go to NFQUEUE 1, served by GroupDelayer (e.g. `gym ring nfqdelay
	// --delay 2ms --queue 1`); the rest to queue 0 as before. A wide-area
	// bed of sites: Delay between groups, GroupDelay inside them.
	Groups       []int
	GroupDelay   time.Duration
	GroupDelayer []string

	delayers []*exec.Cmd
}

// NS is the namespace of node i.
func (b *Bed) NS(i int) string { return fmt.Sprintf("%s%d", b.Prefix, i) }

// Addr is node i's address.
func (b *Bed) Addr(i int) string { return fmt.Sprintf("10.98.7.%d", i+1) }

// Exec returns a command that runs name in node i's namespace.
func (b *Bed) Exec(i int, name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", b.NS(i), name}, args...)...)
}

func ip(args ...string) error {
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("ringbench: %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Up creates the bed (after removing any leftovers with the same prefix).
// On error it removes what it made.
func (b *Bed) Up() (err error) {
	if b.Prefix == "" || b.N < 1 || b.N > 250 {
		return errors.New("ringbench: bed needs a prefix and 1..250 nodes")
	}
	b.Down()
	defer func() {
		if err != nil {
			b.Down()
		}
	}()
	sw := b.Prefix + "sw"
	for _, c := range [][]string{
		{"ip", "netns", "add", sw},
		{"ip", "-n", sw, "link", "add", "br0", "type", "bridge"},
		{"ip", "-n", sw, "link", "set", "br0", "up"},
	} {
		if err := ip(c...); err != nil {
			return err
		}
	}
	for i := range b.N {
		ns, port := b.NS(i), fmt.Sprint("p", i)
		cmds := [][]string{
			{"ip", "netns", "add", ns},
			{"ip", "-n", ns, "link", "set", "lo", "up"},
			{"ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", sw},
			{"ip", "-n", sw, "link", "set", port, "master", "br0", "up"},
			{"ip", "-n", ns, "addr", "add", b.Addr(i) + "/24", "dev", "eth0"},
			{"ip", "-n", ns, "link", "set", "eth0", "up"},
		}
		if b.Rate != "" {
			tc := []string{"ip", "netns", "exec", ns, "tc"}
			cmds = append(cmds,
				append(tc[:len(tc):len(tc)], "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "1", "r2q", "1000"),
				append(tc[:len(tc):len(tc)], "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:1", "htb",
					"rate", b.Rate, "ceil", b.Rate, "burst", "16k", "cburst", "16k"),
				append(tc[:len(tc):len(tc)], "qdisc", "add", "dev", "eth0", "parent", "1:1", "handle", "10:", "pfifo", "limit", "1000"))
		}
		for _, c := range cmds {
			if err := ip(c...); err != nil {
				return err
			}
		}
	}
	if b.Groups != nil {
		sum := 0
		for _, g := range b.Groups {
			sum += g
		}
		if sum != b.N || len(b.Groups) < 2 || b.Delay <= 0 || len(b.GroupDelayer) == 0 {
			return fmt.Errorf("ringbench: groups %v of %d nodes need ≥ 2 groups summing to the nodes, a delay between them and a group delayer", b.Groups, b.N)
		}
	}
	if b.Delay > 0 || b.Loss > 0 {
		return b.startDelayers(sw)
	}
	return nil
}

func (b *Bed) startDelayers(sw string) error {
	if len(b.Delayer) == 0 {
		return errors.New("ringbench: a delay or loss needs a Delayer command")
	}
	cmds := [][]string{{"ip", "netns", "exec", sw, "sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1"}}
	start := 0
	for _, g := range b.Groups { // inside a group: queue 1
		r := b.Addr(start) + "-" + b.Addr(start+g-1)
		cmds = append(cmds, []string{"ip", "netns", "exec", sw, "iptables", "-A", "FORWARD", "-m", "iprange",
			"--src-range", r, "--dst-range", r, "-j", "NFQUEUE", "--queue-num", "1"})
		start += g
	}
	cmds = append(cmds, []string{"ip", "netns", "exec", sw, "iptables", "-A", "FORWARD", "-j", "NFQUEUE", "--queue-num", "0"})
	for _, c := range cmds {
		if err := ip(c...); err != nil {
			return err
		}
	}
	if err := b.startDelayer(sw, b.Delayer); err != nil {
		return err
	}
	if b.Groups != nil {
		return b.startDelayer(sw, b.GroupDelayer)
	}
	return nil
}

func (b *Bed) startDelayer(sw string, argv []string) error {
	cmd := exec.Command("ip", append([]string{"netns", "exec", sw}, argv...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	b.delayers = append(b.delayers, cmd)
	line, err := bufio.NewReader(out).ReadString('\n') // "nfqdelay: queue 0, …" once bound
	if err != nil || !strings.HasPrefix(line, "nfqdelay: queue") {
		return fmt.Errorf("ringbench: delayer did not start: %q %v", line, err)
	}
	go io.Copy(io.Discard, out)
	return nil
}

// Cut takes node i's link down (no RST reaches its peers) or up again.
func (b *Bed) Cut(i int, cut bool) error {
	state := "up"
	if cut {
		state = "down"
	}
	return ip("ip", "-n", b.NS(i), "link", "set", "eth0", state)
}

// Down stops the delayers it started and deletes every namespace whose
// name starts with the prefix.
func (b *Bed) Down() {
	for _, d := range b.delayers {
		d.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { d.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			d.Process.Kill()
			<-done
		}
	}
	b.delayers = nil
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], b.Prefix) {
			exec.Command("ip", "netns", "del", f[0]).Run()
		}
	}
}
