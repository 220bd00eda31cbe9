package torch

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zooai/gym/internal/pyenv"
	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/trainer"
	"github.com/zooai/gym/node/backend"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestMissingPythonSaysWhatToInstall(t *testing.T) {
	ctx := context.Background()
	err := CheckPython(ctx, "/nonexistent/python3", nil)
	if !errors.Is(err, ErrPython) || !strings.Contains(err.Error(), "GYM_PYTHON") {
		t.Errorf("missing interpreter: %v", err)
	}
	py := pyenv.Require(t, "torch")
	// An interpreter without the package: a bare virtual environment
	// (the test environment's own has gym_protocol installed).
	bare := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command(py, "-m", "venv", "--without-pip", bare).CombinedOutput(); err != nil {
		t.Fatalf("python -m venv: %v\n%s", err, out)
	}
	err = CheckPython(ctx, filepath.Join(bare, "bin", "python"), nil)
	if !errors.Is(err, ErrPython) || !strings.Contains(err.Error(), "gym_protocol.backend") || !strings.Contains(err.Error(), "pip install ./python") {
		t.Errorf("missing package: %v", err)
	}
}

// startJob starts a torch trainer on the built-in base with the small
// profile from its initial adapter.
func startJob(t *testing.T, b *Backend) (*Trainer, *llama.Adapter) {
	t.Helper()
	base, err := basemodel.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	c := smallConfig()
	a, err := trainer.InitialAdapter(base.Weights.Cfg, c)
	if err != nil {
		t.Fatal(err)
	}
	tt, err := b.StartTrainer(context.Background(), backend.Job{Base: base, Config: c, Threads: 1, Adapter: a})
	if err != nil {
		t.Fatal(err)
	}
	return tt, a
}

// TestRecoversFromFaults kills the process in the middle of a step, stops
// it (a hung call), and makes it answer a corrupt adapter: each time the
// supervisor restarts it, the step is redone, and only a verified adapter
// comes out.
func TestRecoversFromFaults(t *testing.T) {
	b := newBackend(t, Options{CallTimeout: 45 * time.Second})
	tt, a := startJob(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cases := []struct {
		name  string
		stage string
		do    func(pid int, x string)
	}{
		{"killed between generate and step", "generated", func(pid int, _ string) { syscall.Kill(pid, syscall.SIGKILL) }},
		{"corrupt adapter file", "stepped", func(_ int, x string) {
			ents, _ := os.ReadDir(x)
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), "adapter-") {
					os.WriteFile(filepath.Join(x, e.Name()), []byte("garbage"), 0o600)
				}
			}
		}},
	}
	if !testing.Short() {
		cases = append(cases, struct {
			name  string
			stage string
			do    func(pid int, x string)
		}{"hung (stopped) before step", "generated", func(pid int, _ string) { syscall.Kill(pid, syscall.SIGSTOP) }})
	}
	prev := a
	for _, tc := range cases {
		starts := b.Restarts()
		fired := false
		b.hook = func(stage string, pid int, x string) {
			if stage == tc.stage && !fired {
				fired = true
				tc.do(pid, x)
			}
		}
		if tc.name == "hung (stopped) before step" {
			b.o.CallTimeout, b.sup.o.CallTimeout = 15*time.Second, 15*time.Second
		}
		st, err := tt.Step(ctx)
		b.hook = nil
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !fired || b.Restarts() != starts+1 {
			t.Errorf("%s: fired %v, restarts %d → %d (want one more)", tc.name, fired, starts, b.Restarts())
		}
		if relDiff(tt.Adapter(), prev) == 0 {
			t.Errorf("%s: the step did not change the adapter", tc.name)
		}
		t.Logf("%s: step %d loss %.4g, restarts %d", tc.name, st.Step, st.Loss, b.Restarts())
		prev = tt.Adapter().Clone()
	}
	// A job the process refuses (4-bit on a machine without CUDA) is
	// unservable: the worker refuses the job instead of retrying it, and
	// the process is not restarted for it.
	starts := b.Restarts()
	base, _ := basemodel.Builtin()
	c := smallConfig()
	c.Use4Bit = true
	if _, err := b.StartTrainer(ctx, backend.Job{Base: base, Config: c, Threads: 1, Adapter: a}); !errors.Is(err, backend.ErrUnservable) || !strings.Contains(err.Error(), "CUDA") {
		t.Errorf("4-bit without CUDA: %v, want ErrUnservable naming CUDA", err)
	}
	if b.Restarts() != starts {
		t.Errorf("a refused Load restarted the process")
	}
}

