package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/devnet/localcluster"
	"github.com/zooai/gym/keys/nodekey"
	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/peft"
	"github.com/zooai/gym/orchestrator/judge"
	"github.com/zooai/gym/orchestrator/judge/epoch"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/protocol/jobconf"
)

// upRunJSON runs gym up with a small job and returns the summary: 2
// epochs of 10 steps of 2 prompts (one ring sync and the epoch's last
// sync), hanzod's accuracy and scores on 128 and 32 held-out problems
// (upEvalSize), and only the outliers and the keyed 10% replayed. extra
// overrides (the last of a flag wins).
//
// The runs train the local-steps profile (--data-parallel=false, a sync
// every 5 steps): two syncs an epoch keep them short, and the protocol's
// checks are the same in both profiles. TestUpDataParallelRun runs the
// default profile.
func upRunJSON(t *testing.T, extra ...string) (localcluster.Summary, string, result) {
	t.Helper()
	return upRun(t, append([]string{"--data-parallel=false", "--interval", "5"}, extra...)...)
}

// upRun is upRunJSON without a profile: gym up's default unless extra
// says.
func upRun(t *testing.T, extra ...string) (localcluster.Summary, string, result) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "up")
	args := append([]string{"up", "--out", out, "--json", "--epochs", "2", "--steps-per-epoch", "10", "--prompts", "2",
		"--eval-size", upEvalSize, "--shard-size", "32", "--timeout", "12m"}, extra...)
	r := gym(t, args...)
	var s localcluster.Summary
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("gym %v: exit %d, stdout is not one JSON object: %v\n%s\nstderr:\n%s", args, r.code, err, r.stdout, r.stderr)
	}
	return s, out, r
}

// upImproves runs gym up with run (upRunJSON or upRun) and extra, checks
// that it published a checkpoint more than 5 points of held-out accuracy
// better than the base, and returns its summary and output directory.
func upImproves(t *testing.T, run func(*testing.T, ...string) (localcluster.Summary, string, result), extra ...string) (localcluster.Summary, string) {
	t.Helper()
	s, out, r := run(t, extra...)
	if r.code != 0 || s.Status != "published" {
		t.Fatalf("exit %d, status %q (%s)\nstderr:\n%s", r.code, s.Status, s.Reason, r.stderr)
	}
	t.Logf("held-out accuracy %.3f → %.3f (%s problems), %.1f s", s.EvalBefore, s.EvalAfter, upEvalSize, s.Seconds)
	if s.EvalAfter <= s.EvalBefore+0.05 {
		t.Errorf("held-out accuracy %.3f → %.3f: training did not help", s.EvalBefore, s.EvalAfter)
	}
	return s, out
}

// upEvalSize is upRunJSON's --eval-size: gym eval --n upEvalSize measures
// what the summary's eval_after does.
const upEvalSize = "128"

