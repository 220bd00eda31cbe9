package main

import (
	"bufio"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zooai/gym/keys/nodekey"
	gymworker "github.com/zooai/gym/node/worker"
	"github.com/zooai/gym/protocol/ring/ringbench"
)

// TestNetnsEndToEnd runs the system across hosts: hanzod in one network
// namespace, four workers in four others (each its own IP on a bridge,
// links shaped to 1 Gbit/s), gRPC and the ring over TLS 1.3 between hosts,
// the job submitted and its checkpoint fetched with the CLI as a submitter
// would. One worker is cut off the network in the middle of the first
// epoch: the others report it, hanzod repairs the ring, the job publishes
// with three. Opt in with GYM_NETNS=1 (root, iproute2).
func TestNetnsEndToEnd(t *testing.T) {
	if os.Getenv("GYM_NETNS") != "1" {
		t.Skip("set GYM_NETNS=1 (root, iproute2) to run the network-namespace test bed")
	}
	hanzod := buildHanzod(t)
	bed := &ringbench.Bed{Prefix: "gymee", N: 5, Rate: "1gbit"}
	if err := bed.Up(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bed.Down)
	dir := t.TempDir()
	data := filepath.Join(dir, "hanzod")
	in := func(i int, name string, args ...string) *exec.Cmd { return bed.Exec(i, name, args...) }
	run := func(i int, args ...string) string {
		t.Helper()
		out, err := in(i, gymBin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("gym %v in %s: %v\n%s", args, bed.NS(i), err, out)
		}
		return string(out)
	}

	// hanzod on host 0: TLS (self-signed, pinned by the clients), the
	// artifact server on its bridge address, its signing key staked below
	// (merges need a staked orchestrator key).
	key, err := nodekey.Generate(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "hanzod.key")
	if err := nodekey.Save(keyFile, key, false); err != nil {
		t.Fatal(err)
	}
	h := in(0, hanzod, "--data", data, "--listen", "0.0.0.0:9550", "--metrics", "", "--artifacts", "0.0.0.0:9552",
		"--artifacts-advertise", bed.Addr(0)+":9552", "--epoch-grace", "30s", "--key", keyFile)
	hlog, _ := os.Create(filepath.Join(dir, "hanzod.log"))
	h.Stdout, h.Stderr = hlog, hlog
	if err := h.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Process.Kill(); h.Wait(); hlog.Close() })
	cert := filepath.Join(data, "tls-cert.pem")
	local := []string{"--orchestrator", "grpcs://127.0.0.1:9550", "--tls-ca", cert}
	remote := []string{"--orchestrator", "grpcs://" + bed.Addr(0) + ":9550", "--tls-ca", cert}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(cert); err == nil {
			if out, err := in(0, gymBin, append(local, "node", "list")...).CombinedOutput(); err == nil {
				break
			} else if time.Now().After(deadline) {
				b, _ := os.ReadFile(filepath.Join(dir, "hanzod.log"))
				t.Fatalf("hanzod did not come up: %s\n%s", out, b)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}

	account := hex.EncodeToString(key.Public().(ed25519.PublicKey))
	run(0, append(local, "ledger", "deposit", account, "50000")...)
	run(0, append(local, "ledger", "bond", account, "50000")...)

	// Four staked workers on hosts 1..4.
	type worker struct {
		cmd    *exec.Cmd
		mu     sync.Mutex
		deltas int
		done   chan struct{}
	}
	workers := make([]*worker, 5)
	for i := 1; i <= 4; i++ {
		wdir := filepath.Join(dir, fmt.Sprintf("w%d", i))
		os.MkdirAll(wdir, 0o755)
		id := strings.TrimSpace(run(i, "keygen", "--out", filepath.Join(wdir, "node.key")))
		run(0, append(local, "ledger", "deposit", id, "20000")...)
		run(0, append(local, "ledger", "bond", id, "10000")...)
		w := &worker{done: make(chan struct{})}
		w.cmd = in(i, gymBin, append(remote, "worker", "--key", filepath.Join(wdir, "node.key"), "--data", wdir,
			"--listen", bed.Addr(i)+":9600", "--probe-listen", bed.Addr(i)+":9601", "--threads", "1", "--json",
			"--exit-when-done", "--ring-timeout", "10s")...)
		stdout, _ := w.cmd.StdoutPipe()
		wlog, _ := os.Create(filepath.Join(dir, fmt.Sprintf("w%d.log", i)))
		w.cmd.Stderr = wlog
		if err := w.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			defer close(w.done)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				var ev gymworker.Event
				if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Kind == "delta_submitted" {
					w.mu.Lock()
					w.deltas++
					w.mu.Unlock()
				}
			}
			w.cmd.Wait()
			wlog.Close()
		}()
		workers[i] = w
		t.Cleanup(func() {
			w.cmd.Process.Kill()
			<-w.done
		})
	}

	job := filepath.Join(dir, "job.yaml")
	os.WriteFile(job, []byte(`model: builtin
dataset: addition
epochs: 2
min_nodes: 4
max_nodes: 4
aggregation: median
byzantine: 1
steps_per_epoch: 10
prompts_per_step: 4
gspo:
  importance_sampling_level: sequence
  beta: 0.1
  group_size: 8
  aggregate_interval: 5
  use_4bit: false
  lora_rank: 8
  lora_alpha: 16
  max_seq_len: 12
  gradient_accumulation_steps: 1
  learning_rate: 0.002
  warmup_steps: 0
  weight_decay: 0
`), 0o644)
	id := strings.TrimSpace(run(0, append(local, "job", "submit", job)...))

	// Cut host 4 off once it has submitted its first delta.
	cut := false
	var st struct {
		State   string   `json:"state"`
		Reason  string   `json:"reason"`
		CIDs    []string `json:"cids"`
		Settled bool     `json:"settled"`
		Ring    *struct {
			Members []string `json:"members"`
		} `json:"ring"`
	}
	deadline = time.Now().Add(4 * time.Minute)
	for {
		w := workers[4]
		w.mu.Lock()
		n := w.deltas
		w.mu.Unlock()
		if !cut && n >= 1 {
			if err := bed.Cut(4, true); err != nil {
				t.Fatal(err)
			}
			cut = true
		}
		if err := json.Unmarshal([]byte(run(0, append(local, "job", "status", id, "--json")...)), &st); err != nil {
			t.Fatal(err)
		}
		if st.State == "published" || st.State == "failed" {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "hanzod.log"))
			t.Fatalf("job %s still %s after 4 minutes\n%s", id, st.State, b)
		}
		time.Sleep(time.Second)
	}
	if st.State != "published" || !cut {
		t.Fatalf("job %s: %s (%s), cut %v", id, st.State, st.Reason, cut)
	}
	if st.Ring == nil || len(st.Ring.Members) != 3 {
		t.Errorf("final ring %+v, want the three hosts that stayed connected", st.Ring)
	}

	// A submitter on another host fetches the checkpoint and evaluates it.
	ckpt := filepath.Join(dir, "checkpoint")
	run(1, append(remote, "job", "checkpoint", id, "--out", ckpt)...)
	var ev struct {
		Accuracy     float64 `json:"accuracy"`
		BaseAccuracy float64 `json:"base_accuracy"`
	}
	// The JSON is stdout alone (gym eval reports progress on stderr).
	evOut, err := in(1, gymBin, "eval", "--checkpoint", ckpt, "--json").Output()
	if err != nil {
		t.Fatalf("gym eval in %s: %v\n%s", bed.NS(1), err, evOut)
	}
	if err := json.Unmarshal(evOut, &ev); err != nil {
		t.Fatalf("gym eval --json: %v\n%s", err, evOut)
	}
	if ev.Accuracy <= ev.BaseAccuracy {
		t.Errorf("checkpoint accuracy %.3f, base %.3f", ev.Accuracy, ev.BaseAccuracy)
	}
	t.Logf("published %s across 5 namespaces with host 4 cut off: accuracy %.3f (base %.3f), CID %s",
		id, ev.Accuracy, ev.BaseAccuracy, st.CIDs[len(st.CIDs)-1])
}
