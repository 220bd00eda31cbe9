package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/zooai/gym/artifact/transfer"
	"github.com/zooai/gym/devnet/localcluster"
	"github.com/zooai/gym/internal/pyenv"
	"github.com/zooai/gym/keys/nodekey"
	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/node/nodeclient"
	"github.com/zooai/gym/node/worker"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/protocol/jobspec"
)

func workerTestSpec() jobspec.Spec {
	g := jobspec.DefaultGSPO()
	g.AggregateInterval, g.GroupSize, g.LoRARank, g.LoRAAlpha = 2, 4, 4, 8
	g.MaxSeqLen, g.GradientAccumulationSteps, g.LearningRate, g.WarmupSteps = 12, 1, 2e-3, 0
	return jobspec.Spec{Model: "builtin", Dataset: "addition", Epochs: 1, MinNodes: 3, StepsPerEpoch: 4, PromptsPerStep: 2, GSPO: g}
}

// workerRoot is gym with only the worker command, built on dial.
func workerRoot(dial DialFunc) *cobra.Command {
	root := &cobra.Command{Use: "gym", SilenceUsage: true, SilenceErrors: true}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	var orch orchestratorFlags
	orch.register(root)
	root.AddCommand(newWorkerCmd(dial))
	return root
}

// workerCluster is the real hanzod in process with two in-process workers
// and a staked key for the gym worker under test: the job (spec) runs once
// that third node registers.
type workerCluster struct {
	*localcluster.Cluster
	job, key string // the job; the gym worker's key file
}

func startWorkerCluster(t *testing.T, ctx context.Context, spec jobspec.Spec) *workerCluster {
	t.Helper()
	cfg := localcluster.TestConfig(t.TempDir(), 2)
	cfg.Threads = 1
	cfg.FailAfter = 5 * time.Second // gym worker heartbeats every second at most
	cl, err := localcluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	key, err := nodekey.Generate(nil)
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(t.TempDir(), "node.key")
	if err := nodekey.Save(keyPath, key, false); err != nil {
		t.Fatal(err)
	}
	if err := cl.Stake(ctx, nodekey.PublicHex(key)); err != nil {
		t.Fatal(err)
	}
	if err := cl.StartWorkers(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitRegistered(ctx); err != nil {
		t.Fatal(err)
	}
	job, err := cl.Submit(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	return &workerCluster{Cluster: cl, job: job, key: keyPath}
}

// dial connects gym worker to the cluster's hanzod with the client it uses
// in production; wrap, when set, wraps it.
func (c *workerCluster) dial(t *testing.T, wrap func(*nodeclient.Client) worker.Orchestrator) DialFunc {
	return func(ctx context.Context, o DialOptions) (worker.Orchestrator, io.Closer, error) {
		if o.Addr != c.Addr() || len(o.Key) != ed25519.PrivateKeySize {
			t.Errorf("dial options %+v", o)
		}
		nc, err := c.Dial(o.Key, t.TempDir())
		if err != nil {
			return nil, nil, err
		}
		if wrap != nil {
			return wrap(nc), nc, nil
		}
		return nc, nc, nil
	}
}

// runWorkerCmd runs gym worker against c and returns its stdout and error.
func runWorkerCmd(t *testing.T, c *workerCluster, dial DialFunc, args ...string) (string, error) {
	t.Helper()
	cmd := workerRoot(dial)
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(append([]string{"worker", "--orchestrator", c.Addr(), "--key", c.key, "--data", t.TempDir(), "--heartbeat", "1s"}, args...))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	t.Logf("stderr:\n%s", errb.String())
	return out.String(), err
}

func TestWorkerCommandJSON(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := startWorkerCluster(t, ctx, workerTestSpec())
	out, err := runWorkerCmd(t, c, c.dial(t, nil), "--json", "--exit-when-done", "--threads", "1")
	if err != nil {
		t.Fatalf("gym worker: %v\n%s", err, out)
	}
	kinds := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var e map[string]any
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if e["time"] == nil || e["node"] == nil {
			t.Errorf("line %q lacks time or node", sc.Text())
		}
		kinds[e["kind"].(string)]++
	}
	for k, n := range map[string]int{"registered": 1, "epoch_started": 1, "step": 4, "delta_submitted": 2, "epoch_done": 1, "job_done": 1} {
		if kinds[k] != n {
			t.Errorf("%d %s events, want %d (all: %v)", kinds[k], k, n, kinds)
		}
	}
	if j, _ := c.Job(c.job); j.State != state.Published {
		t.Errorf("job %s", j.State)
	}
}

// TestWorkerCommandFailedJob: the operator fails the job once it runs;
// gym worker --exit-when-done reports it and exits 1.
func TestWorkerCommandFailedJob(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	spec := workerTestSpec()
	spec.Epochs = 3 // it runs long enough to be failed before it is published
	c := startWorkerCluster(t, ctx, spec)
	failed := make(chan error, 1)
	go func() {
		err := c.WaitJob(ctx, c.job, func(j state.Job) bool { return j.State == state.Running })
		if err == nil {
			_, err = c.Engine().Do(ctx, state.FailJob{Job: c.job, Reason: "test: the operator failed the job"})
		}
		failed <- err
	}()
	out, err := runWorkerCmd(t, c, c.dial(t, nil), "--exit-when-done")
	if ferr := <-failed; ferr != nil {
		t.Fatalf("failing the job: %v", ferr)
	}
	var ex *exitError
	if !errors.As(err, &ex) || ex.code != 1 {
		t.Fatalf("error %v, want exit status 1", err)
	}
	if !strings.Contains(out, "job_done") || !strings.Contains(out, "state=failed") {
		t.Errorf("output does not report the failed job:\n%s", out)
	}
}

func TestWorkerCommandUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"fast heartbeat", nil, []string{"--heartbeat", "500ms"}, "--heartbeat"},
		{"bad beta env", map[string]string{"GSPO_BETA": "x"}, nil, "GSPO_BETA"},
		{"bad rank", nil, []string{"--lora-rank", "-2"}, "--lora-rank"},
		{"bad level env", map[string]string{"IMPORTANCE_SAMPLING_LEVEL": "batch"}, nil, "IMPORTANCE_SAMPLING_LEVEL"},
		{"bad attack", nil, []string{"--attack", "bitflip"}, "attack"},
		{"float16", nil, []string{"--backend", "torch", "--torch-dtype", "float16"}, "no measured tolerances"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			cmd := workerRoot(func(context.Context, DialOptions) (worker.Orchestrator, io.Closer, error) {
				return nil, nil, errors.New("must not dial")
			})
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			cmd.SetArgs(append([]string{"worker", "--key", filepath.Join(t.TempDir(), "none.key")}, tc.args...))
			err := cmd.Execute()
			if !isUsage(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want a usage error about %s", err, tc.want)
			}
		})
	}
}