// events reads the run's event log.
func events(t *testing.T, out string) []state.Event {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var evs []state.Event
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		ev, err := state.DecodeEvent([]byte(line))
		if err != nil {
			t.Fatalf("event log line %q: %v", line, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// TestUp runs the whole system honestly: 4 worker processes and hanzod,
// to a published checkpoint that is better than the base, whose CID is the
// directory's UnixFS CID, whose records are signed by hanzod, and every
// accepted delta kept.
func TestUp(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	// Half the deltas replayed bit for bit across processes.
	s, out := upImproves(t, upRunJSON, "--spot-check-bp", "5000")
	if len(s.Epochs) != 2 || len(s.Nodes) != 4 || !s.Settled {
		t.Fatalf("epochs %d, nodes %d, settled %v", len(s.Epochs), len(s.Nodes), s.Settled)
	}
	// Each delta is drawn for replay with probability ½ by hanzod's key:
	// none of 16 drawn has probability 2⁻¹⁶.
	if replays := s.Epochs[0].SpotChecks + s.Epochs[1].SpotChecks; replays == 0 {
		t.Error("no delta replayed at --spot-check-bp 5000")
	}
	for _, n := range s.Nodes {
		if n.Slashed || n.Reward <= 0 || n.Accepted != 4 || n.Rejected != 0 {
			t.Errorf("honest node %+v: want 4 accepted deltas, a reward, no slash", n)
		}
	}
	// The CID is what `ipfs add -r --cid-version=1` gives the directory.
	im, err := artifact.Import(context.Background(), artifact.NewMemBlocks(), s.CheckpointDir)
	if err != nil || im.Root.String() != s.CheckpointCID {
		t.Fatalf("checkpoint %s imports as %v (%v), summary says %s", s.CheckpointDir, im.Root, err, s.CheckpointCID)
	}
	base, err := basemodel.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := peft.Read(s.CheckpointDir, base.Weights.Cfg); err != nil {
		t.Fatal(err)
	}
	// And kubo agrees, where a kubo binary is on PATH (see
	// artifact/interop_kubo_test.go for how to build one).
	if ipfs, err := exec.LookPath("ipfs"); err == nil {
		repo := t.TempDir()
		env := append(os.Environ(), "IPFS_PATH="+repo)
		if out, err := (&exec.Cmd{Path: ipfs, Args: []string{"ipfs", "init", "-e"}, Env: env}).CombinedOutput(); err != nil {
			t.Fatalf("ipfs init: %v\n%s", err, out)
		}
		out, err := (&exec.Cmd{Path: ipfs, Args: []string{"ipfs", "add", "-r", "--cid-version=1", "-Q", "--only-hash", s.CheckpointDir}, Env: env}).Output()
		if err != nil || strings.TrimSpace(string(out)) != s.CheckpointCID {
			t.Fatalf("ipfs add -r --cid-version=1 gives %q (%v), hanzod published %s", out, err, s.CheckpointCID)
		}
	}
	// Publication and settlement records verify under hanzod's key.
	key, err := nodekey.Load(filepath.Join(out, "hanzod", "hanzod.key"))
	if err != nil {
		t.Fatal(err)
	}
	pub := key.Public().(ed25519.PublicKey)
	var pubs, settled int
	for _, ev := range events(t, out) {
		switch b := ev.Body.(type) {
		case state.CheckpointPublished:
			pubs++
			if !judge.VerifyRecord(pub, "publication", b.Record, b.Signature) || !strings.Contains(b.Record, b.CID) {
				t.Errorf("publication record of epoch %d does not verify", b.Epoch)
			}
		case state.JobSettled:
			settled++
			if !judge.VerifyRecord(pub, "settlement", b.Record, b.Signature) {
				t.Error("settlement record does not verify")
			}
		}
	}
	if pubs != 2 || settled != 1 {
		t.Errorf("%d publication records, %d settlements", pubs, settled)
	}
	ds, _ := filepath.Glob(filepath.Join(out, "deltas", "*.delta"))
	if len(ds) != 4*4 {
		t.Errorf("%d deltas kept under deltas/, want 16", len(ds))
	}
	mustGym(t, "delta", "verify", ds[0])
	for _, f := range []string{"summary.json", "reward.png", "hanzod.log"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	// gym eval reads the checkpoint and agrees with the summary.
	var ev struct{ Accuracy float64 }
	if err := json.Unmarshal([]byte(mustGym(t, "eval", "--checkpoint", s.CheckpointDir, "--n", upEvalSize, "--json")), &ev); err != nil || ev.Accuracy != s.EvalAfter {
		t.Errorf("gym eval: accuracy %v (%v), summary %v", ev.Accuracy, err, s.EvalAfter)
	}
}

// TestUpKillWorker kills one worker mid-epoch and starts it again: the
// survivors go on without it, and it rejoins at the next epoch boundary.
func TestUpKillWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	s, out, r := upRunJSON(t, "--kill-worker-at", "1:3", "--restart-killed")
	if r.code != 0 || s.Status != "published" {
		t.Fatalf("exit %d, status %q (%s)\nstderr:\n%s", r.code, s.Status, s.Reason, r.stderr)
	}
	if w0 := s.Nodes[0]; !w0.Killed || !w0.Restart || s.RecoverySeconds == nil || w0.Accepted != 2 {
		t.Fatalf("w0 %+v, recovery %v: want killed before its first sync, restarted, 2 deltas in epoch 2", w0, s.RecoverySeconds)
	}
	if *s.RecoverySeconds > 20 {
		t.Errorf("recovery took %.1f s", *s.RecoverySeconds)
	}
	removed := false
	for _, ev := range events(t, out) {
		if rc, ok := ev.Body.(state.RingConfigured); ok && len(rc.Ring) == 3 {
			removed = true
		}
	}
	if !removed {
		t.Error("no ring of 3 was configured after the kill")
	}
	for _, n := range s.Nodes[1:] {
		if n.Accepted != 4 || n.Slashed {
			t.Errorf("survivor %+v", n)
		}
	}
}

// TestUpReplicas runs three hanzod replicas over the Valkey server gym up
// starts and kills the leader after the first sync of epoch 1: a standby
// takes over within a few seconds and publishes, every acknowledged delta
// is in deltas/, and the records verify under the shared key, whose
// account had the orchestrator's stake bonded.
func TestUpReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	if _, err := exec.LookPath("redis-server"); err != nil && os.Getenv("GYM_REQUIRE_REDIS") != "1" {
		if _, err := exec.LookPath("valkey-server"); err != nil {
			t.Skip("no redis-server or valkey-server on PATH")
		}
	}
	s, out, r := upRunJSON(t, "--replicas", "3", "--kill-leader-at", "1:5")
	if r.code != 0 || s.Status != "published" || !s.Settled {
		t.Fatalf("exit %d, status %q (%s), settled %v\nstderr:\n%s", r.code, s.Status, s.Reason, s.Settled, r.stderr)
	}
	if s.Replicas != 3 || s.TakeoverSeconds <= 0 || s.TakeoverSeconds > 10 {
		t.Fatalf("replicas %d, takeover %.2f s", s.Replicas, s.TakeoverSeconds)
	}
	if !strings.Contains(r.stderr, "hanzod leader killed") {
		t.Errorf("the live view does not show the kill:\n%s", r.stderr)
	}
	for _, n := range s.Nodes {
		if n.Slashed || n.Accepted != 4 {
			t.Errorf("node %+v: want 4 accepted deltas, no slash", n)
		}
	}
	if ds, _ := filepath.Glob(filepath.Join(out, "deltas", "*.delta")); len(ds) != 16 {
		t.Errorf("%d deltas under deltas/, want 16", len(ds))
	}
	key, err := nodekey.Load(filepath.Join(out, "hanzod.key"))
	if err != nil {
		t.Fatal(err)
	}
	acct := nodekey.PublicHex(key)
	minimum, _ := ledger.MinStake(ledger.RoleOrchestrator)
	bonded := func(a string) (ledger.Amount, error) {
		if a != acct {
			return 0, nil
		}
		return minimum, nil // what localcluster bonded (the record says so too)
	}
	var pubs int
	for _, ev := range events(t, out) {
		if b, ok := ev.Body.(state.CheckpointPublished); ok {
			pubs++
			if got, err := judge.CheckRecord("publication", b.Record, b.Signature, bonded, minimum); err != nil || got != acct {
				t.Errorf("publication record of epoch %d: %s, %v", b.Epoch, got, err)
			}
			if !strings.Contains(b.Record, fmt.Sprintf(`"bonded":%d`, minimum)) {
				t.Errorf("record %s does not say the stake", b.Record)
			}
		}
	}
	if pubs != 2 {
		t.Errorf("%d publications", pubs)
	}
}

// TestUpDataParallelRun runs gym up's default profile, synchronous data
// parallelism (a sync every step, plain SGD in the workers, the outer Adam
// carried from epoch to epoch in the checkpoint): the job publishes a
// better checkpoint; every sync's delta is accepted and none slashed, with
// half of them drawn for replay (--spot-check-bp 5000); the judge reconstructs every ring result of the
// second epoch from the first checkpoint's outer state; and the final
// checkpoint carries the Adam state of all twenty syncs. One cheater
// (signflip) is slashed and paid least.
func TestUpDataParallelRun(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	s, out := upImproves(t, upRun, "--spot-check-bp", "5000")
	for _, n := range s.Nodes {
		if n.Slashed || n.Accepted != 20 || n.Rejected != 0 {
			t.Errorf("honest node %+v: want 20 accepted deltas, no slash", n)
		}
	}
	reports, _ := filepath.Glob(filepath.Join(out, "hanzod", "checkpoints", "*", "merge-*.json"))
	if len(reports) != 2 {
		t.Fatalf("merge reports %v", reports)
	}
	for _, f := range reports {
		var rep epoch.Report
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.RingDisagreements)+len(rep.RingUnknown)+len(rep.Excluded) != 0 || len(rep.Scores) != 40 {
			t.Errorf("%s: disagreements %v, unknown %v, excluded %v, %d scores", filepath.Base(f), rep.RingDisagreements, rep.RingUnknown, rep.Excluded, len(rep.Scores))
		}
	}
	ob, err := os.ReadFile(filepath.Join(s.CheckpointDir, jobconf.OuterFile))
	if err != nil {
		t.Fatal(err)
	}
	base, err := basemodel.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	a, _, err := peft.Read(s.CheckpointDir, base.Weights.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	o, err := jobconf.Plan{OuterLR: 1.5e-3, OuterAdam: true}.ResumeOuter(ob, a.NumParams())
	if err != nil || o.Steps() != 20 {
		t.Fatalf("the final checkpoint's outer state: %v, %d steps (want 20)", err, o.Steps())
	}

	s, _, r := upRun(t, "--epochs", "1", "--byzantine", "1", "--attack", "signflip")
	if r.code != 0 || s.Status != "published" {
		t.Fatalf("signflip: exit %d, status %q (%s)\nstderr:\n%s", r.code, s.Status, s.Reason, r.stderr)
	}
	bad := s.Nodes[3]
	if !bad.Slashed {
		t.Fatalf("cheater %+v not slashed", bad)
	}
	for _, n := range s.Nodes[:3] {
		if n.Slashed || n.Reward <= bad.Reward {
			t.Errorf("honest %s: slashed %v, reward %.2f vs the cheater's %.2f", n.Name, n.Slashed, n.Reward, bad.Reward)
		}
	}
}

// TestUpByzantine runs one cheating worker per attack kind, a job of one
// epoch (its first sync all-reduced, so that the ring attack has a ring to
// cheat in and the replay attack an earlier delta to replay): the job
// publishes, the cheater is slashed with evidence and ends with the lowest
// reward (and, cheating in its deltas, the lowest quality; "ring" submits
// honest deltas and is caught by its signed ring frames instead).
func TestUpByzantine(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	for _, attack := range []string{"signflip", "equivocate", "replay", "ring"} {
		t.Run(attack, func(t *testing.T) {
			s, _, r := upRunJSON(t, "--epochs", "1", "--byzantine", "1", "--attack", attack)
			if r.code != 0 || s.Status != "published" {
				t.Fatalf("exit %d, status %q (%s)\nstderr:\n%s", r.code, s.Status, s.Reason, r.stderr)
			}
			bad := s.Nodes[3]
			if bad.Attack != attack || !bad.Slashed {
				t.Fatalf("cheater %+v not slashed", bad)
			}
			if attack == "ring" && (len(bad.Slashes) == 0 || !strings.Contains(bad.Slashes[0], "ring frame")) {
				t.Errorf("ring cheater slashed for %q, want its ring frame", bad.Slashes)
			}
			for _, n := range s.Nodes[:3] {
				if n.Slashed || n.Reward <= bad.Reward || (attack != "ring" && n.Quality <= bad.Quality) {
					t.Errorf("honest %s: slashed %v, reward %.2f and quality %.3f vs the cheater's %.2f and %.3f",
						n.Name, n.Slashed, n.Reward, n.Quality, bad.Reward, bad.Quality)
				}
			}
			if s.EvalAfter <= s.EvalBefore {
				t.Errorf("accuracy %.3f → %.3f", s.EvalBefore, s.EvalAfter)
			}
		})
	}
}

// TestUpRefuses checks the usage errors.
func TestUpRefuses(t *testing.T) {
	for _, args := range [][]string{
		{"up", "--workers", "2"},
		{"up", "--byzantine", "1"},
		{"up", "--byzantine", "2", "--attack", "noise"},                          // 3f >= 4
		{"up", "--byzantine", "1", "--attack", "noise", "--aggregation", "mean"}, // a mean cannot defend
		{"up", "--steps-per-epoch", "7", "--interval", "5"},
		{"up", "--kill-worker-at", "x"},
		{"up", "--attack", "bogus", "--byzantine", "1"},
		{"up", "--kill-leader-at", "1:1"}, // no standby
		{"up", "--replicas", "0"},
		{"up", "--eval-size", "0"},
		{"up", "--replicas", "3", "--kill-leader-at", "1"},
		{"up", "--ledger", "chain"},
		{"up", "--geth", "/bin/true"}, // without --ledger evm
	} {
		if r := gym(t, args...); r.code != 2 {
			t.Errorf("gym %v: exit %d, want 2\n%s", args, r.code, r.stderr)
		}
	}
	if r := gym(t, "up", "--ledger", "evm", "--geth", filepath.Join(t.TempDir(), "no-geth"), "--out", filepath.Join(t.TempDir(), "up")); r.code != 1 || !strings.Contains(r.stderr, "no-geth") {
		t.Errorf("gym up --ledger evm with a missing --geth: exit %d\n%s", r.code, r.stderr)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "precious"), []byte("x"), 0o644)
	if r := gym(t, "up", "--out", dir); r.code == 0 || !strings.Contains(r.stderr, "not empty") {
		t.Errorf("gym up into a non-empty directory: exit %d\n%s", r.code, r.stderr)
	}
}

// TestUpDatasetRefuses: a --dataset whose mapping does not fit it, or a
// mapping without a --dataset, is refused before anything starts, with
// the file, line and field.
func TestUpDatasetRefuses(t *testing.T) {
	for _, args := range [][]string{
		{"up", "--template", "^{q}="},                                                                  // no --dataset
		{"up", "--dataset", "x.jsonl", "--template", "^{q="},                                           // a bad template
		{"up", "--dataset", "x.jsonl", "--held-out", "test", "--hold-out-bp", "10"},                    // both
		{"up", "--reward", `[{"verifier":"bleu","weight":1}]`},                                         // unknown verifier
		{"up", "--reward", `{"verifier":"numeric"}`},                                                   // not a list
		{"up", "--dataset", "x.jsonl", "--prompt-field", "q", "--template", "^{q}=", "--extract", "x"}, // both prompt forms
	} {
		if r := gym(t, args...); r.code != 2 {
			t.Errorf("gym %v: exit %d, want 2\n%s", args, r.code, r.stderr)
		}
	}
	f := filepath.Join(t.TempDir(), "math.jsonl")
	os.WriteFile(f, []byte("{\"question\":\"12+34\",\"answer\":\"#### 640\"}\n{\"question\":\"1+2\"}\n"), 0o644)
	r := gym(t, "up", "--dataset", f, "--template", "^{question}=", "--extract", "numeric", "--out", filepath.Join(t.TempDir(), "up"))
	if r.code != 1 || !strings.Contains(r.stderr, `train.jsonl:2: no field "answer"`) {
		t.Errorf("gym up --dataset with a row missing the answer: exit %d\n%s", r.code, r.stderr)
	}
}

// TestUpValidatorsRefuses: --validators needs two or more (two verdicts a
// check), and a lying validator needs two honest ones to outvote it and
// a validator's attack; each is refused before anything starts.
func TestUpValidatorsRefuses(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"up", "--validators", "1"}, "--validators 1"},
		{[]string{"up", "--validators", "-2"}, "--validators -2"},
		{[]string{"up", "--validators", "2", "--validator-attack", "verdict-flip"}, "--validator-attack"},
		{[]string{"up", "--validators", "3", "--validator-attack", "signflip"}, "--validator-attack"},
		// hanzod never loads a model given by --model: someone must check
		{[]string{"up", "--model", "some-dir", "--validators", "0"}, "--validators 0 with --model-work auto"},
		{[]string{"up", "--model-work", "nodes", "--validators", "0"}, "--validators 0 with --model-work nodes"},
		{[]string{"up", "--model-work", "gpu"}, "--model-work"},
	} {
		if r := gym(t, c.args...); r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("gym %v: exit %d, want 2 naming %s\n%s", c.args, r.code, c.want, r.stderr)
		}
	}
}

