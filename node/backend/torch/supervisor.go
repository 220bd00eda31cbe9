// Package torch is the torch backend of a gym worker: a supervised Python
// process (python -m gym_protocol.backend, from the python/ package) that
// trains with PyTorch, transformers and PEFT, spoken to over gRPC on a
// Unix socket (api/trainer/v1). The supervisor starts the process in its
// own process group, restarts it when it dies or hangs, and kills it with
// the worker. Tensors cross as safetensors files in a private exchange
// directory (mode 0700); every adapter the process returns is checked
// (names, shapes, finite values) before the worker sees it. See
// docs/backends.md.
package torch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	trainerv1 "github.com/zooai/gym/api/trainer/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Options configure the torch backend.
type Options struct {
	// Python is the interpreter; empty: $GYM_PYTHON, else python3 on PATH.
	Python string
	// Env is added to the process's environment (e.g. PYTHONPATH).
	Env []string
	// Device ("cpu", "cuda", "cuda:N"; default cpu) and DType ("float32",
	// "bfloat16"; default each job's own or its base's: backend.TrainDType) of the model; the
	// process loads the base straight onto the device in that type, from
	// the memory-mapped safetensors. Use4Bit loads the base in NF4 (CUDA
	// and bitsandbytes only; refused with the reason elsewhere).
	Device, DType string
	Use4Bit       bool
	// BaseDir is the Hugging Face directory of the base model; empty: the
	// built-in base, exported into the backend's private directory.
	BaseDir string
	// StartTimeout bounds a process start (default 2 min); CallTimeout one
	// call (default 10 min): a call that takes longer counts as a hung
	// process, which is killed and restarted.
	StartTimeout, CallTimeout time.Duration
	// Log receives the process's standard error (nil: discarded, but the
	// last lines are kept for error messages).
	Log io.Writer
}

func (o Options) python() string {
	switch {
	case o.Python != "":
		return o.Python
	case os.Getenv("GYM_PYTHON") != "":
		return os.Getenv("GYM_PYTHON")
	}
	return "python3"
}

// ErrPython reports a missing interpreter or package.
var ErrPython = errors.New("torch: the torch backend's Python environment is not usable")

// modules the process needs, with what to install for each.
var modules = [][2]string{
	{"gym_protocol.backend", "pip install ./python (the gym_protocol package of this repository)"},
	{"torch", "pip install torch"},
	{"transformers", "pip install transformers"},
	{"peft", "pip install peft"},
	{"safetensors", "pip install safetensors"},
	{"grpc", "pip install grpcio"},
}

// CheckPython reports whether python can run the backend, naming the
// first missing piece and how to install it.
func CheckPython(ctx context.Context, python string, env []string) error {
	path, err := exec.LookPath(python)
	if err != nil {
		return fmt.Errorf("%w: no interpreter %q (install Python 3.10+, or give --python / GYM_PYTHON): %v", ErrPython, python, err)
	}
	// One interpreter tries every import and names the first that fails.
	script := "import sys\nfor i, m in enumerate(sys.argv[1:]):\n    try:\n        __import__(m)\n    except Exception as e:\n        print(i, repr(e)); sys.exit(3)\n"
	args := []string{"-c", script}
	for _, m := range modules {
		args = append(args, m[0])
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err == nil {
		return nil
	}
	var i int
	var msg string
	if n, _ := fmt.Sscanf(lastLine(out), "%d %s", &i, &msg); n >= 1 && i >= 0 && i < len(modules) {
		return fmt.Errorf("%w: %s cannot import %s (%s); %s", ErrPython, path, modules[i][0], lastLine(out), modules[i][1])
	}
	return fmt.Errorf("%w: %s: %v: %s", ErrPython, path, err, lastLine(out))
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// tail keeps the last bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
	w   io.Writer
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 8<<10 {
		t.buf = t.buf[len(t.buf)-8<<10:]
	}
	t.mu.Unlock()
	if t.w != nil {
		t.w.Write(p)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.buf))
}

// proc is one running backend process.
type proc struct {
	cmd    *exec.Cmd
	conn   *grpc.ClientConn
	client trainerv1.TrainerServiceClient
	exited chan struct{} // closed when the process has exited
	err    error         // its exit status, once exited is closed
	stderr *tail
	gen    int // which start this is (1, 2, ...)
}

// kill ends the process group and waits for the process.
func (p *proc) kill() {
	if p.cmd.Process != nil {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-p.exited
	p.conn.Close()
}

// Pid is the process id.
func (p *proc) Pid() int { return p.cmd.Process.Pid }

// supervisor starts, watches and restarts the process.
type supervisor struct {
	o        Options
	dir      string // private: socket and exchange directory
	exchange string
	mu       sync.Mutex
	cur      *proc
	starts   int
	closed   bool
}

func (s *supervisor) socket() string { return filepath.Join(s.dir, "trainer.sock") }

// get returns the running process, starting one when there is none or
// the last one exited.
func (s *supervisor) get(ctx context.Context) (*proc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("torch: backend closed")
	}
	if s.cur != nil {
		select {
		case <-s.cur.exited:
			s.cur.conn.Close()
			s.cur = nil
		default:
			return s.cur, nil
		}
	}
	p, err := s.start(ctx)
	if err != nil {
		return nil, err
	}
	s.cur = p
	return p, nil
}

// restart kills p if it is still the current process.
func (s *supervisor) restart(p *proc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == p {
		s.cur = nil
	}
	p.kill()
}

func (s *supervisor) start(ctx context.Context) (*proc, error) {
	os.Remove(s.socket())
	s.starts++
	st := &tail{w: s.o.Log}
	cmd := exec.Command(s.o.python(), "-m", "gym_protocol.backend", "--socket", s.socket(), "--exchange", s.exchange,
		"--parent", strconv.Itoa(os.Getpid()))
	cmd.Env = append(os.Environ(), s.o.Env...)
	cmd.Stdout, cmd.Stderr = st, st
	// Its own process group (killed as a whole), and killed by the kernel
	// if the worker dies without a chance to do it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: starting %s: %v", ErrPython, s.o.python(), err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{}), stderr: st, gen: s.starts}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	conn, err := grpc.NewClient("unix://"+s.socket(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
		return nil, err
	}
	p.conn, p.client = conn, trainerv1.NewTrainerServiceClient(conn)
	timeout := s.o.StartTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	go func() {
		select {
		case <-p.exited:
			cancel()
		case <-hctx.Done():
		}
	}()
	// WaitForReady: the call waits for the socket to appear and accept.
	_, err = p.client.Health(hctx, &trainerv1.HealthRequest{}, grpc.WaitForReady(true))
	if err != nil {
		p.kill()
		select {
		case <-p.exited:
			if p.err != nil || ctx.Err() == nil {
				return nil, fmt.Errorf("torch: the backend process exited while starting (%v): %s", p.err, p.stderr)
			}
		default:
		}
		return nil, fmt.Errorf("torch: the backend process did not answer within %v: %v: %s", timeout, err, p.stderr)
	}
	return p, nil
}

// close kills the current process.
func (s *supervisor) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.cur != nil {
		s.cur.kill()
		s.cur = nil
	}
}