// artifactOrch is the node client, recording the sources it is given.
type artifactOrch struct {
	*nodeclient.Client
	peers []transfer.Peer
}

func (a *artifactOrch) SetSources(p []transfer.Peer) { a.peers = p; a.Client.SetSources(p) }

// --artifacts-listen serves the node's store while the worker runs (its
// address is in the registered event), --artifacts-peers become sources;
// without a store behind the orchestrator client the flags are a usage
// error.
func TestWorkerCommandArtifacts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := startWorkerCluster(t, ctx, workerTestSpec())
	storeless := func(nc *nodeclient.Client) worker.Orchestrator { return struct{ worker.Orchestrator }{nc} }
	if _, err := runWorkerCmd(t, c, c.dial(t, storeless), "--artifacts-listen", "127.0.0.1:0"); !isUsage(err) || !strings.Contains(err.Error(), "artifact store") {
		t.Fatalf("--artifacts-listen without a store: %v", err)
	}
	pk, _ := nodekey.Generate(nil)
	peerKey := nodekey.PublicHex(pk)
	var orch *artifactOrch
	dial := c.dial(t, func(nc *nodeclient.Client) worker.Orchestrator {
		orch = &artifactOrch{Client: nc}
		return orch
	})
	out, err := runWorkerCmd(t, c, dial, "--exit-when-done", "--threads", "1", "--artifacts-listen", "127.0.0.1:0",
		"--artifacts-peers", peerKey+"@127.0.0.1:1,127.0.0.1:2")
	if err != nil {
		t.Fatalf("gym worker: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`registered .*artifacts 127\.0\.0\.1:[1-9][0-9]*`).MatchString(out) {
		t.Fatalf("the registered event names no artifact server:\n%s", out)
	}
	if len(orch.peers) != 2 || orch.peers[0].URL != "http://127.0.0.1:1" || hex.EncodeToString(orch.peers[0].Key) != peerKey || orch.peers[1].Key != nil {
		t.Fatalf("sources %+v", orch.peers)
	}
}