// TestUpAttackStrengthsRefuses: an in-bound attack's strength is refused
// when it is invalid or set for an attack that does not use it, before
// anything starts; gym worker refuses the same.
func TestUpAttackStrengthsRefuses(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"up", "--byzantine", "1", "--attack", "ipm", "--attack-z", "1"}, "ALIE's z is set for attack \"ipm\""},
		{[]string{"up", "--byzantine", "1", "--attack", "alie-adaptive", "--attack-z", "1"}, "alie-adaptive chooses its own"},
		{[]string{"up", "--byzantine", "1", "--attack", "ipm", "--attack-eps", "-1"}, "IPM's ε -1"},
		{[]string{"up", "--byzantine", "1", "--attack", "alie", "--attack-eps", "2"}, "IPM's ε is set for attack \"alie\""},
		{[]string{"up", "--byzantine", "1", "--attack", "mimic", "--attack-noise", "0.6"}, "it is mimic-noise's"},
		{[]string{"up", "--attack-noise", "0.6"}, "it is mimic-noise's"},
		{[]string{"worker", "--attack", "ipm", "--attack-z", "0"}, "ALIE's z is set for attack \"ipm\""},
		{[]string{"worker", "--attack", "mimic-noise", "--attack-noise", "NaN"}, "noisy mimic's scale NaN"},
	} {
		if r := gym(t, c.args...); r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("gym %v: exit %d, want 2 naming %s\n%s", c.args, r.code, c.want, r.stderr)
		}
	}
}
