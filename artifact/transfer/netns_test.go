package transfer

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/store"
)

// The network-namespace test bed: three serving hosts and one fetching
// host on a bridge, each host's egress shaped to 1 Gbit/s with 20 ms of
// one-way delay (where the kernel has netem), and the fetcher's ingress to
// 1 Gbit/s. Every host is a
// separate process (this test binary re-executed in the namespace, see
// TestNetnsHelper). It needs root and iproute2, takes about a minute, and
// runs only with GYM_NETNS=1:
//
//	sudo GYM_NETNS=1 go test -run Netns -v ./artifact/transfer
//
// GYM_NETNS_MIB sets the artifact size (default 128).
func TestNetnsTransfer(t *testing.T) {
	if os.Getenv("GYM_NETNS") != "1" {
		t.Skip("set GYM_NETNS=1 (as root) to run the namespace test bed")
	}
	if os.Geteuid() != 0 {
		t.Fatal("GYM_NETNS=1 needs root")
	}
	mib := 128
	if s := os.Getenv("GYM_NETNS_MIB"); s != "" {
		mib, _ = strconv.Atoi(s)
	}
	tag := strconv.Itoa(os.Getpid() % 100000)
	sw := "gymsw" + tag
	hosts := []string{"gymh1" + tag, "gymh2" + tag, "gymh3" + tag, "gymh4" + tag}
	addr := func(i int) string { return fmt.Sprintf("10.231.7.%d", i+1) }
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v\n%s", args, err, out)
		}
	}
	for _, ns := range append([]string{sw}, hosts...) {
		ip("netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	}
	ip("-n", sw, "link", "add", "br0", "type", "bridge")
	ip("-n", sw, "link", "set", "br0", "up")
	for i, h := range hosts {
		port := fmt.Sprintf("p%d", i+1)
		ip("-n", h, "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", sw)
		ip("-n", sw, "link", "set", port, "master", "br0", "up")
		ip("-n", h, "addr", "add", addr(i)+"/24", "dev", "eth0")
		ip("-n", h, "link", "set", "eth0", "up")
		ip("-n", h, "link", "set", "lo", "up")
		shape(t, h, "eth0", true)
	}
	shape(t, sw, "p4", false)

	// The artifact, published once and copied to the three servers.
	ctx := context.Background()
	srcDir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(srcDir, "weights.bin"), randBytes(42, mib<<20), 0o644))
	must(t, os.WriteFile(filepath.Join(srcDir, "config.json"), []byte(`{"netns":true}`), 0o644))
	base := t.TempDir()
	st, err := store.Open(store.DefaultConfig(filepath.Join(base, "s1")))
	must(t, err)
	rec, err := st.Publish(ctx, srcDir, store.Meta{Kind: artifact.KindCheckpoint, Name: "netns"}, publisherKey, time.Now())
	must(t, err)
	st.Close()
	for _, d := range []string{"s2", "s3"} {
		must(t, exec.Command("cp", "-a", filepath.Join(base, "s1"), filepath.Join(base, d)).Run())
	}

	self, err := os.Executable()
	must(t, err)
	helper := func(ns string, env ...string) (*exec.Cmd, *bufio.Reader) {
		cmd := exec.Command("ip", "netns", "exec", ns, self, "-test.run=^TestNetnsHelper$")
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.StdoutPipe()
		must(t, err)
		cmd.Stderr = os.Stderr
		must(t, cmd.Start())
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd, bufio.NewReader(out)
	}
	line := func(r *bufio.Reader) string {
		t.Helper()
		s, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("helper: %v", err)
		}
		return strings.TrimSpace(s)
	}
	var servers []*exec.Cmd
	var peers []string
	for i := range 3 {
		cmd, out := helper(hosts[i], "GYM_NETNS_HELPER=serve", "GYM_STORE="+filepath.Join(base, fmt.Sprintf("s%d", i+1)),
			fmt.Sprintf("GYM_KEY=%d", i+1), "GYM_LISTEN="+addr(i)+":4780")
		if got := line(out); got != "ready" {
			t.Fatalf("server %d: %q", i, got)
		}
		servers = append(servers, cmd)
		peers = append(peers, fmt.Sprintf("%x@%s:4780", []byte(pub(key(byte(i+1)))), addr(i)))
	}

	// Raw TCP, one stream, server 1 → fetcher: the baseline.
	_, sink := helper(hosts[0], "GYM_NETNS_HELPER=tcpsend", "GYM_LISTEN="+addr(0)+":4781", fmt.Sprintf("GYM_BYTES=%d", mib<<20))
	if got := line(sink); got != "ready" {
		t.Fatalf("tcpsend: %q", got)
	}
	_, recv := helper(hosts[3], "GYM_NETNS_HELPER=tcprecv", "GYM_PEERS="+addr(0)+":4781")
	tcpMBps, _ := strconv.ParseFloat(line(recv), 64)
	t.Logf("raw TCP, 1 stream: %.1f MB/s (%.0f Mbit/s)", tcpMBps, tcpMBps*8)

	fetch := func(name string, peers []string, killAfter time.Duration, kill *exec.Cmd) Stats {
		t.Helper()
		_, out := helper(hosts[3], "GYM_NETNS_HELPER=fetch", "GYM_STORE="+filepath.Join(base, name), "GYM_ROOT="+rec.Root,
			"GYM_PEERS="+strings.Join(peers, ","))
		if kill != nil {
			time.Sleep(killAfter)
			kill.Process.Kill()
		}
		var res struct {
			Stats
			Err string
		}
		must(t, json.Unmarshal([]byte(line(out)), &res))
		if res.Err != "" {
			t.Fatalf("%s: %s", name, res.Err)
		}
		mbps := float64(res.Bytes) / res.Elapsed.Seconds() / 1e6
		t.Logf("%s: %d blocks, %.1f MB/s (%.0f Mbit/s, %.2f × raw TCP) in %v, per source %v",
			name, res.Fetched, mbps, mbps*8, mbps/tcpMBps, res.Elapsed.Round(time.Millisecond), res.PerSource)
		dst, err := store.Open(store.DefaultConfig(filepath.Join(base, name)))
		must(t, err)
		defer dst.Close()
		root, _ := cid.Decode(rec.Root)
		exp := filepath.Join(t.TempDir(), "out")
		must(t, dst.Export(ctx, root, exp, ""))
		a, _ := os.ReadFile(filepath.Join(srcDir, "weights.bin"))
		b, _ := os.ReadFile(filepath.Join(exp, "weights.bin"))
		if string(a) != string(b) {
			t.Fatalf("%s: transferred bytes differ", name)
		}
		return res.Stats
	}
	fetch("one-source", peers[:1], 0, nil)
	fetch("three-sources", peers, 0, nil)
	st3 := fetch("three-sources-one-killed", peers, 300*time.Millisecond, servers[1])
	if st3.SourcesLeft != 2 {
		t.Errorf("after the kill %d sources were left", st3.SourcesLeft)
	}
}

