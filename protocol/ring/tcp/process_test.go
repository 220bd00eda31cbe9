package tcp_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/zooai/gym/protocol/ring"
	"github.com/zooai/gym/protocol/ring/tcp"
)

// The multi-process test re-executes the test binary as ring nodes: with
// GYM_RING_CHILD=1, TestMain runs one node that talks to the parent (the
// test, playing the orchestrator) in JSON lines over stdin and stdout.
func TestMain(m *testing.M) {
	if os.Getenv("GYM_RING_CHILD") == "1" {
		if err := child(); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type childOrder struct {
	Members []string `json:"members"` // addresses, in ring order; key index = original index
	Index   []int    `json:"index"`   // original index of each member
	Length  int      `json:"length"`
	Step    uint64   `json:"step"`
	// Fault: "", "kill-connected" (SIGKILL right after connecting, before
	// any frame), "kill-scatter", "kill-gather", "stop-scatter" (from
	// scatter-reduce round 1 on), "stop-gather"; see faultConn.Send.
	Fault string `json:"fault"`
	// TimeoutMs is the ring timeout in milliseconds, taken from the first
	// order (which creates the communicator); 0: 3 s.
	TimeoutMs int `json:"timeout_ms,omitempty"`
}

type childResult struct {
	Err       string `json:"err,omitempty"`
	Suspect   int    `json:"suspect"`           // original index, -1 if none
	Timeout   bool   `json:"timeout,omitempty"` // the error is ring.ErrTimeout
	Connect   bool   `json:"connect,omitempty"` // ErrNoSuccessor or ErrNoPredecessor: connecting failed
	Hash      string `json:"hash,omitempty"`
	Untouched bool   `json:"untouched"`
}

func childInput(orig, length int) []float32 {
	b := make([]float32, length)
	for j := range b {
		b[j] = float32((orig*7919+j*31)%2001 - 1000)
	}
	return b
}

func hashF32(b []float32) string {
	if len(b) == 0 {
		return ""
	}
	s := sha256.Sum256(unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), 4*len(b)))
	return fmt.Sprintf("%x", s[:8])
}

// faultTransport hurts its own process when the first frame of the chosen
// phase is about to leave: a real crash (SIGKILL) or pause (SIGSTOP).
type faultTransport struct {
	ring.Transport
	fault *string
}

type faultConn struct {
	ring.Conn
	fault *string
}

