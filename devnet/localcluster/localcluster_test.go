package localcluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zooai/gym/devnet/localcluster"
	"github.com/zooai/gym/node/worker"
	"github.com/zooai/gym/protocol/jobspec"
)

// tinySpec is a job that trains in well under a second per epoch.
func tinySpec(epochs, stepsPerEpoch, nodes int) jobspec.Spec {
	g := jobspec.DefaultGSPO()
	g.AggregateInterval, g.GroupSize, g.LoRARank, g.LoRAAlpha = 2, 4, 4, 8
	g.MaxSeqLen, g.GradientAccumulationSteps, g.LearningRate, g.WarmupSteps = 12, 1, 2e-3, 0
	return jobspec.Spec{Model: "builtin", Dataset: "addition", Epochs: epochs, MinNodes: nodes, MaxNodes: nodes,
		StepsPerEpoch: stepsPerEpoch, PromptsPerStep: 2, Seed: 7, GSPO: g}
}

// TestRunInProcess runs a small job to its end with three in-process
// workers and checks the run's files and summary.
func TestRunInProcess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "up")
	if err := localcluster.PrepareDir(dir); err != nil {
		t.Fatal(err)
	}
	cfg := localcluster.TestConfig(dir, 3)
	var mu sync.Mutex
	kinds := map[string]int{}
	cfg.OnEvent = func(ev localcluster.Event) {
		mu.Lock()
		kinds[ev.Kind]++
		mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sum, err := localcluster.Run(ctx, cfg, tinySpec(2, 4, 3))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != "published" || !sum.Settled || len(sum.Epochs) != 2 || len(sum.Nodes) != 3 || sum.CheckpointCID == "" {
		t.Fatalf("summary %+v", sum)
	}
	for _, n := range sum.Nodes {
		if n.Accepted != 4 || n.Rejected != 0 || n.Slashed || n.Reward <= 0 {
			t.Errorf("node %+v: want 4 accepted deltas, a reward, no slash", n)
		}
	}
	for _, f := range []string{"summary.json", "events.jsonl", "hanzod.log", "reward.png", "checkpoint/adapter_model.safetensors",
		"workers/w0/node.key", "workers/w0/events.jsonl", "workers/w0/worker.log", "hanzod/hanzod.key"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	ds, _ := filepath.Glob(filepath.Join(dir, "deltas", "*.delta"))
	if len(ds) != 12 {
		t.Errorf("%d deltas kept, want 12", len(ds))
	}
	var onDisk localcluster.Summary
	if b, err := os.ReadFile(filepath.Join(dir, "summary.json")); err != nil || json.Unmarshal(b, &onDisk) != nil || onDisk.CheckpointCID != sum.CheckpointCID {
		t.Errorf("summary.json does not match the summary: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, k := range []string{localcluster.EventListening, localcluster.EventRegistered, localcluster.EventSubmitted, localcluster.EventWorker, localcluster.EventHanzod} {
		if kinds[k] == 0 {
			t.Errorf("no %s event (%v)", k, kinds)
		}
	}
	if sum.Events["worker_"+worker.EventJobDone] != 3 || sum.Events["checkpoint_published"] != 2 {
		t.Errorf("event counts %v", sum.Events)
	}
}

// TestKillRestart kills a worker in the first epoch and starts it again:
// the others finish the epoch without it, it rejoins in the second.
func TestKillRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := localcluster.TestConfig(dir, 4)
	cfg.Kill = &localcluster.Kill{Worker: 0, Epoch: 1, Step: 1, Restart: true, RestartAfter: 100 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sum, err := localcluster.Run(ctx, cfg, tinySpec(2, 4, 4))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != "published" {
		t.Fatalf("job %s (%s)", sum.Status, sum.Reason)
	}
	if w0 := sum.Nodes[0]; !w0.Killed || !w0.Restart || w0.Accepted != 2 || sum.RecoverySeconds == nil {
		t.Errorf("w0 %+v, recovery %v: want killed before its first sync, restarted, 2 deltas in epoch 2", w0, sum.RecoverySeconds)
	}
	for _, n := range sum.Nodes[1:] {
		if n.Accepted != 4 {
			t.Errorf("survivor %+v", n)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for name, mod := range map[string]func(*localcluster.Config){
		"no dir":              func(c *localcluster.Config) { c.Dir = "" },
		"attack":              func(c *localcluster.Config) { c.Attacks = []string{"bitflip"} },
		"attacks":             func(c *localcluster.Config) { c.Attacks = make([]string, 5) },
		"kill":                func(c *localcluster.Config) { c.Kill = &localcluster.Kill{Worker: 4, Epoch: 1, Step: 1} },
		"fast process":        func(c *localcluster.Config) { c.Gym = "gym" },
		"fail < beat":         func(c *localcluster.Config) { c.FailAfter = c.Heartbeat },
		"no hanzod cpu":       func(c *localcluster.Config) { c.Threads = 0 },
		"backend":             func(c *localcluster.Config) { c.Backends = []string{"go", "jax"} },
		"backends":            func(c *localcluster.Config) { c.Backends = make([]string, 5) },
		"strength, no attack": func(c *localcluster.Config) { c.AttackParams.IPMEpsilon = 2 },
		"strength of another": func(c *localcluster.Config) {
			c.Attacks, c.AttackParams.IPMEpsilon = []string{"", "", "", worker.AttackALIE}, 2
		},
	} {
		c := localcluster.TestConfig(t.TempDir(), 4)
		mod(&c)
		if err := c.Validate(); !errors.Is(err, localcluster.ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
	c := localcluster.DefaultConfig()
	c.Dir = t.TempDir()
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
}

func TestPrepareDir(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "precious"), []byte("x"), 0o644)
	if err := localcluster.PrepareDir(dir); !errors.Is(err, localcluster.ErrNotEmpty) {
		t.Fatalf("a foreign directory: %v", err)
	}
	run := filepath.Join(dir, "run")
	if err := localcluster.PrepareDir(run); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(run, "old"), []byte("x"), 0o644)
	if err := localcluster.PrepareDir(run); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(run, "old")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an earlier run's file survived: %v", err)
	}
}

// TestRunProcesses runs a small job with `gym worker` processes (the gym
// binary built once into a temporary directory), the code path of gym up.
func TestRunProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds gym and runs worker processes")
	}
	gym := filepath.Join(t.TempDir(), "gym")
	if out, err := exec.Command("go", "build", "-o", gym, "../../cmd/gym").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	cfg := localcluster.DefaultConfig()
	// Four: hanzod takes the equivocator out of the ring, and a ring
	// continues only with three.
	cfg.Dir, cfg.Workers, cfg.Gym, cfg.Threads = dir, 4, gym, 1
	cfg.MinEpochSamples = 1 // a tiny job
	cfg.Attacks = []string{"", "", "", worker.AttackEquivocate}
	var mu sync.Mutex
	var events []localcluster.Event
	cfg.OnEvent = func(ev localcluster.Event) {
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sum, err := localcluster.Run(ctx, cfg, tinySpec(1, 4, 4))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != "published" || len(sum.Nodes) != 4 {
		t.Fatalf("summary %+v", sum)
	}
	if bad := sum.Nodes[3]; bad.Attack != worker.AttackEquivocate || !bad.Slashed || bad.Rejected == 0 {
		t.Errorf("equivocating worker %+v: want slashed, a rejected delta", bad)
	}
	// The worker's events came over its stdout, and were kept.
	mu.Lock()
	defer mu.Unlock()
	steps := 0
	for _, ev := range events {
		if ev.Kind == localcluster.EventWorker && ev.Work.Kind == worker.EventStep && ev.Worker.Index == 0 {
			steps++
		}
	}
	if steps != 4 {
		t.Errorf("%d step events of w0, want 4", steps)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "workers", "w0", "events.jsonl")); err != nil || len(b) == 0 {
		t.Errorf("w0's events.jsonl: %v", err)
	}
}

