package transfer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/store"
	"github.com/zooai/gym/protocol/ring/ringbench"
)

// TestNetnsWAN measures the speed figure on the ring work's test
// bed (ringbench.Bed): four namespaces on a bridge, every host's egress
// shaped with HTB to 1 Gbit/s, and 20 ms one-way delay added where packets
// cross the bridge by ringbench.Delay (a user-space NFQUEUE delayer: this
// kernel has no netem). Three hosts serve a copy of the artifact, the
// fourth fetches it into a disk store. It first measures raw TCP on the
// same path with 1, 2, 4, 8 and 16 streams (the baseline is the best of
// them), then GetArtifact from one and three sources with several
// requests in flight. Root, iproute2 and iptables; opt in with
// GYM_NETNS=1:
//
//	sudo GYM_NETNS=1 go test -run 'NetnsWAN$' -v -timeout 30m ./artifact/transfer
//
// GYM_WAN_MIB sets the artifact size (default 1024), GYM_WAN_DELAY the
// one-way delay (default 20ms; 0: no delayer), GYM_WAN_RATE the rate
// (default 1gbit), GYM_WAN_RUNS the fetches as SOURCESxIN_FLIGHT,… (default
// 1x0,1x32,3x0, where 0 in flight is the adaptive default; "none": raw TCP
// only), GYM_WAN_STREAMS the raw
// TCP stream counts (default 1,2,4,8,16; "none": no baseline).
func TestNetnsWAN(t *testing.T) {
	if os.Getenv("GYM_NETNS") != "1" {
		t.Skip("set GYM_NETNS=1 (root, iproute2, iptables) to run the namespace test bed")
	}
	if os.Geteuid() != 0 {
		t.Fatal("GYM_NETNS=1 needs root")
	}
	mib := envInt("GYM_WAN_MIB", 1024)
	delay := 20 * time.Millisecond
	if s := os.Getenv("GYM_WAN_DELAY"); s != "" {
		d, err := time.ParseDuration(s)
		must(t, err)
		delay = d
	}
	rate := "1gbit"
	if s := os.Getenv("GYM_WAN_RATE"); s != "" {
		rate = s
	}
	self, err := os.Executable()
	must(t, err)
	helperRun := "-test.run=^TestNetnsWANHelper$"
	bed := &ringbench.Bed{Prefix: fmt.Sprintf("gymaw%d-", os.Getpid()%10000), N: 4, Rate: rate, Delay: delay,
		Delayer: []string{"env", "GYM_WAN_HELPER=delay", "GYM_WAN_DELAY=" + delay.String(), self, helperRun}}
	must(t, bed.Up())
	t.Cleanup(bed.Down)
	out, _ := exec.Command("uptime").Output()
	t.Logf("bed: %s, %v one way, %d MiB artifact; %s", rate, delay, mib, strings.TrimSpace(string(out)))

	var mu sync.Mutex
	var procs []*exec.Cmd
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range procs {
			p.Process.Kill()
			p.Wait()
		}
	})
	// run starts this test binary as a host in node i's namespace and
	// returns its stdout.
	run := func(i int, helper string, env ...string) *bufio.Reader {
		t.Helper()
		cmd := bed.Exec(i, self, "-test.run=^"+helper+"$")
		cmd.Env = append(os.Environ(), env...)
		o, err := cmd.StdoutPipe()
		must(t, err)
		cmd.Stderr = os.Stderr
		must(t, cmd.Start())
		mu.Lock()
		procs = append(procs, cmd)
		mu.Unlock()
		return bufio.NewReader(o)
	}
	line := func(r *bufio.Reader, what string) string {
		t.Helper()
		s, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return strings.TrimSpace(s)
	}

	// Raw TCP from host 0 to host 3, the same bytes split over S streams.
	total := int64(mib) << 20
	snd := run(0, "TestNetnsWANHelper", "GYM_WAN_HELPER=tcpsend", "GYM_LISTEN="+bed.Addr(0)+":4791")
	if got := line(snd, "tcpsend"); got != "ready" {
		t.Fatalf("tcpsend: %q", got)
	}
	bestTCP, bestStreams := 0.0, 0
	streamList := "1,2,4,8,16"
	if s := os.Getenv("GYM_WAN_STREAMS"); s != "" {
		streamList = s
	}
	for _, f := range strings.Split(streamList, ",") {
		if f == "none" {
			break
		}
		streams, err := strconv.Atoi(f)
		must(t, err)
		r := run(3, "TestNetnsWANHelper", "GYM_WAN_HELPER=tcprecv", "GYM_PEERS="+bed.Addr(0)+":4791",
			fmt.Sprintf("GYM_BYTES=%d", total), fmt.Sprintf("GYM_STREAMS=%d", streams))
		mbps, err := strconv.ParseFloat(line(r, "tcprecv"), 64)
		must(t, err)
		t.Logf("raw TCP, %2d stream(s), %d MiB: %6.1f MB/s (%4.0f Mbit/s)", streams, mib, mbps, mbps*8)
		if mbps > bestTCP {
			bestTCP, bestStreams = mbps, streams
		}
	}
	if bestTCP > 0 {
		t.Logf("best raw TCP: %.1f MB/s with %d streams", bestTCP, bestStreams)
	} else {
		bestTCP = math.NaN()
	}

	// The artifact, published once and copied to the three servers.
	ctx := context.Background()
	base := t.TempDir()
	srcDir := filepath.Join(base, "src")
	must(t, os.MkdirAll(srcDir, 0o755))
	must(t, os.WriteFile(filepath.Join(srcDir, "weights.bin"), randBytes(43, mib<<20), 0o644))
	must(t, os.WriteFile(filepath.Join(srcDir, "config.json"), []byte(`{"wan":true}`), 0o644))
	st, err := store.Open(store.DefaultConfig(filepath.Join(base, "s0")))
	must(t, err)
	rec, err := st.Publish(ctx, srcDir, store.Meta{Kind: artifact.KindCheckpoint, Name: "wan"}, publisherKey, time.Now())
	must(t, err)
	st.Close()
	for _, d := range []string{"s1", "s2"} {
		must(t, exec.Command("cp", "-a", filepath.Join(base, "s0"), filepath.Join(base, d)).Run())
	}
	var peers []string
	serverPIDs := map[int]bool{}
	for i := range 3 {
		out := run(i, "TestNetnsHelper", "GYM_NETNS_HELPER=serve", "GYM_STORE="+filepath.Join(base, fmt.Sprintf("s%d", i)),
			fmt.Sprintf("GYM_KEY=%d", i+1), "GYM_LISTEN="+bed.Addr(i)+":4780")
		if got := line(out, "serve"); got != "ready" {
			t.Fatalf("server %d: %q", i, got)
		}
		mu.Lock()
		serverPIDs[procs[len(procs)-1].Process.Pid] = true
		mu.Unlock()
		peers = append(peers, fmt.Sprintf("%x@%s:4780", []byte(pub(key(byte(i+1)))), bed.Addr(i)))
	}

	runs := "1x0,1x32,3x0"
	if s := os.Getenv("GYM_WAN_RUNS"); s != "" {
		runs = s
	}
	if runs == "none" {
		return
	}
	for n, r := range strings.Split(runs, ",") {
		var c struct{ sources, workers int }
		if _, err := fmt.Sscanf(r, "%dx%d", &c.sources, &c.workers); err != nil || c.sources < 1 || c.sources > 3 {
			t.Fatalf("GYM_WAN_RUNS: %q is not SOURCESxWORKERS (1–3 sources)", r)
		}
		name := fmt.Sprintf("f%d", n)
		srv0, del0 := procCPU(func(pid int, cmd string) bool { return serverPIDs[pid] }), procCPU(isDelayer)
		out := run(3, "TestNetnsHelper", "GYM_NETNS_HELPER=fetch", "GYM_STORE="+filepath.Join(base, name),
			"GYM_ROOT="+rec.Root, "GYM_PEERS="+strings.Join(peers[:c.sources], ","), fmt.Sprintf("GYM_WORKERS=%d", c.workers))
		var res struct {
			Stats
			Err   string
			CPU   float64       // the fetching process's CPU seconds, Complete included
			Whole time.Duration // GetArtifact's wall time: manifest, fetch, Complete
		}
		must(t, json.Unmarshal([]byte(line(out, name)), &res))
		srvCPU, delCPU := procCPU(func(pid int, cmd string) bool { return serverPIDs[pid] })-srv0, procCPU(isDelayer)-del0
		if res.Err != "" {
			t.Fatalf("%d source(s) × %d: %s", c.sources, c.workers, res.Err)
		}
		mbps := float64(res.Bytes) / res.Elapsed.Seconds() / 1e6
		inflight := strconv.Itoa(c.workers)
		if c.workers == 0 {
			inflight = "auto"
		}
		t.Logf("fetch, %d source(s) × %4s in flight: %6.1f MB/s (%4.0f Mbit/s) = %.2f × best raw TCP, %d blocks in %v, per source %v, final in flight %v; CPU s: fetcher %.1f (Complete included), servers %.1f, delayer %.1f; GetArtifact %v (%v after the fetch: manifest and Complete)",
			c.sources, inflight, mbps, mbps*8, mbps/bestTCP, res.Fetched, res.Elapsed.Round(time.Millisecond), res.PerSource, res.InFlight, res.CPU, srvCPU, delCPU,
			res.Whole.Round(time.Millisecond), (res.Whole - res.Elapsed).Round(time.Millisecond))
		// GetArtifact completed the store, which walked and verified the
		// whole DAG against the manifest; drop it to keep the disk free.
		os.RemoveAll(filepath.Join(base, name))
	}
}