// shape limits dev's egress to 1 Gbit/s, with 20 ms of delay if asked.
// Kernels without netem (this workplace's) get tbf: the rate, no delay.
func shape(t *testing.T, ns, dev string, delay bool) {
	t.Helper()
	args := []string{"netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "netem", "rate", "1gbit", "limit", "100000"}
	if delay {
		args = append(args, "delay", "20ms")
	}
	if exec.Command("ip", args...).Run() == nil {
		return
	}
	if delay && strings.HasPrefix(ns, "gymh1") {
		t.Log("netem is not available in this kernel: shaping the rate only (tbf), without the 20 ms delay")
	}
	out, err := exec.Command("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", "1gbit", "burst", "1mb", "latency", "50ms").CombinedOutput()
	if err != nil {
		t.Fatalf("tc tbf: %v\n%s", err, out)
	}
}

// TestNetnsHelper is one host of TestNetnsTransfer, run in its namespace.
func TestNetnsHelper(t *testing.T) {
	mode := os.Getenv("GYM_NETNS_HELPER")
	if mode == "" {
		t.Skip("runs only as a host of TestNetnsTransfer")
	}
	ctx := context.Background()
	switch mode {
	case "serve":
		st, err := store.Open(store.DefaultConfig(os.Getenv("GYM_STORE")))
		must(t, err)
		seed, _ := strconv.Atoi(os.Getenv("GYM_KEY"))
		s, err := NewServer(ServerConfig{Key: key(byte(seed)), Store: st, Allow: AllowKeys(pub(fetcherKey))})
		must(t, err)
		ln, err := net.Listen("tcp", os.Getenv("GYM_LISTEN"))
		must(t, err)
		fmt.Println("ready")
		http.Serve(ln, s)
	case "tcpsend":
		ln, err := net.Listen("tcp", os.Getenv("GYM_LISTEN"))
		must(t, err)
		fmt.Println("ready")
		c, err := ln.Accept()
		must(t, err)
		n, _ := strconv.Atoi(os.Getenv("GYM_BYTES"))
		io.CopyN(c, zeros{}, int64(n))
		c.Close()
	case "tcprecv":
		start := time.Now()
		c, err := net.Dial("tcp", os.Getenv("GYM_PEERS"))
		must(t, err)
		n, _ := io.Copy(io.Discard, c)
		fmt.Println(float64(n) / time.Since(start).Seconds() / 1e6)
	case "fetch":
		st, err := store.Open(store.DefaultConfig(os.Getenv("GYM_STORE")))
		must(t, err)
		defer st.Close()
		c := &Client{Key: fetcherKey, HTTP: &http.Client{Transport: NewTransport()}}
		var peers []Peer
		for _, s := range strings.Split(os.Getenv("GYM_PEERS"), ",") {
			p, err := ParsePeer(s)
			must(t, err)
			peers = append(peers, p)
		}
		root, _ := cid.Decode(os.Getenv("GYM_ROOT"))
		t0 := time.Now()
		_, stats, err := GetArtifact(ctx, root, Get{Client: c, Peers: peers, Store: st, Fetch: FetchConfig{Workers: envInt("GYM_WORKERS", 0)}})
		whole := time.Since(t0)
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		res := struct {
			Stats
			Err   string
			CPU   float64
			Whole time.Duration // GetArtifact: manifest, fetch and Complete
		}{Stats: stats, CPU: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds(), Whole: whole}
		if err != nil {
			res.Err = err.Error()
		}
		b, _ := json.Marshal(res)
		fmt.Println(string(b))
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