// TestInBoundAttacks runs a small job with three honest in-process workers
// and one mounting an in-bound attack built from the honest updates of
// each sync (read through the test cluster's side channel), the job
// declaring f = 1 with a median merge. At the weak settings the outlier
// tests were measured against (ALIE's paper z, 0 for f = 1 of 4; IPM ε =
// 0.1; the plain mimic) the keyed share (10%) is left as it is: the
// attacker is caught by its outlier replays or at least earns less than
// every honest node. At full strength (the defaults: ALIE z = 1.5, IPM ε
// = 2; adaptive ALIE; the noisy mimic) the outlier tests are built to let
// them through — adaptive ALIE never is an outlier, by construction — so
// the keyed share replays every delta, and that catches the attacker. No
// honest node is slashed. Nothing here depends on timing: the side
// channel waits for the honest deltas, and the verdicts are the judge's
// deterministic ones.
func TestInBoundAttacks(t *testing.T) {
	if testing.Short() {
		t.Skip("seven small jobs")
	}
	paperZ := 0.0 // attack.ALIEZ(4, 1)
	for _, c := range []struct {
		attack string
		p      worker.AttackParams
		full   bool
	}{
		{worker.AttackALIE, worker.AttackParams{ALIEZ: &paperZ}, false},
		{worker.AttackIPM, worker.AttackParams{IPMEpsilon: 0.1}, false},
		{worker.AttackMimic, worker.AttackParams{}, false},
		{worker.AttackALIE, worker.AttackParams{}, true},
		{worker.AttackALIEAdaptive, worker.AttackParams{}, true},
		{worker.AttackIPM, worker.AttackParams{}, true},
		{worker.AttackMimicNoise, worker.AttackParams{}, true},
	} {
		t.Run(fmt.Sprintf("%s/full %v", c.attack, c.full), func(t *testing.T) {
			dir := t.TempDir()
			cfg := localcluster.TestConfig(dir, 4)
			cfg.Attacks, cfg.AttackParams = []string{"", "", "", c.attack}, c.p
			spec := tinySpec(2, 4, 4)
			spec.Byzantine, spec.Aggregation = 1, "median"
			if c.full {
				spec.SpotCheckBP = 10000
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			sum, err := localcluster.Run(ctx, cfg, spec)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Status != "published" || len(sum.Nodes) != 4 {
				t.Fatalf("job %s (%s)", sum.Status, sum.Reason)
			}
			bad := sum.Nodes[3]
			minHonest := sum.Nodes[0].Reward
			for _, n := range sum.Nodes[:3] {
				if n.Slashed {
					t.Errorf("honest %s slashed: %v", n.Name, n.Slashes)
				}
				minHonest = min(minHonest, n.Reward)
			}
			switch {
			case c.full && !bad.Slashed:
				t.Errorf("attacker %+v not caught with every delta replayed", bad)
			case !bad.Slashed && bad.Reward >= minHonest:
				t.Errorf("attacker %+v neither caught nor paid less than every honest node (%v)", bad, minHonest)
			}
			// It did attack with the honest updates, not its own.
			log, _ := os.ReadFile(filepath.Join(dir, "workers", "w3", "worker.log"))
			if strings.Contains(string(log), "no honest update") {
				t.Errorf("the attacker saw no honest update:\n%s", log)
			}
			var targeted, attacker int
			for _, e := range sum.Epochs {
				targeted += len(e.Targeted)
				for _, s := range e.Targeted {
					if strings.Contains(s, bad.ID) {
						attacker++
					}
				}
			}
			if c.attack == worker.AttackALIEAdaptive && (attacker != 0 || !strings.Contains(string(log), "attack=alie-adaptive") || strings.Contains(string(log), "every z is flagged")) {
				t.Errorf("adaptive ALIE was replayed as an outlier %d times (or found no z):\n%s", attacker, log)
			}
			t.Logf("attacker: slashed %v, reward %.2f (honest ≥ %.2f); %d outlier replays, %d of the attacker's", bad.Slashed, bad.Reward, minHonest, targeted, attacker)
		})
	}
}

// TestRunOuterReplays runs a job with an outer optimiser (Nesterov
// momentum, three syncs an epoch, two of them all-reduced) and every delta
// spot-checked: the workers step the ring's mean by the job's rule, the
// judge rebuilds the same ring results, and every honest delta replays bit
// for bit.
func TestRunOuterReplays(t *testing.T) {
	dir := t.TempDir()
	cfg := localcluster.TestConfig(dir, 3)
	spec := tinySpec(2, 6, 3)
	spec.GSPO.OuterLR, spec.GSPO.OuterMomentum = 1.41, 0.5
	spec.SpotCheckBP = 10000
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sum, err := localcluster.Run(ctx, cfg, spec)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != "published" || len(sum.Epochs) != 2 {
		t.Fatalf("summary %+v", sum)
	}
	for _, e := range sum.Epochs {
		if e.Deltas != 9 || e.SpotChecks != 9 || len(e.RingDisagreements) != 0 || len(e.Excluded) != 0 || len(e.Forfeited) != 0 {
			t.Errorf("epoch %+v: want 9 deltas, all replayed, no disagreement or exclusion", e)
		}
	}
	for _, n := range sum.Nodes {
		if n.Accepted != 6 || n.Rejected != 0 || n.Slashed {
			t.Errorf("node %+v: want 6 accepted deltas and no slash", n)
		}
	}
}

// TestRunTwoLevelRing runs a small job whose ring is a two-level one (4
// in-process workers in 2 groups of 2): every delta is accepted and the
// judge, rebuilding each sync with the ring's groups, finds no delta whose
// base disagrees with the ring (a flat reconstruction would disagree).
func TestRunTwoLevelRing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "up")
	if err := localcluster.PrepareDir(dir); err != nil {
		t.Fatal(err)
	}
	cfg := localcluster.TestConfig(dir, 4)
	cfg.RingGroups = 2
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sum, err := localcluster.Run(ctx, cfg, tinySpec(1, 4, 4))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != "published" || len(sum.Epochs) != 1 || len(sum.Nodes) != 4 {
		t.Fatalf("summary %+v", sum)
	}
	for _, n := range sum.Nodes {
		if n.Accepted != 2 || n.Rejected != 0 || n.Slashed { // 2 syncs: sync 2 starts from the rebuilt sync 1
			t.Errorf("node %+v: want 2 accepted deltas, no slash", n)
		}
	}
	if e := sum.Epochs[0]; len(e.Excluded) != 0 || len(e.RingDisagreements) != 0 {
		t.Fatalf("epoch 1: excluded %v, ring disagreements %v", e.Excluded, e.RingDisagreements)
	}
	b, err := os.ReadFile(filepath.Join(dir, "events.jsonl"))
	if err != nil || !strings.Contains(string(b), `"groups":[2,2]`) {
		t.Fatalf("no ring configured in groups of 2: %v", err)
	}
	// The judge's report: sync 1's result was rebuilt (a reconstruction
	// matching no configuration would list the sync as unknown).
	var rep struct {
		RingUnknown []int `json:"ring_unknown"`
	}
	if b, err := os.ReadFile(filepath.Join(dir, "hanzod", "checkpoints", "job-00000001", "merge-0001.json")); err != nil || json.Unmarshal(b, &rep) != nil {
		t.Fatalf("merge report: %v", err)
	}
	if len(rep.RingUnknown) != 0 {
		t.Fatalf("syncs %v matched no ring configuration", rep.RingUnknown)
	}
}
