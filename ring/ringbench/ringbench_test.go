package ringbench_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/zooai/gym/ring/ringbench"
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
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []ringbench.Config{
		{Nodes: 1, Sizes: []int64{4}, Iters: 1, Wire: "fp32"},
		{Nodes: 2, Iters: 1, Wire: "fp32"},
		{Nodes: 2, Sizes: []int64{6}, Iters: 1, Wire: "fp32"},
		{Nodes: 2, Sizes: []int64{4}, Iters: 0, Wire: "fp32"},
		{Nodes: 2, Sizes: []int64{4}, Iters: 1, Wire: "fp8"},
	} {
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
