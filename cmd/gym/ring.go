package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/zooai/gym/protocol/ring/ringbench"
)

func newRing() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ring",
		Short: "Authenticated ring all-reduce: benchmarks",
	}
	cmd.AddCommand(newRingBench(), newRingNode(), newRingDelay())
	return cmd
}

func newRingBench() *cobra.Command {
	cfg := ringbench.Config{Warmup: 1}
	var sizes, rate, lossArg, baseline, topology, groupsArg, sitesArg string
	var asJSON, netns bool
	var delay, groupDelay time.Duration
	var lossSeed uint64
	cmd := &cobra.Command{
		Use:   "bench --nodes N --size BYTES[,BYTES...] --iters K [--auth=true|false] [--tls=true|false] [--wire fp32|bf16] [--netns [--rate 1gbit] [--delay 20ms] [--loss 0.1%]] [--baseline gloo,tcp] [--json]",
		Short: "Measure ring all-reduce between N local processes",
		Long: `bench starts N processes on this machine, joined in a ring over TCP on
loopback (TLS 1.3 with keys bound to fresh node keys unless --tls=false;
every segment signed and verified unless --auth=false). Per size it runs
warm-up calls plus K timed calls (barrier, one call, slowest rank) and
prints the median and minimum time, algbw = bytes/time and busbw =
algbw·2(N−1)/N in GB/s (10^9 bytes/s, nccl-tests conventions), and whether
every rank got the exact expected sum.

With --netns (root) each node runs in its own network namespace, linked by
veth pairs to a bridge, optionally shaped with --rate (HTB) and delayed with
--delay (this kernel has no netem: packets crossing the bridge go to an
NFQUEUE served by 'gym ring nfqdelay'), and lose --loss of the packets
crossing the bridge (same program, seeded PRNG: --loss-seed); everything is
deleted afterwards.

With --baseline gloo the same nodes (and namespaces and shaping) then run
torch.distributed all_reduce with the gloo backend (script embedded in this
binary, run with /usr/bin/python3; Debian: apt-get install python3-torch),
with the same inputs, timing and exact check, printed as "impl": "gloo".
With --baseline tcp they run a raw TCP ring with the same streams and
socket buffers: each rank sends what an all-reduce sends, 2(N−1)/N of the
vector, to its successor while receiving as much, with no hashing, signing,
TLS or reduction ("impl": "tcp", "correct" = every byte arrived). Its busbw
is the ceiling of the bed. --baseline tls is the same raw ring over TLS 1.3
("impl": "tls": what the record layer alone costs). Several: --baseline gloo,tcp,tls. Our
ring's line then also gives its busbw over each baseline's (busbw_vs_gloo,
busbw_vs_tcp, busbw_vs_tls; the × columns of the table).

By default the ring reads the input and writes the result to a second
buffer (AllReduceInto, as the worker does); --inplace measures the in-place
call, which copies the result over the input once it succeeded.

With --topology hierarchical --groups 4,4,4,4 the same nodes run the flat
ring first (the baseline, "topology": "flat") and then the two-level
all-reduce over groups of consecutive ranks ("topology": "hierarchical",
busbw_vs_flat: its busbw over the flat ring's); with --netns,
--group-delay is the one-way delay between two nodes of the same group
(NFQUEUE 1, a second 'gym ring nfqdelay') and --delay the one between
groups, or with --sites between the bed's sites when the ring's groups
differ from them (e.g. --sites 4,4,4,4 --groups 8,8: two sites a group). busbw uses 2(N−1)/N for both, so they compare by time.

Sizes accept K, M, G (10^3) and KiB, MiB, GiB (2^10) suffixes.`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, args []string) error {
			var err error
			if cfg.Sizes, err = parseSizes(sizes); err != nil {
				return usageError{err}
			}
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			var groups, sites []int
			switch topology {
			case "flat":
				if groupsArg != "" || groupDelay != 0 || sitesArg != "" {
					return usageError{fmt.Errorf("--groups, --sites and --group-delay need --topology hierarchical")}
				}
			case "hierarchical":
				for _, f := range strings.Split(groupsArg, ",") {
					g, err := strconv.Atoi(strings.TrimSpace(f))
					if err != nil {
						return usageError{fmt.Errorf("--groups %q: want sizes like 4,4,4,4", groupsArg)}
					}
					groups = append(groups, g)
				}
				hc := cfg
				hc.Groups = groups
				if err := hc.Validate(); err != nil {
					return usageError{err}
				}
				if groupDelay != 0 && (!netns || delay == 0) {
					return usageError{fmt.Errorf("--group-delay needs --netns and a --delay between groups")}
				}
				if sitesArg != "" {
					if groupDelay == 0 {
						return usageError{fmt.Errorf("--sites needs --group-delay")}
					}
					sum := 0
					for _, f := range strings.Split(sitesArg, ",") {
						g, err := strconv.Atoi(strings.TrimSpace(f))
						if err != nil || g < 1 {
							return usageError{fmt.Errorf("--sites %q: want sizes like 4,4,4,4", sitesArg)}
						}
						sites = append(sites, g)
						sum += g
					}
					if sum != cfg.Nodes || len(sites) < 2 {
						return usageError{fmt.Errorf("--sites %q: want two or more sites holding the %d nodes", sitesArg, cfg.Nodes)}
					}
				} else {
					sites = groups
				}
			default:
				return usageError{fmt.Errorf("--topology %q: want flat or hierarchical", topology)}
			}
			loss, err := parseLoss(lossArg)
			if err != nil {
				return usageError{err}
			}
			var gloo, rawTCP, rawTLS bool
			for _, b := range strings.Split(baseline, ",") {
				switch strings.TrimSpace(b) {
				case "":
				case "gloo":
					if err := ringbench.GlooAvailable(); err != nil {
						return err
					}
					gloo = true
				case "tcp":
					rawTCP = true
				case "tls":
					rawTLS = true
				default:
					return usageError{fmt.Errorf("--baseline %q: want gloo, tcp, tls or a list (gloo,tcp)", b)}
				}
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			var bed *ringbench.Bed
			if netns {
				if !cfg.TLS {
					return usageError{fmt.Errorf("--netns needs --tls=true: plain TCP is for loopback only")}
				}
				bed = &ringbench.Bed{Prefix: fmt.Sprintf("gymrb%d-", os.Getpid()%10000), N: cfg.Nodes, Rate: rate,
					Delay: delay, Loss: loss, Delayer: []string{exe, "ring", "nfqdelay", "--delay", delay.String(),
						"--loss", strconv.FormatFloat(loss, 'g', -1, 64), "--seed", strconv.FormatUint(lossSeed, 10)}}
				if groupDelay > 0 {
					bed.Groups, bed.GroupDelay = sites, groupDelay
					bed.GroupDelayer = []string{exe, "ring", "nfqdelay", "--delay", groupDelay.String(), "--queue", "1",
						"--loss", strconv.FormatFloat(loss, 'g', -1, 64), "--seed", strconv.FormatUint(lossSeed+1, 10)}
				}
				if err := bed.Up(); err != nil {
					return err
				}
				defer bed.Down()
				for i := range cfg.Nodes {
					cfg.Listen = append(cfg.Listen, bed.Addr(i))
				}
			} else if rate != "" || delay != 0 || loss != 0 {
				return usageError{fmt.Errorf("--rate, --delay and --loss need --netns")}
			}
			run := func(cfg ringbench.Config) ([]ringbench.Result, error) {
				conf, _ := json.Marshal(cfg)
				return ringbench.Run(c.Context(), cfg, func(rank int) *exec.Cmd {
					args := []string{"ring", "node", "--rank", strconv.Itoa(rank), "--config", string(conf)}
					var cmd *exec.Cmd
					if bed != nil {
						cmd = bed.Exec(rank, exe, args...)
					} else {
						cmd = exec.CommandContext(c.Context(), exe, args...)
					}
					cmd.Stderr = os.Stderr
					return cmd
				})
			}
			results, err := run(cfg)
			if err == nil && groups != nil {
				hc := cfg
				hc.Groups = groups
				var more []ringbench.Result
				more, err = run(hc)
				results = append(results, more...)
			}
			if err == nil && gloo {
				var more []ringbench.Result
				more, err = runGloo(c, cfg, bed)
				results = append(results, more...)
			}
			for _, on := range []bool{false, true} {
				if err == nil && (!on && rawTCP || on && rawTLS) {
					raw := cfg
					raw.Raw, raw.RawTLS = true, on
					var more []ringbench.Result
					more, err = run(raw)
					results = append(results, more...)
				}
			}
			ringbench.Ratios(results)
			for i := range results {
				results[i].Rate, results[i].Loss = rate, loss
				if delay > 0 {
					results[i].Delay = delay.String()
				}
			}
			out := c.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				for _, r := range results {
					enc.Encode(r)
				}
			} else {
				tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
				fmt.Fprintln(tw, "impl\ttopology\tnodes\tbytes\titers\tmedian ms\tmin ms\talgbw GB/s\tbusbw GB/s\tcorrect\t× flat\t× gloo\t× tcp\t× tls\t")
				ratio := func(x float64) string {
					if x == 0 {
						return ""
					}
					return fmt.Sprintf("%.2f", x)
				}
				for _, r := range results {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.2f\t%.2f\t%.3f\t%.3f\t%v\t%s\t%s\t%s\t%s\t\n", r.Impl, r.Topology, r.Nodes, r.Bytes, r.Iters,
						1e3*r.SecondsMedian, 1e3*r.SecondsMin, r.AlgBW, r.BusBW, r.Correct, ratio(r.VsFlat), ratio(r.VsGloo), ratio(r.VsTCP), ratio(r.VsTLS))
				}
				tw.Flush()
			}
			if err != nil {
				return err
			}
			for _, r := range results {
				if !r.Correct {
					return &exitError{code: 1, msg: fmt.Sprintf("%s: wrong sum at %d bytes", r.Impl, r.Bytes)}
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Nodes, "nodes", 4, "number of processes in the ring")
	f.StringVar(&sizes, "size", "64MiB", "comma-separated buffer sizes in bytes")
	f.IntVar(&cfg.Iters, "iters", 5, "timed calls per size")
	f.IntVar(&cfg.Warmup, "warmup", 1, "untimed calls per size before the timed ones")
	f.BoolVar(&cfg.Auth, "auth", true, "sign and verify every segment")
	f.BoolVar(&cfg.TLS, "tls", true, "TLS 1.3 between nodes (false: plain TCP, loopback only)")
	f.StringVar(&cfg.Wire, "wire", "fp32", "element type on the wire: fp32 or bf16")
	f.IntVar(&cfg.Streams, "streams", 0, "parallel TCP streams per link (0: chosen per link from its measured round trip)")
	f.IntVar(&cfg.SocketBuffer, "sockbuf", 0, "SO_RCVBUF and SO_SNDBUF in bytes (0: OS default)")
	f.IntVar(&cfg.SegmentBytes, "segment", 0, "largest signed segment in bytes (0: 1 MiB)")
	f.DurationVar(&cfg.Timeout, "timeout", 30*time.Second, "neighbour silence timeout")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per size")
	f.BoolVar(&netns, "netns", false, "run each node in its own network namespace joined by a bridge (root, iproute2)")
	f.StringVar(&rate, "rate", "", "with --netns: shape every node's link with HTB to this rate (e.g. 1gbit)")
	f.DurationVar(&delay, "delay", 0, "with --netns: one-way delay added where packets cross the bridge (user-space NFQUEUE; needs iptables)")
	f.StringVar(&lossArg, "loss", "", "with --netns: drop this fraction of the packets crossing the bridge (e.g. 0.1% or 0.001)")
	f.Uint64Var(&lossSeed, "loss-seed", 1, "with --loss: seed of the PRNG that picks the dropped packets")
	f.StringVar(&baseline, "baseline", "", "after our ring, run these baselines on the same nodes: gloo (torch.distributed, /usr/bin/python3), tcp (raw TCP ring, the ceiling), tls (the raw ring over TLS), or a list: gloo,tcp,tls")
	f.StringVar(&topology, "topology", "flat", "flat, or hierarchical: the flat ring, then the two-level all-reduce over --groups on the same nodes")
	f.StringVar(&groupsArg, "groups", "", "with --topology hierarchical: group sizes of consecutive ranks, e.g. 4,4,4,4")
	f.DurationVar(&groupDelay, "group-delay", 0, "with --topology hierarchical and --netns: one-way delay between nodes of the same group (--delay is then between groups)")
	f.StringVar(&sitesArg, "sites", "", "with --group-delay: the bed's sites of consecutive ranks (--group-delay inside, --delay between), when they differ from --groups")
	f.BoolVar(&cfg.InPlace, "inplace", false, "measure the in-place call (AllReduceCall: one more copy) instead of AllReduceInto")
	return cmd
}

// runGloo runs the gloo baseline on the nodes of the run: loopback, or one
// rank per namespace of bed.
func runGloo(c *cobra.Command, cfg ringbench.Config, bed *ringbench.Bed) ([]ringbench.Result, error) {
	master, ifname, port := "127.0.0.1", "lo", 29500
	if bed != nil {
		master, ifname = bed.Addr(0), "eth0"
	} else {
		var err error
		if port, err = ringbench.FreePort(); err != nil {
			return nil, err
		}
	}
	return ringbench.RunGloo(c.Context(), cfg, func(rank int) *exec.Cmd {
		args := ringbench.GlooArgs(cfg, rank, master, port, ifname)
		var cmd *exec.Cmd
		if bed != nil {
			cmd = bed.Exec(rank, ringbench.Python, args...)
		} else {
			cmd = exec.CommandContext(c.Context(), ringbench.Python, args...)
		}
		cmd.Stderr = os.Stderr
		return cmd
	})
}

// parseLoss reads a loss fraction: "0.1%" or "0.001"; empty is 0.
func parseLoss(s string) (float64, error) {
	if s == "" {
		return 0, nil
	}
	t, pct := strings.CutSuffix(strings.TrimSpace(s), "%")
	v, err := strconv.ParseFloat(t, 64)
	if pct {
		v /= 100
	}
	if err != nil || v < 0 || v >= 1 || v != v {
		return 0, fmt.Errorf("--loss %q: want a fraction in [0, 1), e.g. 0.1%% or 0.001", s)
	}
	return v, nil
}

// newRingNode is the child process of ring bench.
func newRingNode() *cobra.Command {
	var conf string
	var rank int
	cmd := &cobra.Command{
		Use:    "node --rank R --config JSON",
		Hidden: true,
		Args:   exactArgs(0),
		RunE: func(c *cobra.Command, args []string) error {
			var cfg ringbench.Config
			if err := json.Unmarshal([]byte(conf), &cfg); err != nil {
				return usageError{err}
			}
			if dir := os.Getenv("GYM_RING_CPUPROFILE"); dir != "" {
				// Each node writes DIR/node-RANK.pprof: where a node's CPU goes.
				f, err := os.Create(filepath.Join(dir, fmt.Sprintf("node-%d.pprof", rank)))
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			return ringbench.Node(c.Context(), cfg, rank, os.Stdin, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&conf, "config", "", "benchmark configuration (JSON)")
	cmd.Flags().IntVar(&rank, "rank", 0, "this node's rank")
	return cmd
}

func parseSizes(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		mult := int64(1)
		for _, u := range []struct {
			suffix string
			m      int64
		}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"B", 1}} {
			if strings.HasSuffix(f, u.suffix) {
				f, mult = strings.TrimSuffix(f, u.suffix), u.m
				break
			}
		}
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("bad size %q", f)
		}
		out = append(out, v*mult)
	}
	return out, nil
}

// newRingDelay is the packet delayer ring bench --delay starts in the
// switch namespace.
func newRingDelay() *cobra.Command {
	var delay time.Duration
	var queue uint16
	var loss float64
	var seed uint64
	cmd := &cobra.Command{
		Use:    "nfqdelay --delay D [--loss FRACTION --seed S] [--queue Q]",
		Hidden: true,
		Args:   exactArgs(0),
		RunE: func(c *cobra.Command, args []string) error {
			return ringbench.Impair(c.Context(), queue, ringbench.Impairment{Delay: delay, Loss: loss, Seed: seed}, c.OutOrStdout())
		},
	}
	cmd.Flags().DurationVar(&delay, "delay", 20*time.Millisecond, "one-way delay")
	cmd.Flags().Uint16Var(&queue, "queue", 0, "NFQUEUE number")
	cmd.Flags().Float64Var(&loss, "loss", 0, "fraction of packets to drop (0.001 = 0.1 %)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of the loss PRNG")
	return cmd
}
