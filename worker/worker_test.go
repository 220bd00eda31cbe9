package worker_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zooai/gym/internal/promdoc"
	"github.com/zooai/gym/jobconf"
	"github.com/zooai/gym/jobspec"
	"github.com/zooai/gym/nodekey"
	"github.com/zooai/gym/worker"
	"github.com/zooai/gym/worker/workertest"
)

// tinySpec is a job that trains in well under a second per epoch.
func tinySpec(epochs, stepsPerEpoch int) jobspec.Spec {
	g := jobspec.DefaultGSPO()
	g.AggregateInterval = 2
	g.GroupSize = 4
	g.LoRARank, g.LoRAAlpha = 4, 8
	g.MaxSeqLen = 12
	g.GradientAccumulationSteps = 1
	g.LearningRate = 2e-3
	g.WarmupSteps = 0
	return jobspec.Spec{Model: "builtin", Dataset: "addition", Epochs: epochs, MinNodes: 3, StepsPerEpoch: stepsPerEpoch,
		PromptsPerStep: 2, Seed: 7, GSPO: g}
}

const testGap = 20 * time.Millisecond

// node is one worker under test.
type node struct {
	id     string
	key    ed25519.PrivateKey
	cancel context.CancelFunc
	done   chan error

	mu     sync.Mutex
	events []worker.Event
	on     func(worker.Event) // called after recording, on the worker's goroutine
}