func (f faultTransport) Connect(ctx context.Context, s ring.LinkSpec) (ring.Conn, ring.Conn, error) {
	out, in, err := f.Transport.Connect(ctx, s)
	if err != nil {
		return nil, nil, err
	}
	if *f.fault == "kill-connected" {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	return faultConn{out, f.fault}, in, nil
}

func (f faultConn) Send(hdr, payload []byte) error {
	phase, round := ring.Phase(hdr[7]), binary.LittleEndian.Uint32(hdr[8:])
	switch {
	case *f.fault == "kill-scatter" && phase == ring.ScatterReduce,
		*f.fault == "kill-gather" && phase == ring.AllGather:
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	case *f.fault == "stop-gather" && phase == ring.AllGather,
		*f.fault == "stop-scatter" && phase == ring.ScatterReduce && round >= 1:
		// Ask the parent for SIGSTOP and make no progress until SIGCONT.
		*f.fault = ""
		cont := make(chan os.Signal, 1)
		signal.Notify(cont, syscall.SIGCONT)
		json.NewEncoder(os.Stdout).Encode(map[string]bool{"pause_me": true})
		<-cont
		signal.Stop(cont)
	}
	return f.Conn.Send(hdr, payload)
}

func child() error {
	var me int
	fmt.Sscan(os.Getenv("GYM_RING_INDEX"), &me)
	listen := os.Getenv("GYM_RING_LISTEN") // set by the network-namespace test
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	tr, err := tcp.Listen(tcp.Options{Key: key(me), ListenAddr: listen})
	if err != nil {
		return err
	}
	defer tr.Close()
	out := json.NewEncoder(os.Stdout)
	out.Encode(map[string]string{"addr": tr.Addr()})
	in := bufio.NewScanner(os.Stdin)
	var comm *ring.Comm
	fault := new(string)
	for in.Scan() {
		var o childOrder
		if err := json.Unmarshal(in.Bytes(), &o); err != nil {
			return err
		}
		cfg := ring.Config{Job: "process-test", Epoch: 1}
		for i, a := range o.Members {
			cfg.Members = append(cfg.Members, ring.Member{ID: fmt.Sprint("n", o.Index[i]), PublicKey: key(o.Index[i]).Public().(ed25519.PublicKey), Addr: a})
		}
		*fault = o.Fault
		if comm == nil {
			timeout := 3 * time.Second
			if o.TimeoutMs > 0 {
				timeout = time.Duration(o.TimeoutMs) * time.Millisecond
			}
			comm, err = ring.New(ring.Options{Key: key(me), Config: cfg, Transport: faultTransport{tr, fault},
				Timeout: timeout, SegmentBytes: 64 << 10})
		} else {
			err = comm.Reconfigure(cfg)
		}
		if err != nil {
			return err
		}
		buf := childInput(me, o.Length)
		res := childResult{Suspect: -1}
		if err := comm.AllReduceCall(context.Background(), buf, ring.Sum, ring.Call{Step: o.Step}); err != nil {
			res.Err = err.Error()
			var pe *ring.PeerError
			if errors.As(err, &pe) {
				res.Suspect = o.Index[pe.Suspect]
			}
			res.Timeout = errors.Is(err, ring.ErrTimeout)
			res.Connect = errors.Is(err, ring.ErrNoSuccessor) || errors.Is(err, ring.ErrNoPredecessor)
			res.Untouched = slices.Equal(buf, childInput(me, o.Length))
		} else {
			res.Hash = hashF32(buf)
		}
		out.Encode(res)
	}
	return nil
}

type proc struct {
	cmd  *exec.Cmd
	in   *json.Encoder
	out  *bufio.Scanner
	addr string
}

func startChildren(t *testing.T, n int) []*proc {
	return startChildrenWith(t, n, func(i int) *exec.Cmd { return exec.Command(os.Args[0], "-test.run=^$") })
}

// startChildrenWith starts n nodes with the commands cmdFor returns (which
// must run this test binary).
func startChildrenWith(t *testing.T, n int, cmdFor func(i int) *exec.Cmd) []*proc {
	ps := make([]*proc, n)
	for i := range n {
		cmd := cmdFor(i)
		cmd.Env = append(os.Environ(), append(cmd.Env, "GYM_RING_CHILD=1", fmt.Sprint("GYM_RING_INDEX=", i))...)
		cmd.Stderr = os.Stderr
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p := &proc{cmd: cmd, in: json.NewEncoder(stdin), out: bufio.NewScanner(stdout)}
		t.Cleanup(func() {
			stdin.Close()
			cmd.Process.Signal(syscall.SIGCONT)
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				<-done
			}
		})
		if !p.out.Scan() {
			t.Fatalf("child %d printed no address", i)
		}
		var a map[string]string
		json.Unmarshal(p.out.Bytes(), &a)
		p.addr = a["addr"]
		ps[i] = p
	}
	return ps
}

// line returns the child's next line of output, failing the test when
// none comes within d.
func (p *proc) line(t *testing.T, d time.Duration) []byte {
	t.Helper()
	got := make(chan bool, 1)
	go func() { got <- p.out.Scan() }()
	select {
	case ok := <-got:
		if !ok {
			t.Fatalf("child %d ended its output", p.cmd.Process.Pid)
		}
		return p.out.Bytes()
	case <-time.After(d):
		// The scanning goroutine ends when the cleanup stops the child.
		t.Fatalf("child %d printed nothing for %v", p.cmd.Process.Pid, d)
		return nil
	}
}

