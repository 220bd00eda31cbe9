// Package ringbench measures ring all-reduce between real processes on
// this machine: a parent starts N node processes (over TCP on loopback,
// with or without TLS and signatures), runs warm-up plus K timed calls per
// size, and reports nccl-tests style figures (algbw, busbw in GB/s).
//
// Timing follows the gloo anchor in ../shared/bench: a barrier (a
// one-element all-reduce), one call, the maximum over ranks, the median
// over the K calls.
package ringbench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/zooai/gym/keys/edkey"
	"github.com/zooai/gym/keys/nodekey"
	"github.com/zooai/gym/protocol/ring"
	"github.com/zooai/gym/protocol/ring/tcp"
)

// Config is one benchmark run.
type Config struct {
	Nodes        int           `json:"nodes"`
	Sizes        []int64       `json:"sizes"` // bytes of float32 data
	Iters        int           `json:"iters"`
	Warmup       int           `json:"warmup"`
	Auth         bool          `json:"auth"`
	TLS          bool          `json:"tls"`
	Wire         string        `json:"wire"`
	Streams      int           `json:"streams"`
	SegmentBytes int           `json:"segment_bytes"`
	Timeout      time.Duration `json:"timeout"`
	SocketBuffer int           `json:"socket_buffer,omitempty"` // SO_RCVBUF and SO_SNDBUF, 0: OS default
	// InPlace measures AllReduceCall (in place, one extra copy of the
	// result) instead of AllReduceInto (the input is read, the result
	// written to a second buffer), which is what the worker uses.
	InPlace bool `json:"inplace,omitempty"`
	// Raw runs the raw TCP ring instead of ours (see rawNode): the ceiling.
	Raw bool `json:"raw,omitempty"`
	// RawTLS puts TLS 1.3 on the raw ring's streams (a diagnostic: what the
	// record layer costs without the ring's protocol).
	RawTLS bool `json:"raw_tls,omitempty"`
	// Listen, when set, is each rank's listen host (one per node, e.g. in
	// network namespaces); TLS is then required. Default: 127.0.0.1.
	Listen []string `json:"listen,omitempty"`
	// Groups, when set, runs the two-level all-reduce (ring.Config.Groups)
	// over the ranks in order: groups of consecutive ranks.
	Groups []int `json:"groups,omitempty"`
}

// Validate checks c.
func (c *Config) Validate() error {
	switch {
	case c.Nodes < 2 || c.Nodes > 64:
		return fmt.Errorf("ringbench: --nodes %d, want 2..64", c.Nodes)
	case len(c.Sizes) == 0:
		return errors.New("ringbench: no sizes")
	case c.Iters < 1:
		return fmt.Errorf("ringbench: --iters %d, want ≥ 1", c.Iters)
	case c.Warmup < 0:
		return errors.New("ringbench: negative warm-up")
	}
	for _, s := range c.Sizes {
		if s < 4 || s%4 != 0 || s > 4<<30 {
			return fmt.Errorf("ringbench: size %d, want a multiple of 4 between 4 bytes and 4 GiB", s)
		}
	}
	if _, err := ring.ParseWire(c.Wire); err != nil {
		return err
	}
	if c.Listen != nil && len(c.Listen) != c.Nodes {
		return fmt.Errorf("ringbench: %d listen addresses for %d nodes", len(c.Listen), c.Nodes)
	}
	if c.Listen != nil && !c.TLS && !c.Raw {
		return errors.New("ringbench: plain TCP is for loopback only; use TLS between namespaces")
	}
	if c.Groups != nil {
		sum := 0
		for _, g := range c.Groups {
			sum += g
		}
		if len(c.Groups) < 2 || sum != c.Nodes || slices.Min(c.Groups) < 1 || c.Raw {
			return fmt.Errorf("ringbench: groups %v for %d nodes: want two or more groups of ≥ 1 summing to the nodes (not with the raw ring)", c.Groups, c.Nodes)
		}
	}
	return nil
}