func (n *node) Events(kind string) []worker.Event {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []worker.Event
	for _, e := range n.events {
		if kind == "" || e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func testConfig() worker.Config {
	c := worker.DefaultConfig()
	c.Heartbeat, c.MinGap, c.MaxBackoff = 50*time.Millisecond, testGap, 200*time.Millisecond
	c.RingTimeout = 2 * time.Second
	c.ProbeBytes, c.ProbeTimeout = 64<<10, 2*time.Second
	c.ExitWhenDone = true
	return c
}

// startNodes starts n workers against f; mod may change each config.
func startNodes(t *testing.T, ctx context.Context, f *workertest.Fake, n int, mod func(i int, c *worker.Config, nd *node)) []*node {
	t.Helper()
	var nodes []*node
	for i := range n {
		// Fixed keys: a worker's data is a function of its key, so runs
		// are reproducible.
		seed := sha256.Sum256(fmt.Appendf(nil, "%s/%d", t.Name(), i))
		key := ed25519.NewKeyFromSeed(seed[:])
		nd := &node{id: nodekey.PublicHex(key), key: key, done: make(chan error, 1)}
		c := testConfig()
		c.Key, c.Orchestrator = key, f.Client(key)
		c.OnEvent = func(e worker.Event) {
			nd.mu.Lock()
			nd.events = append(nd.events, e)
			on := nd.on
			nd.mu.Unlock()
			if testing.Verbose() {
				t.Logf("w%d %s", i, e)
			}
			if on != nil {
				on(e)
			}
		}
		if mod != nil {
			mod(i, &c, nd)
		}
		w, err := worker.New(c)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		nd.cancel = cancel
		go func() { nd.done <- w.Run(wctx) }()
		nodes = append(nodes, nd)
	}
	t.Cleanup(func() {
		for _, nd := range nodes {
			nd.cancel()
		}
	})
	return nodes
}

func waitDone(t *testing.T, ctx context.Context, nodes ...*node) {
	t.Helper()
	for i, nd := range nodes {
		select {
		case err := <-nd.done:
			if err != nil {
				t.Errorf("worker %d: Run: %v", i, err)
			}
		case <-ctx.Done():
			t.Fatalf("worker %d did not finish: %v", i, ctx.Err())
		}
	}
}

type slot struct{ epoch, sync int }

// checkReduced checks that every node reports the same adapter after each
// ring sync and returns the slots seen.
func checkReduced(t *testing.T, nodes ...*node) map[slot]string {
	t.Helper()
	got := map[slot]string{}
	for i, nd := range nodes {
		for _, e := range nd.Events(worker.EventRingReduced) {
			s := slot{e.Epoch, e.Sync}
			if prev, ok := got[s]; ok && prev != e.Adapter {
				t.Errorf("worker %d: adapter after epoch %d sync %d is %s, another worker has %s", i, e.Epoch, e.Sync, e.Adapter, prev)
			}
			got[s] = e.Adapter
		}
	}
	return got
}

func checkFake(t *testing.T, f *workertest.Fake, nodes ...*node) {
	t.Helper()
	for _, e := range f.Errors() {
		t.Error("fake:", e)
	}
	for i, nd := range nodes {
		n, ok := f.Node(nd.id)
		if !ok {
			t.Errorf("worker %d never registered", i)
		}
		if n.HeartbeatTooSoon > 0 {
			t.Errorf("worker %d: %d heartbeats closer than %v", i, n.HeartbeatTooSoon, testGap)
		}
	}
	for s, m := range f.Bases() {
		var first string
		for _, b := range m {
			if first != "" && b != first {
				t.Errorf("epoch %d sync %d: deltas name different bases: %v", s.Epoch, s.Sync, m)
				break
			}
			first = b
		}
	}
}

func TestRingOfThree(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	spec := tinySpec(2, 4) // 2 syncs per epoch: one ring sync, one merge
	f, err := workertest.New("job-3", spec, 3)
	if err != nil {
		t.Fatal(err)
	}
	f.MinGap = testGap
	dir := t.TempDir()
	var forgot sync.Once
	scraped := make(chan string, 1)
	nodes := startNodes(t, ctx, f, 3, func(i int, c *worker.Config, nd *node) {
		if i == 0 {
			c.DataDir = dir
		}
		if i == 1 { // the orchestrator "restarts" and forgets this node once
			nd.on = func(e worker.Event) {
				if e.Kind == worker.EventEpochStarted {
					forgot.Do(func() { f.Forget(nd.id) })
				}
			}
		}
		if i == 2 { // serves its ring metrics: scrape them when the job is done
			c.MetricsAddr = "127.0.0.1:0"
			var addr string
			nd.on = func(e worker.Event) {
				if _, a, ok := strings.Cut(e.Detail, " metrics "); ok && e.Kind == worker.EventRegistered {
					addr, _, _ = strings.Cut(a, " ")
				}
				if e.Kind == worker.EventJobDone {
					resp, err := http.Get("http://" + addr + "/metrics")
					if err != nil {
						scraped <- err.Error()
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					scraped <- string(b)
				}
			}
		}
	})
	waitDone(t, ctx, nodes...)
	var metrics string
	select {
	case metrics = <-scraped:
	default:
		t.Fatal("worker 2 was not scraped at job_done")
	}
	reduced := len(nodes[2].Events(worker.EventRingReduced))
	for _, line := range []string{
		fmt.Sprintf("gym_ring_calls_total %d\n", reduced),
		`gym_ring_evidence_total{kind="corrupt"} 0` + "\n",
		"gym_ring_last_busbw_bytes_per_second ",
		fmt.Sprintf("gym_worker_events_total{kind=%q} %d\n", worker.EventStep, len(nodes[2].Events(worker.EventStep))),
		`gym_worker_deltas_total{verdict="accepted"} 4` + "\n",
		"gym_worker_step 8\n",
		"gym_worker_epoch 2\n",
	} {
		if reduced == 0 || !strings.Contains(metrics, line) {
			t.Errorf("worker 2 metrics (after %d ring syncs) lack %q:\n%s", reduced, line, metrics)
		}
	}
	// docs/metrics.md lists exactly the worker's series, with their types.
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range promdoc.Compare([]byte(metrics), doc, "gym_worker_") {
		t.Error("worker:", d)
	}
	if st, _ := f.State(); st != "published" {
		t.Fatalf("job is %s, want published", st)
	}
	checkFake(t, f, nodes...)
	deltas := f.Deltas()
	for e := 1; e <= 2; e++ {
		for k := 1; k <= 2; k++ {
			if got := len(deltas[workertest.Slot{Epoch: e, Sync: k}]); got != 3 {
				t.Errorf("epoch %d sync %d: %d deltas, want 3", e, k, got)
			}
		}
	}
	if len(deltas) != 4 {
		t.Errorf("deltas for %d slots, want 4", len(deltas))
	}
	red := checkReduced(t, nodes...)
	if len(red) != 2 {
		t.Errorf("ring syncs %v, want epoch 1 and 2 sync 1", red)
	}
	// Epoch 2 starts from the fake's merge of epoch 1, on every worker.
	cp := f.Checkpoint("fake-job-3-epoch-1")
	if cp == nil {
		t.Fatal("no checkpoint of epoch 1")
	}
	for i, nd := range nodes {
		loaded := nd.Events(worker.EventCheckpointLoaded)
		if len(loaded) != 1 || loaded[0].Adapter != jobconf.Digest(cp) {
			t.Errorf("worker %d: checkpoint_loaded %+v, want one with adapter %s", i, loaded, jobconf.Digest(cp))
		}
		if d := nd.Events(worker.EventJobDone); len(d) != 1 || d[0].State != "published" {
			t.Errorf("worker %d: job_done events %+v", i, d)
		}
		if got := len(nd.Events(worker.EventStep)); got != 8 {
			t.Errorf("worker %d: %d steps, want 8", i, got)
		}
		if got := len(nd.Events(worker.EventBandwidth)); got != 1 {
			t.Errorf("worker %d: %d bandwidth reports, want 1", i, got)
		}
	}
	if n, _ := f.Node(nodes[1].id); n.Registrations != 2 {
		t.Errorf("forgotten worker registered %d times, want 2", n.Registrations)
	}
	// Worker 0 kept its accepted deltas and its sequence counter.
	files, _ := filepath.Glob(filepath.Join(dir, "deltas", "*.delta"))
	if len(files) != 4 {
		t.Errorf("%d delta files in the data dir, want 4", len(files))
	}
	if _, err := os.Stat(filepath.Join(dir, "sequence")); err != nil {
		t.Error(err)
	}
}

func TestNodeLostMidEpoch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	spec := tinySpec(2, 6) // 3 syncs per epoch: two ring syncs
	spec.MinNodes = 4
	f, err := workertest.New("job-fault", spec, 4)
	if err != nil {
		t.Fatal(err)
	}
	f.MinGap, f.DeadAfter = testGap, 300*time.Millisecond
	const victim = 2
	nodes := startNodes(t, ctx, f, 4, func(i int, c *worker.Config, nd *node) {
		if i == victim { // dies right after the first ring sync
			nd.on = func(e worker.Event) {
				if e.Kind == worker.EventRingReduced {
					nd.cancel()
				}
			}
		}
	})
	survivors := slices.Delete(slices.Clone(nodes), victim, victim+1)
	waitDone(t, ctx, nodes[victim])
	waitDone(t, ctx, survivors...)
	if st, _ := f.State(); st != "published" {
		t.Fatalf("job is %s, want published", st)
	}
	checkFake(t, f, survivors...)
	reports, _ := f.Reports()
	named := 0
	for _, r := range reports {
		if r.Node == nodes[victim].id {
			named++
		}
	}
	if named == 0 {
		t.Errorf("no suspect report names the lost node; reports %+v", reports)
	}
	ringNow, gen := f.Ring()
	if slices.Contains(ringNow, nodes[victim].id) || len(ringNow) != 3 || gen < 2 {
		t.Errorf("ring after the loss: %d members (gen %d), victim in it: %v", len(ringNow), gen, slices.Contains(ringNow, nodes[victim].id))
	}
	red := checkReduced(t, survivors...)
	for _, s := range []slot{{1, 1}, {1, 2}, {2, 1}, {2, 2}} {
		if red[s] == "" {
			t.Errorf("no ring sync for epoch %d sync %d", s.epoch, s.sync)
		}
	}
	recovered := 0
	for _, nd := range survivors {
		for _, e := range nd.Events(worker.EventRingRecovered) {
			recovered++
			if e.Epoch != 1 || e.Sync != 2 || e.Seconds <= 0 {
				t.Errorf("ring_recovered %+v, want epoch 1 sync 2 with a duration", e)
			}
			t.Logf("recovered in %.2fs", e.Seconds)
		}
	}
	if recovered == 0 {
		t.Error("no survivor reported a recovered ring")
	}
	deltas := f.Deltas()
	if got := len(deltas[workertest.Slot{Epoch: 1, Sync: 1}]); got != 4 {
		t.Errorf("epoch 1 sync 1: %d deltas, want 4", got)
	}
	for _, s := range []workertest.Slot{{Epoch: 1, Sync: 2}, {Epoch: 1, Sync: 3}, {Epoch: 2, Sync: 1}, {Epoch: 2, Sync: 3}} {
		if got := len(deltas[s]); got != 3 {
			t.Errorf("epoch %d sync %d: %d deltas, want 3", s.Epoch, s.Sync, got)
		}
	}
}

func TestSignFlipDetected(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	spec := tinySpec(1, 4)
	spec.PromptsPerStep = 4 // so that the attacker's change is not zero
	f, err := workertest.New("job-attack", spec, 3)
	if err != nil {
		t.Fatal(err)
	}
	f.MinGap, f.DeadAfter = testGap, 300*time.Millisecond
	const attacker = 0
	nodes := startNodes(t, ctx, f, 3, func(i int, c *worker.Config, nd *node) {
		if i == attacker {
			c.Attack = worker.AttackSignFlip
		}
	})
	waitDone(t, ctx, nodes...)
	bad := nodes[attacker].id
	reports, from := f.Reports()
	var found bool
	for i, r := range reports {
		if r.Node != bad || r.Kind != "norm" {
			continue
		}
		found = true
		if from[i] == bad {
			t.Errorf("the attacker reported itself")
		}
		var rep worker.SuspectReport
		if err := json.Unmarshal(r.Evidence, &rep); err != nil {
			t.Fatalf("evidence: %v", err)
		}
		if len(rep.Evidence) == 0 || rep.Evidence[0].Kind != "norm-exceeded" || rep.Evidence[0].SuspectID != bad ||
			!rep.Evidence[0].Signed || len(rep.Evidence[0].Payload) == 0 {
			t.Errorf("evidence %+v, want signed norm-exceeded frames from the attacker", rep.Evidence)
		}
	}
	if !found {
		t.Fatalf("no norm report against the attacker: %+v", reports)
	}
	if ringNow, _ := f.Ring(); slices.Contains(ringNow, bad) || len(ringNow) != 2 {
		t.Errorf("ring after the attack: %v", ringNow)
	}
	honest := nodes[1:]
	blamed := false
	for _, nd := range honest {
		for _, e := range nd.Events(worker.EventRingFailed) {
			if e.Suspect == bad && e.Reason == "norm" {
				blamed = true
			}
		}
	}
	if !blamed {
		t.Error("no honest worker's ring call failed with norm evidence against the attacker")
	}
	checkReduced(t, honest...)
	if st, _ := f.State(); st != "published" {
		t.Errorf("job is %s, want published", st)
	}
	for _, e := range nodes[attacker].Events(worker.EventDeltaSubmitted) {
		if e.Attack != worker.AttackSignFlip {
			t.Errorf("attacker's delta event %+v does not name the attack", e)
		}
	}
}

func TestEquivocationRejected(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	f, err := workertest.New("job-equiv", tinySpec(1, 4), 3)
	if err != nil {
		t.Fatal(err)
	}
	f.MinGap = testGap
	nodes := startNodes(t, ctx, f, 3, func(i int, c *worker.Config, nd *node) {
		if i == 0 {
			c.Attack = worker.AttackEquivocate
		}
	})
	waitDone(t, ctx, nodes...)
	rej := nodes[0].Events(worker.EventDeltaRejected)
	if len(rej) != 2 {
		t.Fatalf("equivocating worker: %d rejections, want 2 (one per sync)", len(rej))
	}
	for _, e := range rej {
		if e.Reason != "equivocation" {
			t.Errorf("rejection %+v, want equivocation", e)
		}
	}
	checkReduced(t, nodes...)
}

func TestRefusesMismatchedJob(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	spec := tinySpec(1, 2)
	spec.MinNodes = 1
	f, err := workertest.New("job-other", spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	f.MinGap = testGap
	refused := make(chan worker.Event, 1)
	nodes := startNodes(t, ctx, f, 1, func(i int, c *worker.Config, nd *node) {
		rank := 16
		c.Constraints.LoRARank = rank
		nd.on = func(e worker.Event) {
			if e.Kind == worker.EventJobRefused {
				refused <- e
			}
		}
	})
	select {
	case e := <-refused:
		if !strings.Contains(e.Reason, "lora_rank") {
			t.Errorf("refusal %q does not say why", e.Reason)
		}
	case <-ctx.Done():
		t.Fatal("the job was not refused")
	}
	nodes[0].cancel()
	waitDone(t, ctx, nodes...)
	if st, _ := f.State(); st != "provisioning" {
		t.Errorf("job is %s: the worker took part", st)
	}
	if got := len(nodes[0].Events(worker.EventBandwidth)); got != 0 {
		t.Errorf("refusing worker reported bandwidth %d times", got)
	}
}

func TestConstraints(t *testing.T) {
	beta := 0.1
	spec := tinySpec(1, 2)
	for _, tc := range []struct {
		c    worker.Constraints
		want string
	}{
		{worker.Constraints{}, ""},
		{worker.Constraints{Model: "builtin", Beta: &beta, LoRARank: 4, ImportanceSamplingLevel: "sequence"}, ""},
		{worker.Constraints{Model: "qwen"}, "model"},
		{worker.Constraints{Beta: new(0.2)}, "beta"},
		{worker.Constraints{LoRARank: 8}, "lora_rank"},
		{worker.Constraints{ImportanceSamplingLevel: "token"}, "importance_sampling_level"},
	} {
		err := tc.c.Check(spec)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.c, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: error %v, want one about %s", tc.c, err, tc.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	f, _ := workertest.New("j", tinySpec(1, 2), 1)
	for _, tc := range []struct {
		name string
		mod  func(*worker.Config)
	}{
		{"no key", func(c *worker.Config) { c.Key = nil }},
		{"no orchestrator", func(c *worker.Config) { c.Orchestrator = nil }},
		{"negative heartbeat", func(c *worker.Config) { c.Heartbeat = -time.Second }},
		{"attack", func(c *worker.Config) { c.Attack = "bitflip" }},
		{"threads", func(c *worker.Config) { c.Threads = -1 }},
	} {
		c := worker.DefaultConfig()
		c.Key, c.Orchestrator = key, f.Client(key)
		tc.mod(&c)
		if err := c.Validate(); !errors.Is(err, worker.ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", tc.name, err)
		}
	}
	c := worker.DefaultConfig()
	c.Key, c.Orchestrator = key, f.Client(key)
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
}

func TestEventJSON(t *testing.T) {
	e := worker.Event{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Kind: worker.EventRingReduced, Node: "ab",
		Job: "j", Epoch: 1, Sync: 2, Seconds: 0.5, Adapter: "cd"}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"time":"2026-01-02T03:04:05Z","kind":"ring_reduced","node":"ab","job":"j","epoch":1,"sync":2,"seconds":0.5,"adapter":"cd"}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	if s := fmt.Sprint(e); !strings.Contains(s, "ring_reduced") || !strings.Contains(s, "epoch=1") {
		t.Errorf("String: %q", s)
	}
}

// TestRingSuperseded: a member falls silent before its ring call and the
// orchestrator removes it while the others are inside the call, waiting for
// it. They must drop the call at once and finish on the new configuration,
// not wait for the ring timeout (set far above the test's bound here).
func TestRingSuperseded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	spec := tinySpec(1, 4) // 2 syncs: one ring sync
	spec.MinNodes = 4
	f, err := workertest.New("job-superseded", spec, 4)
	if err != nil {
		t.Fatal(err)
	}
	f.MinGap = testGap
	const victim = 3
	var victimID string
	nodes := startNodes(t, ctx, f, 4, func(i int, c *worker.Config, nd *node) {
		c.RingTimeout = 40 * time.Second
		if i == victim {
			victimID = nd.id
		}
	})
	f.Stall = func(node string, epoch, sync int) bool { return node == victimID && epoch == 1 && sync == 1 }
	for len(f.Deltas()[workertest.Slot{Epoch: 1, Sync: 1}]) < 3 {
		if ctx.Err() != nil {
			t.Fatal("the three others never submitted their first delta")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the three are in their ring call now
	t0 := time.Now()
	f.Remove(victimID)
	survivors := nodes[:victim]
	waitDone(t, ctx, survivors...)
	if took := time.Since(t0); took > 10*time.Second {
		t.Errorf("survivors finished %v after the removal: they waited for the ring timeout", took)
	}
	if st, _ := f.State(); st != "published" {
		t.Fatalf("job is %s, want published", st)
	}
	// The first survivor to hear of the new configuration drops its call;
	// its neighbours may see that as a broken link before they hear of
	// it themselves. Either way nobody waits for the timeout (above).
	superseded := 0
	for _, nd := range survivors {
		for _, e := range nd.Events(worker.EventRingFailed) {
			if e.Reason == "superseded" {
				superseded++
			}
		}
	}
	if superseded == 0 {
		t.Error("no survivor's ring call was superseded by the new configuration")
	}
}
