package ringbench_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/zooai/gym/protocol/ring/ringbench"
)

// With GYM_RINGBENCH_NODE set, the test binary is a benchmark node.
func TestMain(m *testing.M) {
	if netnsChild() {
		os.Exit(0)
	}
	if c := os.Getenv("GYM_RINGBENCH_NODE"); c != "" {
		var cfg ringbench.Config
		rank, err := strconv.Atoi(os.Getenv("GYM_RINGBENCH_RANK"))
		if err != nil || json.Unmarshal([]byte(c), &cfg) != nil {
			os.Exit(3)
		}
		if err := ringbench.Node(context.Background(), cfg, rank, os.Stdin, os.Stdout, os.Stderr); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestRunAcrossProcesses(t *testing.T) {
	for _, cfg := range []ringbench.Config{
		{Nodes: 3, Sizes: []int64{4, 40004, 1 << 20}, Iters: 3, Auth: true, TLS: true, Wire: "fp32"},
		{Nodes: 2, Sizes: []int64{1 << 16}, Iters: 2, Auth: false, TLS: false, Wire: "bf16", Streams: 2},
		{Nodes: 3, Sizes: []int64{40004}, Iters: 2, Auth: true, TLS: true, Wire: "fp32", InPlace: true},
		// The two-level all-reduce over groups of 2 and 3 ranks.
		{Nodes: 5, Sizes: []int64{4, 40004}, Iters: 2, Auth: true, TLS: true, Wire: "fp32", Groups: []int{2, 3}},
		// The raw TCP ring (the ceiling), three streams, odd size.
		{Nodes: 3, Sizes: []int64{4, 3<<20 + 12}, Iters: 2, Wire: "fp32", Streams: 3, SocketBuffer: 1 << 20, Raw: true},
		{Nodes: 2, Sizes: []int64{1 << 20}, Iters: 1, Wire: "fp32", Raw: true, RawTLS: true},
	} {
		conf, _ := json.Marshal(cfg)
		res, err := ringbench.Run(t.Context(), cfg, func(rank int) *exec.Cmd {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "GYM_RINGBENCH_NODE="+string(conf), "GYM_RINGBENCH_RANK="+strconv.Itoa(rank))
			cmd.Stderr = os.Stderr
			return cmd
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != len(cfg.Sizes) {
			t.Fatalf("%d results for %d sizes", len(res), len(cfg.Sizes))
		}
		for i, r := range res {
			n := float64(cfg.Nodes)
			if !r.Correct || r.Bytes != cfg.Sizes[i] || r.Nodes != cfg.Nodes || r.Iters != cfg.Iters ||
				r.SecondsMin <= 0 || r.SecondsMin > r.SecondsMedian ||
				math.Abs(r.AlgBW-float64(r.Bytes)/r.SecondsMedian/1e9) > 1e-12 ||
				math.Abs(r.BusBW-r.AlgBW*2*(n-1)/n) > 1e-12 {
				t.Fatalf("bad result %+v", r)
			}
			impl := "go-ring"
			if cfg.Raw {
				impl = map[bool]string{false: "tcp", true: "tls"}[cfg.RawTLS]
			}
			if r.Impl != impl || r.InPlace != cfg.InPlace {
				t.Fatalf("result %+v, want impl %s, inplace %v", r, impl, cfg.InPlace)
			}
			if topo := map[bool]string{false: "flat", true: "hierarchical"}[cfg.Groups != nil]; !cfg.Raw && r.Topology != topo {
				t.Fatalf("result %+v, want topology %s", r, topo)
			}
		}
	}
}

func TestRatios(t *testing.T) {
	rs := []ringbench.Result{
		{Impl: "go-ring", Bytes: 8, BusBW: 0.5}, {Impl: "go-ring", Bytes: 16, BusBW: 1},
		{Impl: "gloo", Bytes: 8, BusBW: 0.25}, {Impl: "tcp", Bytes: 8, BusBW: 1}, {Impl: "tls", Bytes: 8, BusBW: 2},
		{Impl: "tcp", Bytes: 16, BusBW: 4},
	}
	ringbench.Ratios(rs)
	if r := rs[0]; r.VsGloo != 2 || r.VsTCP != 0.5 || r.VsTLS != 0.25 {
		t.Fatalf("8 bytes: %+v", r)
	}
	if r := rs[1]; r.VsGloo != 0 || r.VsTCP != 0.25 || r.VsTLS != 0 {
		t.Fatalf("16 bytes (only tcp ran): %+v", r)
	}
	if rs[3].VsTCP != 0 {
		t.Fatal("a baseline got a ratio")
	}
	two := []ringbench.Result{{Impl: "go-ring", Topology: "flat", Bytes: 8, BusBW: 0.5}, {Impl: "go-ring", Topology: "hierarchical", Bytes: 8, BusBW: 0.25}}
	ringbench.Ratios(two)
	if two[1].VsFlat != 0.5 || two[0].VsFlat != 0 {
		t.Fatalf("hierarchical against flat: %+v", two)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []ringbench.Config{
		{Nodes: 1, Sizes: []int64{4}, Iters: 1, Wire: "fp32"},
		{Nodes: 2, Iters: 1, Wire: "fp32"},
		{Nodes: 2, Sizes: []int64{6}, Iters: 1, Wire: "fp32"},
		{Nodes: 2, Sizes: []int64{4}, Iters: 0, Wire: "fp32"},
		{Nodes: 2, Sizes: []int64{4}, Iters: 1, Wire: "fp8"},
		{Nodes: 4, Sizes: []int64{4}, Iters: 1, Wire: "fp32", Groups: []int{4}},
		{Nodes: 4, Sizes: []int64{4}, Iters: 1, Wire: "fp32", Groups: []int{2, 3}},
		{Nodes: 4, Sizes: []int64{4}, Iters: 1, Wire: "fp32", Groups: []int{0, 4}},
		{Nodes: 4, Sizes: []int64{4}, Iters: 1, Wire: "fp32", Groups: []int{2, 2}, Raw: true},
	} {
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// Dropper is deterministic per seed and drops the configured fraction.
func TestDropper(t *testing.T) {
	const n = 1_000_000
	for _, loss := range []float64{0, 0.001, 0.01, 0.2, 1} {
		a, b, c := ringbench.Dropper(loss, 1), ringbench.Dropper(loss, 1), ringbench.Dropper(loss, 2)
		drops, same := 0, true
		for range n {
			x := a()
			if x {
				drops++
			}
			same = same && x == b()
			c()
		}
		if !same {
			t.Fatalf("loss %v: two droppers with the same seed differ", loss)
		}
		// 5 standard deviations of a binomial, plus one packet
		if got, sd := float64(drops)/n, math.Sqrt(loss*(1-loss)/n); math.Abs(got-loss) > 5*sd+1.0/n {
			t.Fatalf("loss %v: dropped %v", loss, got)
		}
	}
	a, c := ringbench.Dropper(0.5, 1), ringbench.Dropper(0.5, 2)
	differ := false
	for range 64 {
		differ = differ || a() != c()
	}
	if !differ {
		t.Fatal("seeds 1 and 2 give the same drops")
	}
}

// The gloo baseline (torch.distributed, /usr/bin/python3) on loopback.
// Opt in with GYM_GLOO=1 (needs python3-torch; about 10 s, mostly importing
// torch).
func TestGlooBaseline(t *testing.T) {
	if os.Getenv("GYM_GLOO") != "1" {
		t.Skip("set GYM_GLOO=1 (apt-get install python3-torch) to run the gloo baseline")
	}
	if err := ringbench.GlooAvailable(); err != nil {
		t.Fatal(err)
	}
	cfg := ringbench.Config{Nodes: 2, Sizes: []int64{4, 40004, 1 << 20}, Iters: 2, Wire: "fp32"}
	port, err := ringbench.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	res, err := ringbench.RunGloo(t.Context(), cfg, func(rank int) *exec.Cmd {
		return exec.Command(ringbench.Python, ringbench.GlooArgs(cfg, rank, "127.0.0.1", port, "lo")...)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(cfg.Sizes) {
		t.Fatalf("%d results", len(res))
	}
	for i, r := range res {
		if r.Impl != "gloo" || !r.Correct || r.Bytes != cfg.Sizes[i] || r.SecondsMin <= 0 || r.SecondsMin > r.SecondsMedian {
			t.Fatalf("bad result %+v", r)
		}
	}
}