// Result is one line of output, per size.
type Result struct {
	Impl          string  `json:"impl"`
	Topology      string  `json:"topology,omitempty"` // go-ring: "flat" or "hierarchical"
	Groups        []int   `json:"groups,omitempty"`   // hierarchical: the group sizes
	Nodes         int     `json:"nodes"`
	Bytes         int64   `json:"bytes"`
	Iters         int     `json:"iters"`
	SecondsMedian float64 `json:"seconds_median"`
	SecondsMin    float64 `json:"seconds_min"`
	AlgBW         float64 `json:"algbw"`
	BusBW         float64 `json:"busbw"`
	Correct       bool    `json:"correct"`
	Auth          bool    `json:"auth"`
	TLS           bool    `json:"tls"`
	Wire          string  `json:"wire"`
	Streams       int     `json:"streams"`
	InPlace       bool    `json:"inplace"`
	SocketBuffer  int     `json:"sockbuf,omitempty"`
	// On our ring's lines, when baselines ran in the same invocation: its
	// busbw over theirs (Ratios).
	VsFlat float64 `json:"busbw_vs_flat,omitempty"` // a hierarchical line over the flat ring's
	VsGloo float64 `json:"busbw_vs_gloo,omitempty"`
	VsTCP  float64 `json:"busbw_vs_tcp,omitempty"`
	VsTLS  float64 `json:"busbw_vs_tls,omitempty"`
	// The namespace bed's links, filled in by the caller (gym ring bench).
	Rate  string  `json:"rate,omitempty"`
	Delay string  `json:"delay,omitempty"`
	Loss  float64 `json:"loss,omitempty"`
}

type hello struct {
	Addr string `json:"addr"`
	Pub  string `json:"pub"`
}

type order struct {
	Rank  int      `json:"rank"`
	Addrs []string `json:"addrs"`
	Pubs  []string `json:"pubs"`
}

type sizeReport struct {
	Bytes   int64     `json:"bytes"`
	Streams int       `json:"streams"` // the node's streams to its successor
	Seconds []float64 `json:"seconds"`
	Correct bool      `json:"correct"`
	Err     string    `json:"err,omitempty"`
}

// input is node rank's deterministic, integer-valued input: every partial
// sum is exact in float32 and, being at most 8·N in magnitude, in bf16 for
// N ≤ 32.
func input(rank int, b []float32) {
	for j := range b {
		b[j] = float32((rank*131+j*7)%17 - 8)
	}
}

