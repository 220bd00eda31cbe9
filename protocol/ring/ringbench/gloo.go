package ringbench

import (
	"bufio"
	"context"
	_ "embed" // for //go:embed
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// GlooScript is gloo.py, one rank of the torch.distributed gloo baseline:
//
//	python3 -c GlooScript RANK WORLD MASTER_ADDR MASTER_PORT IFNAME WARMUP ITERS SIZES
//
// It prints one line per size, {"bytes", "seconds", "correct"}, with the same
// inputs, timing (barrier, one call) and exact check as Node.
//
//go:embed gloo.py
var GlooScript string

// Python is the interpreter the gloo baseline runs with (Debian's
// python3-torch installs torch for it).
const Python = "/usr/bin/python3"

// GlooAvailable reports whether Python can import torch.distributed with
// the gloo backend.
func GlooAvailable() error {
	out, err := exec.Command(Python, "-c", "import torch.distributed as d; assert d.is_gloo_available()").CombinedOutput()
	if err != nil {
		return fmt.Errorf("ringbench: the gloo baseline needs %s with torch (apt-get install -y python3-torch): %v: %s",
			Python, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// GlooArgs is the argv (after the interpreter) of gloo rank rank for cfg:
// the master is rank 0 at master:port, ifname is the interface gloo uses.
func GlooArgs(cfg Config, rank int, master string, port int, ifname string) []string {
	sizes := make([]string, len(cfg.Sizes))
	for i, s := range cfg.Sizes {
		sizes[i] = strconv.FormatInt(s, 10)
	}
	return []string{"-c", GlooScript, strconv.Itoa(rank), strconv.Itoa(cfg.Nodes), master, strconv.Itoa(port),
		ifname, strconv.Itoa(cfg.Warmup), strconv.Itoa(cfg.Iters), strings.Join(sizes, ",")}
}

// FreePort returns a TCP port that was free on loopback a moment ago, for
// the gloo rendezvous.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// RunGloo runs the gloo baseline: start(rank) must return the command of
// gloo rank rank (Python with GlooArgs, in the rank's namespace when there
// is one). It returns one Result per size, Impl "gloo", aggregated exactly
// as Run does (fp32 on the wire, one TCP connection per pair, no
// authentication, no TLS).
func RunGloo(ctx context.Context, cfg Config, start func(rank int) *exec.Cmd) ([]Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cmds := make([]*exec.Cmd, cfg.Nodes)
	outs := make([]*bufio.Scanner, cfg.Nodes)
	defer func() {
		for _, c := range cmds {
			if c != nil && c.Process != nil {
				done := make(chan struct{})
				go func() { c.Wait(); close(done) }()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					c.Process.Kill()
					<-done
				}
			}
		}
	}()
	for r := range cfg.Nodes {
		cmd := start(r)
		if cmd.Stderr == nil {
			cmd.Stderr = os.Stderr
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		cmds[r] = cmd
		outs[r] = bufio.NewScanner(out)
	}
	stop := context.AfterFunc(ctx, func() {
		for _, c := range cmds {
			c.Process.Kill()
		}
	})
	defer stop()
	var results []Result
	for _, size := range cfg.Sizes {
		reps := make([]sizeReport, cfg.Nodes)
		errs := make([]error, cfg.Nodes)
		var wg sync.WaitGroup
		for r, sc := range outs {
			wg.Go(func() {
				if !sc.Scan() {
					errs[r] = fmt.Errorf("ringbench: gloo rank %d ended early", r)
					return
				}
				errs[r] = json.Unmarshal(sc.Bytes(), &reps[r])
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
		res.Impl, res.Wire, res.Streams = "gloo", "fp32", 1
		results = append(results, res)
	}
	return results, nil
}