func envInt(name string, def int) int {
	if s := os.Getenv(name); s != "" {
		if v, err := strconv.Atoi(s); err == nil {
			return v
		}
	}
	return def
}

// TestNetnsWANHelper is the delayer or a raw TCP end of TestNetnsWAN.
func TestNetnsWANHelper(t *testing.T) {
	switch os.Getenv("GYM_WAN_HELPER") {
	case "":
		t.Skip("runs only as a host of TestNetnsWAN")
	case "delay":
		d, err := time.ParseDuration(os.Getenv("GYM_WAN_DELAY"))
		must(t, err)
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		must(t, ringbench.Delay(ctx, 0, d, os.Stdout))
	case "tcpsend":
		// Each connection asks for a number of bytes (8 bytes, big
		// endian) and gets that many zeros.
		ln, err := net.Listen("tcp", os.Getenv("GYM_LISTEN"))
		must(t, err)
		fmt.Println("ready")
		for {
			c, err := ln.Accept()
			must(t, err)
			go func() {
				defer c.Close()
				var n [8]byte
				if _, err := io.ReadFull(c, n[:]); err != nil {
					return
				}
				io.CopyN(c, zeros{}, int64(binary.BigEndian.Uint64(n[:])))
			}()
		}
	case "tcprecv":
		total, _ := strconv.ParseInt(os.Getenv("GYM_BYTES"), 10, 64)
		streams := envInt("GYM_STREAMS", 1)
		start := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var got int64
		var errs []error
		for i := range streams {
			share := total / int64(streams)
			if i == 0 {
				share += total % int64(streams)
			}
			wg.Go(func() {
				c, err := net.Dial("tcp", os.Getenv("GYM_PEERS"))
				var n int64
				if err == nil {
					_, err = c.Write(binary.BigEndian.AppendUint64(nil, uint64(share)))
					if err == nil {
						n, err = io.Copy(io.Discard, c)
					}
					c.Close()
				}
				mu.Lock()
				got += n
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		if got != total {
			t.Fatalf("received %d of %d bytes", got, total)
		}
		fmt.Println(float64(got) / time.Since(start).Seconds() / 1e6)
	}
}

// procCPU sums the user and system CPU seconds of the live processes that
// match.
func procCPU(match func(pid int, cmdline string) bool) float64 {
	ents, _ := os.ReadDir("/proc")
	total := 0.0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if !match(pid, string(cmd)) {
			continue
		}
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 13 {
			u, _ := strconv.ParseFloat(f[11], 64)
			s, _ := strconv.ParseFloat(f[12], 64)
			total += (u + s) / 100 // USER_HZ
		}
	}
	return total
}

func isDelayer(_ int, cmdline string) bool {
	return strings.Contains(cmdline, "TestNetnsWANHelper") // the delayer; the idle tcpsend adds nothing
}