func TestReadAdapterRefusesBadFiles(t *testing.T) {
	base, err := basemodel.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	a, err := trainer.InitialAdapter(base.Weights.Cfg, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "a.safetensors")
	if err := WriteAdapter(p, a); err != nil {
		t.Fatal(err)
	}
	got, err := ReadAdapter(p, a)
	if err != nil || relDiff(got, a) != 0 {
		t.Fatalf("round trip: %v", err)
	}
	nan := a.Clone()
	nan.Views()[3].Data[5] = float32(nanF())
	other, _ := trainer.InitialAdapter(base.Weights.Cfg, func() trainer.Config { c := smallConfig(); c.LoRARank = 4; return c }())
	fewer, _ := trainer.InitialAdapter(base.Weights.Cfg, func() trainer.Config { c := smallConfig(); c.LoRATargets = []string{"q_proj"}; return c }())
	for name, bad := range map[string]*llama.Adapter{"nan": nan, "rank": other, "targets": fewer} {
		if err := WriteAdapter(p, bad); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadAdapter(p, a); !errors.Is(err, ErrGarbage) {
			t.Errorf("%s: %v, want ErrGarbage", name, err)
		}
	}
	os.WriteFile(p, []byte("\x08\x00\x00\x00\x00\x00\x00\x00{}      "), 0o600)
	if _, err := ReadAdapter(p, a); !errors.Is(err, ErrGarbage) {
		t.Errorf("empty file: %v", err)
	}
}

func nanF() float64 { z := 0.0; return z / z }

func TestTracesRoundTripAndRefusals(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "t.safetensors")
	tr := &Traces{G: 2, Prompts: [][]int{{1, 2, 3}, {4}}, Completions: [][]int{{5}, {6, 7}, {8, 9, 10}, {1}},
		OldLogP: [][]float32{{-1}, {-0.5, -0.25}, {-1, -2, -3}, {0}}}
	if err := WriteTraces(p, tr); err != nil {
		t.Fatal(err)
	}
	got, err := ReadTraces(p, 15)
	if err != nil {
		t.Fatal(err)
	}
	if got.G != 2 || len(got.Completions) != 4 || got.Completions[2][2] != 10 || got.OldLogP[1][1] != -0.25 || got.Prompts[0][2] != 3 {
		t.Errorf("round trip: %+v", got)
	}
	if _, err := ReadTraces(p, 10); !errors.Is(err, ErrGarbage) {
		t.Errorf("token outside the vocabulary: %v", err)
	}
	tr.OldLogP[0][0] = 0.5
	WriteTraces(p, tr)
	if _, err := ReadTraces(p, 15); !errors.Is(err, ErrGarbage) {
		t.Errorf("positive log-probability: %v", err)
	}
}

func FuzzReadTraces(f *testing.F) {
	dir := f.TempDir()
	seed := filepath.Join(dir, "seed.safetensors")
	WriteTraces(seed, &Traces{G: 2, Prompts: [][]int{{1, 2}}, Completions: [][]int{{3}, {4, 5}}, OldLogP: [][]float32{{-1}, {-1, -2}}})
	b, _ := os.ReadFile(seed)
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "t.safetensors")
		os.WriteFile(p, data, 0o600)
		tr, err := ReadTraces(p, 15)
		if err != nil {
			return
		}
		if len(tr.Completions) != len(tr.Prompts)*tr.G {
			t.Fatalf("accepted inconsistent traces")
		}
	})
}

// TestOutOfMemoryIsUnservable: the process's ResourceExhausted (CUDA out of
// memory) becomes ErrUnservable with what to change; other codes pass
// unchanged (localcluster TestTorchOutOfMemoryRefuses runs it end to end).
func TestOutOfMemoryIsUnservable(t *testing.T) {
	oom := status.Error(codes.ResourceExhausted, "CUDA out of memory: Tried to allocate 2.00 GiB")
	err := outOfMemory(oom)
	if !errors.Is(err, backend.ErrUnservable) || !strings.Contains(err.Error(), "Tried to allocate 2.00 GiB") || !strings.Contains(err.Error(), "4-bit") {
		t.Errorf("out of memory: %v", err)
	}
	for _, e := range []error{status.Error(codes.Unavailable, "gone"), errors.New("local"), nil} {
		if got := outOfMemory(e); got != e {
			t.Errorf("outOfMemory(%v) = %v, want it unchanged", e, got)
		}
	}
}