// TestWorkerCommandRefusal: gym worker --max-memory-mib 1 refuses a job
// that needs more; hanzod records why, and 'gym job status' shows it (and
// its --json the node and the reason).
func TestWorkerCommandRefusal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := startWorkerCluster(t, ctx, workerTestSpec())
	key, err := nodekey.Load(c.key)
	if err != nil {
		t.Fatal(err)
	}
	id := nodekey.PublicHex(key)
	wctx, stop := context.WithCancel(ctx)
	cmd := workerRoot(c.dial(t, nil))
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs([]string{"worker", "--orchestrator", c.Addr(), "--key", c.key, "--data", t.TempDir(), "--heartbeat", "1s", "--max-memory-mib", "1"})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(wctx) }()
	err = c.WaitJob(ctx, c.job, func(j state.Job) bool { return j.Refusals[id] != "" })
	stop()
	if werr := <-done; werr != nil {
		t.Errorf("gym worker: %v\n%s", werr, errb.String())
	}
	if err != nil {
		t.Fatalf("no refusal recorded: %v\n%s\n%s", err, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "job_refused") {
		t.Errorf("gym worker did not report the refusal:\n%s", out.String())
	}
	text := mustGym(t, "--orchestrator", "grpc://"+c.Addr(), "job", "status", c.job)
	for _, want := range []string{"refused by   1 node(s)", id + "  jobconf: the job does not fit this worker's memory", "this worker's limit is 1 MiB"} {
		if !strings.Contains(text, want) {
			t.Errorf("gym job status does not say %q:\n%s", want, text)
		}
	}
	j := decodeJSON[jobJSON](t, mustGym(t, "--orchestrator", "grpc://"+c.Addr(), "job", "status", "--json", c.job))
	if len(j.Refusals) != 1 || j.Refusals[0].Node != id || !strings.Contains(j.Refusals[0].Reason, "does not fit") {
		t.Errorf("refusals %+v", j.Refusals)
	}
}

// --model-dir with --backend torch reads the directory's config and
// tokenizer only: a base whose every weight is NaN, which the go backend's
// worker refuses as it decodes it, is taken by the torch worker (whose
// process would load it), which goes on to dial hanzod.
func TestWorkerCommandTorchModelDirNotDecoded(t *testing.T) {
	py := pyenv.Require(t, "torch", "transformers", "peft", "safetensors", "grpc")
	pkg, _ := filepath.Abs(filepath.Join("..", "..", "python"))
	t.Setenv("PYTHONPATH", pkg)
	dir := t.TempDir()
	if err := basemodel.Export(dir); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, basemodel.WeightsFile)
	st, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for i := 8 + int(binary.LittleEndian.Uint64(st)); i < len(st); i++ {
		st[i] = 0xff // float32 NaN
	}
	if err := os.WriteFile(p, st, 0o644); err != nil {
		t.Fatal(err)
	}
	errDial := errors.New("test: dialled")
	for _, be := range []string{"go", "torch"} {
		cmd := workerRoot(func(context.Context, DialOptions) (worker.Orchestrator, io.Closer, error) { return nil, nil, errDial })
		var errb bytes.Buffer
		cmd.SetOut(io.Discard)
		cmd.SetErr(&errb)
		cmd.SetArgs([]string{"worker", "--data", t.TempDir(), "--backend", be, "--python", py, "--model-dir", dir})
		err := cmd.Execute()
		switch {
		case be == "go" && (err == nil || !strings.Contains(err.Error(), "is NaN")):
			t.Errorf("go worker: %v, want the NaN weights refused", err)
		case be == "torch" && (!errors.Is(err, errDial) || !strings.Contains(errb.String(), "is base model")):
			t.Errorf("torch worker: %v, want it to read the base and dial\n%s", err, errb.String())
		}
	}
}