func (p *proc) result(t *testing.T) childResult {
	t.Helper()
	var r childResult
	if err := json.Unmarshal(p.line(t, time.Minute), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// awaitPause waits for the child's pause_me (faults stop-*): it is then
// blocked in a send until SIGCONT.
func (p *proc) awaitPause(t *testing.T) {
	t.Helper()
	if l := p.line(t, time.Minute); !strings.Contains(string(l), "pause_me") {
		t.Fatalf("child %d: %s, want pause_me", p.cmd.Process.Pid, l)
	}
}

// waitKilled waits for the child to end and checks that SIGKILL ended it.
func (p *proc) waitKilled(t *testing.T) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("child %d: %v, want killed", p.cmd.Process.Pid, err)
		}
	case <-time.After(time.Minute):
		p.cmd.Process.Kill()
		<-done
		t.Fatalf("child %d still ran after a minute, want killed", p.cmd.Process.Pid)
	}
}

// Real processes over TLS: one node is killed (SIGKILL) during
// scatter-reduce or all-gather, or paused (SIGSTOP) past the timeout and
// resumed. The survivors fail naming it (its successor always does), their
// buffers untouched; the orchestrator (this test) removes it, and the
// retry gives the exact sum of the survivors' inputs.
func TestProcessesKillPauseRetry(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const n, victim, length = 4, 1, 300007
	for _, fault := range []string{"kill-scatter", "kill-gather", "stop-gather"} {
		t.Run(fault, func(t *testing.T) {
			ps := startChildren(t, n)
			var addrs []string
			for _, p := range ps {
				addrs = append(addrs, p.addr)
			}
			idx := []int{0, 1, 2, 3}
			for i, p := range ps {
				o := childOrder{Members: addrs, Index: idx, Length: length, Step: 5}
				if i == victim {
					o.Fault = fault
				}
				p.in.Encode(o)
			}
			if fault == "stop-gather" {
				ps[victim].awaitPause(t)
				ps[victim].cmd.Process.Signal(syscall.SIGSTOP)
			}
			survivors := []int{0, 2, 3}
			named := 0
			for _, i := range survivors {
				r := ps[i].result(t)
				if r.Err == "" {
					full := make([]float32, length)
					for k := range n {
						for j, v := range childInput(k, length) {
							full[j] += v
						}
					}
					t.Fatalf("node %d succeeded without node %d: %+v (full sum %s)", i, victim, r, hashF32(full))
				}
				if !r.Untouched {
					t.Fatalf("node %d: aborted call changed its buffer", i)
				}
				if r.Suspect == victim {
					named++
				}
			}
			if named == 0 { // the aborts cascade; at least one neighbour names it
				t.Fatalf("no survivor named node %d", victim)
			}
			if fault == "stop-gather" {
				defer ps[victim].cmd.Process.Signal(syscall.SIGCONT)
			}
			// New configuration without the victim; the paused one resumes
			// in the middle of the retry.
			na := []string{addrs[0], addrs[2], addrs[3]}
			for _, i := range survivors {
				ps[i].in.Encode(childOrder{Members: na, Index: survivors, Length: length, Step: 5})
			}
			if fault == "stop-gather" {
				ps[victim].cmd.Process.Signal(syscall.SIGCONT)
			}
			want := make([]float32, length)
			for _, i := range survivors {
				for j, v := range childInput(i, length) {
					want[j] += v
				}
			}
			for _, i := range survivors {
				r := ps[i].result(t)
				if r.Err != "" || r.Hash != hashF32(want) {
					t.Fatalf("retry: node %d: %q hash %s, want %s", i, r.Err, r.Hash, hashF32(want))
				}
			}
			if fault != "stop-gather" {
				ps[victim].waitKilled(t)
			}
		})
	}
}