// Run starts cfg.Nodes processes with start(rank) (each must run Node with
// the same cfg on its stdin and stdout) and returns one Result per size.
func Run(ctx context.Context, cfg Config, start func(rank int) *exec.Cmd) ([]Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	type child struct {
		cmd *exec.Cmd
		in  io.WriteCloser
		out *bufio.Scanner
	}
	kids := make([]child, cfg.Nodes)
	defer func() {
		for _, k := range kids {
			if k.cmd != nil && k.cmd.Process != nil {
				k.in.Close()
				done := make(chan struct{})
				go func() { k.cmd.Wait(); close(done) }()
				select {
				case <-done:
				case <-time.After(5 * time.Second):
					k.cmd.Process.Kill()
					<-done
				}
			}
		}
	}()
	var addrs, pubs []string
	for r := range cfg.Nodes {
		cmd := start(r)
		in, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		kids[r] = child{cmd, in, sc}
		var h hello
		if !sc.Scan() || json.Unmarshal(sc.Bytes(), &h) != nil {
			return nil, fmt.Errorf("ringbench: node %d did not start", r)
		}
		addrs, pubs = append(addrs, h.Addr), append(pubs, h.Pub)
	}
	for r, k := range kids {
		b, _ := json.Marshal(order{Rank: r, Addrs: addrs, Pubs: pubs})
		if _, err := k.in.Write(append(b, '\n')); err != nil {
			return nil, err
		}
	}
	var results []Result
	for _, size := range cfg.Sizes {
		reps := make([]sizeReport, cfg.Nodes)
		var wg sync.WaitGroup
		errs := make([]error, cfg.Nodes)
		for r, k := range kids {
			wg.Go(func() {
				if !k.out.Scan() {
					errs[r] = fmt.Errorf("ringbench: node %d ended early", r)
					return
				}
				errs[r] = json.Unmarshal(k.out.Bytes(), &reps[r])
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return results, err
		}
		res, err := aggregate(cfg, size, reps)
		if err != nil {
			return results, err
		}
		res.Impl, res.Auth, res.TLS, res.Wire = "go-ring", cfg.Auth, cfg.TLS, cfg.Wire
		res.Topology = "flat"
		if cfg.Groups != nil {
			res.Topology, res.Groups = "hierarchical", slices.Clone(cfg.Groups)
		}
		res.InPlace, res.SocketBuffer = cfg.InPlace, cfg.SocketBuffer
		if cfg.Raw {
			res.Impl, res.Auth, res.TLS, res.Wire, res.InPlace, res.Topology = "tcp", false, cfg.RawTLS, "raw", false, ""
			if cfg.RawTLS {
				res.Impl = "tls"
			}
		}
		results = append(results, res)
	}
	return results, nil
}

// aggregate makes the Result of one size from every rank's report: the
// slowest rank's time per call, median and minimum over the calls.
func aggregate(cfg Config, size int64, reps []sizeReport) (Result, error) {
	res := Result{Nodes: cfg.Nodes, Bytes: size, Iters: cfg.Iters, Correct: true}
	times := make([]float64, cfg.Iters)
	for r, rep := range reps {
		if rep.Err != "" {
			return res, fmt.Errorf("ringbench: node %d, %d bytes: %s", r, size, rep.Err)
		}
		if rep.Bytes != size || len(rep.Seconds) != cfg.Iters {
			return res, fmt.Errorf("ringbench: node %d reported %d calls of %d bytes, want %d of %d",
				r, len(rep.Seconds), rep.Bytes, cfg.Iters, size)
		}
		res.Correct = res.Correct && rep.Correct
		res.Streams = max(res.Streams, rep.Streams)
		for i, s := range rep.Seconds {
			times[i] = max(times[i], s)
		}
	}
	res.SecondsMin = slices.Min(times)
	sort.Float64s(times)
	res.SecondsMedian = median(times)
	n := float64(cfg.Nodes)
	res.AlgBW = float64(size) / res.SecondsMedian / 1e9
	res.BusBW = res.AlgBW * 2 * (n - 1) / n
	return res, nil
}

// timeCalls runs cfg.Warmup + cfg.Iters rounds of: prepare (untimed: set
// the input up and pass a barrier), call (timed), check (untimed), and
// reports the timed calls' seconds after the warm-up, whether every check
// passed, and the first error.
func timeCalls(cfg Config, size int64, prepare, call func() error, check func() bool) sizeReport {
	rep := sizeReport{Bytes: size, Correct: true}
	for it := range cfg.Warmup + cfg.Iters {
		if err := prepare(); err != nil {
			rep.Err = "barrier: " + err.Error()
			break
		}
		t0 := time.Now()
		err := call()
		dt := time.Since(t0).Seconds()
		if err != nil {
			rep.Err = err.Error()
			break
		}
		if it >= cfg.Warmup {
			rep.Seconds = append(rep.Seconds, dt)
		}
		rep.Correct = rep.Correct && check()
	}
	return rep
}

// introduce prints this node's hello and reads its order from the parent.
func introduce(cfg Config, rank int, h hello, enc *json.Encoder, stdin io.Reader) (order, error) {
	var o order
	if err := enc.Encode(h); err != nil {
		return o, err
	}
	in := bufio.NewScanner(stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	if !in.Scan() {
		return o, errors.New("ringbench: no order")
	}
	if err := json.Unmarshal(in.Bytes(), &o); err != nil {
		return o, err
	}
	if o.Rank != rank || len(o.Addrs) != cfg.Nodes || len(o.Pubs) != cfg.Nodes {
		return o, fmt.Errorf("ringbench: order for rank %d of %d nodes, this is rank %d of %d", o.Rank, len(o.Addrs), rank, cfg.Nodes)
	}
	return o, nil
}

// Ratios sets, on every go-ring result, its busbw over that of each
// baseline of the same size in rs (gloo, the raw TCP ring, the raw TLS
// ring).
func Ratios(rs []Result) {
	for i := range rs {
		if rs[i].Impl != "go-ring" {
			continue
		}
		for _, b := range rs {
			if b.Bytes != rs[i].Bytes || b.BusBW <= 0 {
				continue
			}
			switch {
			case b.Impl == "go-ring" && b.Topology == "flat" && rs[i].Topology == "hierarchical":
				rs[i].VsFlat = rs[i].BusBW / b.BusBW
			case b.Impl == "gloo":
				rs[i].VsGloo = rs[i].BusBW / b.BusBW
			case b.Impl == "tcp":
				rs[i].VsTCP = rs[i].BusBW / b.BusBW
			case b.Impl == "tls":
				rs[i].VsTLS = rs[i].BusBW / b.BusBW
			}
		}
	}
}

// unchanged reports whether orig still holds rank's input.
func unchanged(rank int, orig []float32) bool {
	for j, v := range orig {
		if v != float32((rank*131+j*7)%17-8) {
			return false
		}
	}
	return true
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// Node is one benchmark process: it listens on loopback with cfg's
// transport options, prints its address and key, reads its order (rank and
// ring), runs every size and reports timings, one JSON line per size.
// Evidence of dropped frames goes to stderr.
func Node(ctx context.Context, cfg Config, rank int, stdin io.Reader, stdout, stderr io.Writer) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if rank < 0 || rank >= cfg.Nodes {
		return fmt.Errorf("ringbench: rank %d of %d", rank, cfg.Nodes)
	}
	host := "127.0.0.1"
	if cfg.Listen != nil {
		host = cfg.Listen[rank]
	}
	if cfg.Raw {
		return rawNode(ctx, cfg, rank, host, stdin, stdout)
	}
	wire, _ := ring.ParseWire(cfg.Wire)
	key, err := nodekey.Generate(nil)
	if err != nil {
		return err
	}
	tr, err := tcp.Listen(tcp.Options{Key: key, ListenAddr: net.JoinHostPort(host, "0"), Plain: !cfg.TLS, Streams: cfg.Streams,
		ReadBuffer: cfg.SocketBuffer, WriteBuffer: cfg.SocketBuffer})
	if err != nil {
		return err
	}
	defer tr.Close()
	enc := json.NewEncoder(stdout)
	o, err := introduce(cfg, rank, hello{Addr: tr.Addr(), Pub: nodekey.PublicHex(key)}, enc, stdin)
	if err != nil {
		return err
	}
	rc := ring.Config{Job: "ring-bench", Epoch: 1, Groups: cfg.Groups}
	for i, a := range o.Addrs {
		pub, err := edkey.ParseHex(o.Pubs[i])
		if err != nil {
			return fmt.Errorf("ringbench: node %d: %w", i, err)
		}
		rc.Members = append(rc.Members, ring.Member{ID: fmt.Sprint("bench", i), PublicKey: pub, Addr: a})
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = ring.DefaultTimeout
	}
	comm, err := ring.New(ring.Options{Key: key, Config: rc, Transport: tr, Timeout: timeout,
		Insecure: !cfg.Auth, SegmentBytes: cfg.SegmentBytes, MinSegmentBytes: min(cfg.SegmentBytes, ring.DefaultMinSegmentBytes),
		Reporter: ring.ReporterFunc(func(e ring.Evidence) {
			fmt.Fprintf(stderr, "ringbench: node %d dropped a frame from %s: %s: %s\n", o.Rank, e.SuspectID, e.Kind, e.Detail)
		})})
	if err != nil {
		return err
	}
	defer comm.Close()
	call := ring.Call{}.WithWire(wire)
	barrier := make([]float32, 1)
	var step uint64
	for _, size := range cfg.Sizes {
		n := int(size / 4)
		orig := make([]float32, n)
		input(o.Rank, orig)
		want := make([]float32, n)
		for j := range want {
			for r := range cfg.Nodes {
				want[j] += float32((r*131+j*7)%17 - 8) // input(r)[j]
			}
		}
		buf := make([]float32, n)
		rep := timeCalls(cfg, size, func() error {
			if cfg.InPlace {
				copy(buf, orig)
			} else {
				clear(buf) // the call must write every element
			}
			step++
			return comm.AllReduceCall(ctx, barrier, ring.Sum, ring.Call{Step: step})
		}, func() error {
			step++
			call.Step = step
			if cfg.InPlace {
				return comm.AllReduceCall(ctx, buf, ring.Sum, call)
			}
			return comm.AllReduceInto(ctx, buf, orig, ring.Sum, call)
		}, func() bool {
			return slices.Equal(buf, want) && (cfg.InPlace || unchanged(rank, orig))
		})
		rep.Streams = tr.Streams()
		if err := enc.Encode(rep); err != nil {
			return err
		}
		if rep.Err != "" {
			return errors.New(rep.Err)
		}
	}
	return nil
}
