package ringbench_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/zooai/gym/ring/ringbench"
)

// netnsChild runs the helper modes of the namespace test; it reports
// whether it ran one.
func netnsChild() bool {
	switch {
	case os.Getenv("GYM_RINGBENCH_DELAY") != "":
		d, _ := time.ParseDuration(os.Getenv("GYM_RINGBENCH_DELAY"))
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		if err := ringbench.Delay(ctx, 0, d, os.Stdout); err != nil {
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
