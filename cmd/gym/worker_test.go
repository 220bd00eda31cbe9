package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/zooai/gym/artifact/transfer"
	"github.com/zooai/gym/jobspec"
	"github.com/zooai/gym/nodeclient"
	"github.com/zooai/gym/nodekey"
	"github.com/zooai/gym/worker"
	"github.com/zooai/gym/worker/workertest"
)

func workerTestSpec() jobspec.Spec {
	g := jobspec.DefaultGSPO()
	g.AggregateInterval, g.GroupSize, g.LoRARank, g.LoRAAlpha = 2, 4, 4, 8
	g.MaxSeqLen, g.GradientAccumulationSteps, g.LearningRate, g.WarmupSteps = 12, 1, 2e-3, 0
	return jobspec.Spec{Model: "builtin", Dataset: "addition", Epochs: 1, MinNodes: 1, StepsPerEpoch: 4, PromptsPerStep: 2, GSPO: g}
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

// runWorkerCmd runs gym worker against f and returns its stdout and error.
func runWorkerCmd(t *testing.T, f *workertest.Fake, args ...string) (string, error) {
	t.Helper()
	dial := func(ctx context.Context, o DialOptions) (worker.Orchestrator, io.Closer, error) {
		if o.Addr != "fake:9550" || len(o.Key) != ed25519.PrivateKeySize {
			t.Errorf("dial options %+v", o)
		}
		return f.Client(o.Key), nil, nil
	}
	cmd := workerRoot(dial)
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(append([]string{"worker", "--orchestrator", "fake:9550", "--data", t.TempDir(), "--heartbeat", "1s", "--ring-tls=false"}, args...))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	t.Logf("stderr:\n%s", errb.String())
	return out.String(), err
}

func TestWorkerCommandJSON(t *testing.T) {
	f, err := workertest.New("cli-job", workerTestSpec(), 1)
	if err != nil {
		t.Fatal(err)
	}
	out, err := runWorkerCmd(t, f, "--json", "--exit-when-done", "--threads", "1")
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
	if st, _ := f.State(); st != "published" {
		t.Errorf("job %s", st)
	}
}

func TestWorkerCommandFailedJob(t *testing.T) {
	f, err := workertest.New("cli-fail", workerTestSpec(), 1)
	if err != nil {
		t.Fatal(err)
	}
	f.FailAfterProvisioning = true
	out, err := runWorkerCmd(t, f, "--exit-when-done")
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

// noConn is a gRPC connection that is never used.
type noConn struct{}

func (noConn) Invoke(context.Context, string, any, any, ...grpc.CallOption) error {
	return errors.New("unused")
}
func (noConn) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, errors.New("unused")
}

// artifactOrch is the fake orchestrator with a node client's artifact
// store beside it.
type artifactOrch struct {
	worker.Orchestrator
	nc    *nodeclient.Client
	peers []transfer.Peer
}

func (a *artifactOrch) ArtifactServer(c nodeclient.ServeConfig) (*transfer.Server, error) {
	return a.nc.ArtifactServer(c)
}
func (a *artifactOrch) SetSources(p []transfer.Peer) { a.peers = p; a.nc.SetSources(p) }

// --artifacts-listen serves the node's store while the worker runs (its
// address is in the registered event), --artifacts-peers become sources;
// without a store behind the orchestrator client the flags are a usage
// error.
func TestWorkerCommandArtifacts(t *testing.T) {
	f, err := workertest.New("cli-arts", workerTestSpec(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runWorkerCmd(t, f, "--artifacts-listen", "127.0.0.1:0"); !isUsage(err) || !strings.Contains(err.Error(), "artifact store") {
		t.Fatalf("--artifacts-listen without a store: %v", err)
	}
	pk, _ := nodekey.Generate(nil)
	peerKey := nodekey.PublicHex(pk)
	var orch *artifactOrch
	dial := func(ctx context.Context, o DialOptions) (worker.Orchestrator, io.Closer, error) {
		nc, err := nodeclient.New(nodeclient.Config{Key: o.Key, Conn: noConn{}, Dir: t.TempDir()})
		if err != nil {
			return nil, nil, err
		}
		orch = &artifactOrch{Orchestrator: f.Client(o.Key), nc: nc}
		return orch, nc, nil
	}
	cmd := workerRoot(dial)
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"worker", "--orchestrator", "fake:9550", "--data", t.TempDir(), "--heartbeat", "1s", "--ring-tls=false",
		"--exit-when-done", "--threads", "1", "--artifacts-listen", "127.0.0.1:0", "--artifacts-peers", peerKey + "@127.0.0.1:1,127.0.0.1:2"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("gym worker: %v\n%s", err, out.String())
	}
	if !regexp.MustCompile(`registered .*artifacts 127\.0\.0\.1:[1-9][0-9]*`).MatchString(out.String()) {
		t.Fatalf("the registered event names no artifact server:\n%s", out.String())
	}
	if len(orch.peers) != 2 || orch.peers[0].URL != "http://127.0.0.1:1" || hex.EncodeToString(orch.peers[0].Key) != peerKey || orch.peers[1].Key != nil {
		t.Fatalf("sources %+v", orch.peers)
	}
}
