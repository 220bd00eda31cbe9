package ringbench_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zooai/gym/protocol/ring/ringbench"
)

// netnsChild runs the helper modes of the namespace test; it reports
// whether it ran one.
func netnsChild() bool {
	switch {
	case os.Getenv("GYM_RINGBENCH_DELAY") != "":
		d, _ := time.ParseDuration(os.Getenv("GYM_RINGBENCH_DELAY"))
		loss, _ := strconv.ParseFloat(os.Getenv("GYM_RINGBENCH_LOSS"), 64)
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		q, _ := strconv.Atoi(os.Getenv("GYM_RINGBENCH_QUEUE")) // 0 unless set
		if err := ringbench.Impair(ctx, uint16(q), ringbench.Impairment{Delay: d, Loss: loss, Seed: lossSeed}, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case os.Getenv("GYM_RINGBENCH_LISTEN") != "":
		ln, err := net.Listen("tcp", os.Getenv("GYM_RINGBENCH_LISTEN"))
		if err != nil {
			os.Exit(1)
		}
		for {
			c, err := ln.Accept()
			if err != nil {
				os.Exit(1)
			}
			c.Close()
		}
	case os.Getenv("GYM_RINGBENCH_UDPRECV") != "":
		// count datagrams until 1 s without one
		c, err := net.ListenPacket("udp", os.Getenv("GYM_RINGBENCH_UDPRECV"))
		if err != nil {
			os.Exit(1)
		}
		fmt.Println("ready")
		buf := make([]byte, 2048)
		n := 0
		for {
			c.SetReadDeadline(time.Now().Add(time.Second))
			if _, _, err := c.ReadFrom(buf); err != nil {
				break
			}
			n++
		}
		fmt.Println(n)
	case os.Getenv("GYM_RINGBENCH_UDPSEND") != "":
		c, err := net.Dial("udp", os.Getenv("GYM_RINGBENCH_UDPSEND"))
		if err != nil {
			os.Exit(1)
		}
		msg := make([]byte, 200)
		for i := range udpPackets {
			c.Write(msg)
			if i%50 == 49 {
				time.Sleep(time.Millisecond) // stay below the receiver's buffer
			}
		}
	case os.Getenv("GYM_RINGBENCH_DIAL") != "":
		t0 := time.Now()
		c, err := net.DialTimeout("tcp", os.Getenv("GYM_RINGBENCH_DIAL"), 2*time.Second)
		if err != nil {
			os.Exit(1)
		}
		fmt.Println(time.Since(t0))
		c.Close()
	default:
		return false
	}
	return true
}

// The bed's delayer adds the one-way delay where packets cross the bridge:
// a TCP connect between namespaces takes one round trip, about twice the
// delay. Opt in with GYM_NETNS=1 (root, iproute2, iptables).
func TestNetnsDelay(t *testing.T) {
	if os.Getenv("GYM_NETNS") != "1" {
		t.Skip("set GYM_NETNS=1 (root, iproute2, iptables) to run the network-namespace test bed")
	}
	const delay = 15 * time.Millisecond
	bed := &ringbench.Bed{Prefix: fmt.Sprintf("gymrd%d-", os.Getpid()%10000), N: 2, Delay: delay,
		Delayer: []string{"env", "GYM_RINGBENCH_DELAY=" + delay.String(), os.Args[0], "-test.run=^$"}}
	if err := bed.Up(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bed.Down)
	addr := bed.Addr(1) + ":7777"
	ln := bed.Exec(1, "env", "GYM_RINGBENCH_LISTEN="+addr, os.Args[0], "-test.run=^$")
	if err := ln.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { ln.Process.Kill(); ln.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	var best time.Duration
	for n := 0; n < 3; {
		out, err := bed.Exec(0, "env", "GYM_RINGBENCH_DIAL="+addr, os.Args[0], "-test.run=^$").Output()
		if err != nil {
			if time.Now().After(deadline) {
				t.Fatal("no connection through the bed")
			}
			time.Sleep(50 * time.Millisecond) // the listener is starting
			continue
		}
		n++
		var rtt time.Duration
		if rtt, err = time.ParseDuration(string(out[:len(out)-1])); err != nil {
			t.Fatal(err)
		}
		if best == 0 || rtt < best {
			best = rtt
		}
	}
	if best < 2*delay || best > 2*delay+10*time.Millisecond {
		t.Fatalf("connect took %v, want about 2 × %v", best, delay)
	}
	t.Logf("connect round trip %v with %v one-way delay", best, delay)
}

// connectRTT returns the shortest of three TCP connects from node a to a
// listener on node b of bed.
func connectRTT(t *testing.T, bed *ringbench.Bed, a, b int) time.Duration {
	t.Helper()
	addr := bed.Addr(b) + ":7777"
	ln := bed.Exec(b, "env", "GYM_RINGBENCH_LISTEN="+addr, os.Args[0], "-test.run=^$")
	if err := ln.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { ln.Process.Kill(); ln.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	var best time.Duration
	for n := 0; n < 3; {
		out, err := bed.Exec(a, "env", "GYM_RINGBENCH_DIAL="+addr, os.Args[0], "-test.run=^$").Output()
		if err != nil {
			if time.Now().After(deadline) {
				t.Fatal("no connection through the bed")
			}
			time.Sleep(50 * time.Millisecond) // the listener is starting
			continue
		}
		n++
		rtt, err := time.ParseDuration(string(out[:len(out)-1]))
		if err != nil {
			t.Fatal(err)
		}
		if best == 0 || rtt < best {
			best = rtt
		}
	}
	return best
}

// With groups, packets between two nodes of a group get the group delay
// (NFQUEUE 1) and the others the delay between groups (queue 0): the
// wide-area bed of `gym ring bench --topology hierarchical`.
func TestNetnsGroupDelay(t *testing.T) {
	if os.Getenv("GYM_NETNS") != "1" {
		t.Skip("set GYM_NETNS=1 (root, iproute2, iptables) to run the network-namespace test bed")
	}
	const in, between = 5 * time.Millisecond, 30 * time.Millisecond
	bed := &ringbench.Bed{Prefix: fmt.Sprintf("gymrg%d-", os.Getpid()%10000), N: 3, Delay: between,
		Delayer: []string{"env", "GYM_RINGBENCH_DELAY=" + between.String(), os.Args[0], "-test.run=^$"},
		Groups:  []int{2, 1}, GroupDelay: in,
		GroupDelayer: []string{"env", "GYM_RINGBENCH_DELAY=" + in.String(), "GYM_RINGBENCH_QUEUE=1", os.Args[0], "-test.run=^$"}}
	if err := bed.Up(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bed.Down)
	for _, c := range []struct {
		a, b int
		d    time.Duration
	}{{0, 1, in}, {1, 0, in}, {0, 2, between}, {2, 1, between}} {
		if rtt := connectRTT(t, bed, c.a, c.b); rtt < 2*c.d || rtt > 2*c.d+10*time.Millisecond {
			t.Fatalf("%d → %d: connect took %v, want about 2 × %v", c.a, c.b, rtt, c.d)
		}
	}
}

const (
	udpPackets = 4000
	lossSeed   = 7
)

// The bed's delayer drops the configured fraction of the packets crossing
// the bridge, picked by the seeded PRNG: with nothing else crossing, the
// datagrams lost are exactly the ones Dropper picks. Then a 3-node ring with
// 1 % loss on every crossing still gets the exact sum (TCP retransmits; no
// frame is dropped as invalid). Opt in with GYM_NETNS=1 (root, iproute2,
// iptables).
func TestNetnsLoss(t *testing.T) {
	if os.Getenv("GYM_NETNS") != "1" {
		t.Skip("set GYM_NETNS=1 (root, iproute2, iptables) to run the network-namespace test bed")
	}
	t.Run("drop-rate", func(t *testing.T) {
		const loss = 0.05
		bed := &ringbench.Bed{Prefix: fmt.Sprintf("gymrl%d-", os.Getpid()%10000), N: 2, Loss: loss,
			Delayer: []string{"env", "GYM_RINGBENCH_DELAY=0s", fmt.Sprint("GYM_RINGBENCH_LOSS=", loss), os.Args[0], "-test.run=^$"}}
		if err := bed.Up(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(bed.Down)
		addr := bed.Addr(1) + ":7778"
		rc := bed.Exec(1, "env", "GYM_RINGBENCH_UDPRECV="+addr, os.Args[0], "-test.run=^$")
		out, err := rc.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := rc.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { rc.Process.Kill(); rc.Wait() }()
		sc := bufio.NewScanner(out)
		if !sc.Scan() || sc.Text() != "ready" {
			t.Fatal("receiver did not start")
		}
		if err := bed.Exec(0, "env", "GYM_RINGBENCH_UDPSEND="+addr, os.Args[0], "-test.run=^$").Run(); err != nil {
			t.Fatal(err)
		}
		if !sc.Scan() {
			t.Fatal("receiver gave no count")
		}
		got, _ := strconv.Atoi(sc.Text())
		drop, want := ringbench.Dropper(loss, lossSeed), 0
		for range udpPackets {
			if !drop() {
				want++
			}
		}
		rate := 1 - float64(got)/udpPackets
		if got != want {
			t.Fatalf("%d of %d datagrams arrived (loss %.2f %%), the seeded PRNG drops %d", got, udpPackets, 100*rate, udpPackets-want)
		}
		t.Logf("%d of %d datagrams arrived: loss %.2f %% (configured %.2f %%), exactly the PRNG's picks", got, udpPackets, 100*rate, 100*loss)
	})
	t.Run("ring-correct", func(t *testing.T) {
		const loss = 0.01
		bed := &ringbench.Bed{Prefix: fmt.Sprintf("gymrl%d-", os.Getpid()%10000), N: 3, Rate: "1gbit", Loss: loss,
			Delay:   2 * time.Millisecond,
			Delayer: []string{"env", "GYM_RINGBENCH_DELAY=2ms", fmt.Sprint("GYM_RINGBENCH_LOSS=", loss), os.Args[0], "-test.run=^$"}}
		if err := bed.Up(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(bed.Down)
		cfg := ringbench.Config{Nodes: 3, Sizes: []int64{4, 40004, 4 << 20}, Iters: 3, Auth: true, TLS: true, Wire: "fp32",
			Streams: 2, Timeout: 20 * time.Second}
		for i := range cfg.Nodes {
			cfg.Listen = append(cfg.Listen, bed.Addr(i))
		}
		conf, _ := json.Marshal(cfg)
		res, err := ringbench.Run(t.Context(), cfg, func(rank int) *exec.Cmd {
			cmd := bed.Exec(rank, "env", "GYM_RINGBENCH_NODE="+string(conf), "GYM_RINGBENCH_RANK="+strconv.Itoa(rank),
				os.Args[0], "-test.run=^$")
			cmd.Stderr = os.Stderr
			return cmd
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if !r.Correct {
				t.Fatalf("wrong sum under %.0f %% loss: %+v", 100*loss, r)
			}
			t.Logf("%d bytes under %.0f %% loss: median %.1f ms, correct", r.Bytes, 100*loss, 1e3*r.SecondsMedian)
		}
		var retrans, sent int
		for i := range cfg.Nodes {
			out, err := bed.Exec(i, "cat", "/proc/net/snmp").Output()
			if err != nil {
				t.Fatal(err)
			}
			s, r := tcpCounters(t, string(out))
			sent, retrans = sent+s, retrans+r
		}
		if retrans == 0 {
			t.Fatalf("no TCP retransmission in %d segments: the loss did not reach the ring", sent)
		}
		t.Logf("TCP: %d segments sent, %d retransmitted (%.2f %%)", sent, retrans, 100*float64(retrans)/float64(sent))
	})
}

// tcpCounters reads OutSegs and RetransSegs from /proc/net/snmp.
func tcpCounters(t *testing.T, snmp string) (out, retrans int) {
	var names []string
	for _, l := range strings.Split(snmp, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != "Tcp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, v := range f {
			if i < len(names) {
				n, _ := strconv.Atoi(v)
				switch names[i] {
				case "OutSegs":
					out = n
				case "RetransSegs":
					retrans = n
				}
			}
		}
	}
	if names == nil {
		t.Fatal("no Tcp counters in /proc/net/snmp")
	}
	return out, retrans
}
