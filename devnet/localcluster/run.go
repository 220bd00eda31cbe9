package localcluster

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/zooai/gym/artifact/pin"
	"github.com/zooai/gym/internal/plot"
	"github.com/zooai/gym/model/heldout"
	"github.com/zooai/gym/model/peft"
	"github.com/zooai/gym/node/worker"
	"github.com/zooai/gym/orchestrator/judge"
	"github.com/zooai/gym/orchestrator/judge/epoch"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/protocol/jobspec"
)

// Summary is what a run reports (Dir/summary.json).
type Summary struct {
	Status      string `json:"status"`
	Job         string `json:"job"`
	Reason      string `json:"reason,omitempty"`
	Task        string `json:"task"`
	Aggregation string `json:"aggregation"`
	Workers     int    `json:"workers"`
	// HanzodBaseLoads is how many bases named by CID the leading hanzod
	// decoded the weights of (0 when its model work ran on nodes).
	HanzodBaseLoads int            `json:"hanzod_base_loads"`
	EvalBefore      float64        `json:"eval_before"`
	EvalAfter       float64        `json:"eval_after"`
	LossBefore      float64        `json:"loss_before"`
	LossAfter       float64        `json:"loss_after"`
	CheckpointCID   string         `json:"checkpoint_cid"`
	CheckpointDir   string         `json:"checkpoint_dir"`
	Epochs          []EpochSummary `json:"epochs"`
	Nodes           []NodeSummary  `json:"nodes"`
	Events          map[string]int `json:"events"`
	Seconds         float64        `json:"seconds"`
	RecoverySeconds *float64       `json:"recovery_seconds,omitempty"`
	// Replicas is the number of hanzod replicas (0: one); TakeoverSeconds
	// how long after the leader was killed another one led.
	Replicas        int     `json:"replicas,omitempty"`
	TakeoverSeconds float64 `json:"takeover_seconds,omitempty"`
	Settled         bool    `json:"settled"`
	RewardPNG       string  `json:"reward_png"`
	Out             string  `json:"out"`
	// Pins is the IPFS pinning of each published checkpoint, with
	// Config.IPFS.
	Pins []Pin `json:"ipfs_pins,omitempty"`
	// Chain is what the chain holds of the run, read back from it, with
	// Config.ChainReport.
	Chain *ChainSummary `json:"chain,omitempty"`
}

// ChainSummary is a run's record on the chain, read back from it (not from
// hanzod): every node's stake and slashes, each epoch's payment and each
// checkpoint's publication record, and hanzod's mirror's counters.
type ChainSummary struct {
	ChainID      uint64             `json:"chain_id"`
	RPC          string             `json:"rpc"`
	GYMToken     string             `json:"gym_token"`
	MiningPool   string             `json:"mining_pool"`
	Registry     string             `json:"publication_registry"`
	Treasury     float64            `json:"treasury_gym"` // the pool's balance at the end
	Nodes        []ChainNode        `json:"nodes"`
	Epochs       []ChainEpoch       `json:"epochs"`
	Publications []ChainPublication `json:"publications"`
	// Mirror is hanzod's chain mirror when the report was read.
	MirrorPending  uint64 `json:"mirror_pending"`
	MirrorFailures uint64 `json:"mirror_failures"`
}

// ChainNode is a worker's account on the chain.
type ChainNode struct {
	ID      string       `json:"id"`
	Address string       `json:"address"`
	Stake   float64      `json:"stake_gym"`   // bonded, as an on-chain node
	Balance float64      `json:"balance_gym"` // free GYM (rewards land here)
	Banned  bool         `json:"banned,omitempty"`
	Slashes []ChainSlash `json:"slashes,omitempty"`
}

// ChainSlash is one slash record of GYMToken.slashesOf.
type ChainSlash struct {
	Offence      int     `json:"offence"`
	Pct          int     `json:"pct"`
	Amount       float64 `json:"amount_gym"`
	EvidenceHash string  `json:"evidence_hash"` // keccak256, 0x-hex
}

// ChainEpoch is one MiningPool.EpochRewardsDistributed of the job.
type ChainEpoch struct {
	Epoch   uint64             `json:"epoch"`
	Workers int                `json:"workers"`
	Total   float64            `json:"total_gym"`
	Paid    map[string]float64 `json:"paid_gym"` // node id (or address) → GYM, from the transaction's Transfers
	Tx      string             `json:"tx"`
	Block   uint64             `json:"block"`
	Gas     uint64             `json:"gas"`
}

// ChainPublication is one PublicationRegistry record of the job.
type ChainPublication struct {
	Epoch  uint64 `json:"epoch"`
	CID    string `json:"cid"`
	Signer string `json:"signer"` // hanzod's Ed25519 key, hex
}

// Pin is where the IPFS pinning of one checkpoint stood when Run ended.
type Pin struct {
	CID      string `json:"cid"`
	State    string `json:"state"` // pinned or pending
	Attempts int    `json:"attempts"`
	Error    string `json:"error,omitempty"`
}

// NodeSummary is one worker in the summary.
type NodeSummary struct {
	Name     string   `json:"name"`
	ID       string   `json:"id"`
	Attack   string   `json:"attack,omitempty"`
	Backend  string   `json:"backend,omitempty"` // torch; empty for go
	Killed   bool     `json:"killed,omitempty"`
	Restart  bool     `json:"restarted,omitempty"`
	Reward   float64  `json:"reward"` // GYM
	Slashed  bool     `json:"slashed"`
	SlashGYM float64  `json:"slashed_gym,omitempty"`
	Slashes  []string `json:"slashes,omitempty"`
	Accepted int      `json:"deltas_accepted"`
	Rejected int      `json:"deltas_rejected"`
	Quality  float64  `json:"mean_quality"` // rejected deltas count as 0
	// Refused is why the node refused the job, as hanzod recorded it.
	Refused string `json:"refused,omitempty"`
	// Role is "validator" for a validator; MissedChecks the checks it let
	// expire.
	Role         string `json:"role,omitempty"`
	MissedChecks int    `json:"missed_checks,omitempty"`
}

// EpochSummary is one merged epoch in the summary.
type EpochSummary struct {
	Epoch       int      `json:"epoch"`
	CID         string   `json:"cid"`
	Accuracy    float64  `json:"accuracy"`
	Quality     float64  `json:"quality"`
	Deltas      int      `json:"deltas"`
	SpotChecks  int      `json:"spot_checks"`
	Targeted    []string `json:"targeted,omitempty"`     // replayed as outliers (merge.Outliers)
	NotReplayed []string `json:"not_replayed,omitempty"` // torch deltas a spot-check would have replayed
	// TraceChecks are the torch deltas checked from their traces, with
	// the measured differences.
	TraceChecks       []epoch.TraceCheck `json:"trace_checks,omitempty"`
	Forfeited         []string           `json:"forfeited,omitempty"`
	Excluded          []string           `json:"excluded,omitempty"`
	RingDisagreements []string           `json:"ring_disagreements,omitempty"`
	// Evaluators are the validators whose agreeing figures scored the
	// epoch (hanzod's model work on nodes); Unmeasured why none could.
	Evaluators   []string `json:"evaluators,omitempty"`
	Unmeasured   string   `json:"unmeasured,omitempty"`
	MergeSeconds float64  `json:"merge_seconds"`
	// Ejections are the cheaters ejected while the epoch ran, with the
	// lag from their first delta to the ejection; Rebases the syncs at
	// which the members continued from hanzod's rebuilt state
	// (docs/byzantine.md).
	Ejections []epoch.Ejection `json:"ejections,omitempty"`
	Rebases   []int            `json:"rebases,omitempty"`
}

// marker names a directory that holds a run (PrepareDir replaces it).
const marker = ".gym-up"

// ErrNotEmpty is PrepareDir's refusal of a directory that holds something
// else than an earlier run.
var ErrNotEmpty = errors.New("localcluster: the directory is not empty and holds no earlier gym up run")

// PrepareDir makes an empty directory for a run, replacing only an
// earlier run.
func PrepareDir(dir string) error {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	case len(ents) > 0:
		if _, err := os.Stat(filepath.Join(dir, marker)); err != nil {
			return fmt.Errorf("%w: %s", ErrNotEmpty, dir)
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, marker), []byte("this directory holds a gym up run; gym up replaces it\n"), 0o644)
}

// tally is what a run gathers from the events for its summary.
type tally struct {
	mu        sync.Mutex
	job       string
	rewards   map[int][]float64          // global step → sample rewards reported
	paid      map[string]ledger.Amount   // node → rewards paid in the job
	slashed   map[string][]state.Slashed // node → its slashes
	events    map[string]int
	killedAt  time.Time
	recovered *float64
}

func (t *tally) add(ev Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch ev.Kind {
	case EventKilled:
		t.killedAt = time.Now()
	case EventWorker:
		t.events["worker_"+ev.Work.Kind]++
		switch ev.Work.Kind {
		case worker.EventStep:
			t.rewards[ev.Work.Step] = append(t.rewards[ev.Work.Step], ev.Work.Reward)
		case worker.EventRingReduced, worker.EventRingRecovered:
			if !t.killedAt.IsZero() && t.recovered == nil {
				s := time.Since(t.killedAt).Seconds()
				t.recovered = &s
			}
		}
	case EventHanzod:
		t.events[ev.Hanzod.Body.Kind()]++
		switch b := ev.Hanzod.Body.(type) {
		case state.RewardsPaid:
			if b.Job == t.job {
				for _, p := range b.Payouts {
					t.paid[p.ID] += p.Amount
				}
			}
		case state.Slashed:
			t.slashed[b.Account] = append(t.slashed[b.Account], b)
		}
	}
}

// Run runs one job on a fresh cluster in cfg.Dir (made by PrepareDir, or
// empty): hanzod, the
// workers, the job to its end. It leaves in cfg.Dir summary.json,
// events.jsonl (hanzod's event log), hanzod.log, hanzod/ (its data),
// workers/wN/, checkpoint/ (the final checkpoint), deltas/ (every
// accepted delta) and reward.png, and returns the summary (held-out
// evaluations use Config.Threads).
func Run(ctx context.Context, cfg Config, spec jobspec.Spec) (*Summary, error) {
	start := time.Now()
	t := &tally{rewards: map[int][]float64{}, paid: map[string]ledger.Amount{}, slashed: map[string][]state.Slashed{}, events: map[string]int{}}
	c, err := Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.hook(t.add)
	if err := c.StartWorkers(ctx); err != nil {
		return nil, err
	}
	defer c.StopWorkers()
	regCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	err = c.WaitRegistered(regCtx)
	cancel()
	if err != nil {
		return nil, err
	}
	job, err := c.Submit(ctx, spec)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.job = job
	t.mu.Unlock()
	jb, err := c.Follow(ctx, job)
	c.StopWorkers()
	if err != nil {
		return nil, fmt.Errorf("localcluster: job %s did not finish (state %s): %w", job, jb.State, err)
	}
	sum, err := c.summarise(jb, spec, t, start)
	if err != nil {
		return nil, err
	}
	if q := c.leader().Pins(); q != nil {
		wait := cfg.PinWait
		if wait <= 0 {
			wait = time.Minute
		}
		pctx, cancel := context.WithTimeout(ctx, wait)
		Poll(pctx, 100*time.Millisecond, func() bool {
			for _, id := range jb.CIDs {
				if e, ok := q.Get(id); !ok || e.State != pin.Pinned {
					return false
				}
			}
			return true
		})
		cancel()
		for _, id := range jb.CIDs {
			e, _ := q.Get(id)
			sum.Pins = append(sum.Pins, Pin{CID: id, State: cmp.Or(e.State, pin.Pending), Attempts: e.Attempts, Error: e.LastError})
		}
	}
	if c.cfg.ChainReport != nil {
		if sum.Chain, err = c.chainReport(ctx, job); err != nil {
			return nil, err
		}
	}
	b, _ := json.MarshalIndent(sum, "", "  ")
	if err := os.WriteFile(filepath.Join(cfg.Dir, "summary.json"), append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	return sum, nil
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// summarise evaluates before and after, gathers rewards and slashes, and
// copies the inspectable files into Dir.
// copyDeltas writes the job's accepted deltas into dst, one file per slot
// (eEEEE-sSSSSSSSS-NODE.delta).
func (c *Cluster) copyDeltas(jb state.Job, dst string) error {
	if len(jb.Slots) == 0 {
		return nil
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	j := c.leader().Judge()
	for sl := range jb.Slots {
		b, err := j.AcceptedDelta(context.Background(), jb.ID, sl)
		if err != nil {
			return err
		}
		name := fmt.Sprintf("e%04d-s%08d-%s.delta", sl.Epoch, sl.Step, sl.Node)
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// hanzodDirs are the replicas' data directories.
func (c *Cluster) hanzodDirs() []string {
	if len(c.ds) <= 1 {
		return []string{filepath.Join(c.cfg.Dir, "hanzod")}
	}
	var out []string
	for i := range c.ds {
		out = append(out, filepath.Join(c.cfg.Dir, fmt.Sprintf("hanzod-%d", i)))
	}
	return out
}

func (c *Cluster) summarise(jb state.Job, spec jobspec.Spec, t *tally, start time.Time) (*Summary, error) {
	dir := c.cfg.Dir
	threads := c.cfg.Threads
	sum := &Summary{Status: string(jb.State), Job: jb.ID, Reason: jb.Reason, Task: spec.Dataset, Aggregation: spec.Aggregation,
		Workers: c.cfg.Workers, Seconds: time.Since(start).Seconds(), Settled: jb.Settled, Out: dir}
	t.mu.Lock()
	sum.RecoverySeconds = t.recovered
	sum.HanzodBaseLoads = c.leader().Judge().BaseLoads()
	if took, ok := c.Takeover(); ok {
		sum.Replicas, sum.TakeoverSeconds = len(c.ds), took.Seconds()
	} else if len(c.ds) > 1 {
		sum.Replicas = len(c.ds)
	}
	sum.Events = map[string]int{}
	for k, v := range t.events {
		sum.Events[k] = v
	}
	t.mu.Unlock()
	base := c.cfg.Base
	plan, err := c.Plan(context.Background(), spec)
	if err != nil {
		return nil, err
	}
	init, err := plan.InitialAdapter(base.Weights.Cfg)
	if err != nil {
		return nil, err
	}
	// The summary's before and after on the problems hanzod measures each
	// checkpoint on.
	evalSize := c.cfg.EvalSize
	if evalSize == 0 {
		evalSize = judge.DefaultEvalSize
	}
	evalSplit, err := plan.Trainer.Split(evalSize)
	if err != nil {
		return nil, err
	}
	// A base this process holds only the config of (ModelDir): the
	// figures are the merge reports' (measured by hanzod or validators on
	// the same problems; the losses on the judge's shard).
	byReports := base.ConfigOnly
	if !byReports {
		before, err := heldout.EvaluateOn(base.Weights, base.Tokenizer, init, spec.Dataset, evalSplit.Eval, plan.Trainer.Reward, threads)
		if err != nil {
			return nil, err
		}
		sum.EvalBefore, sum.LossBefore = before.Accuracy, before.Loss
	}
	// The judge's merge report of every epoch: the epochs of the summary
	// and every delta's quality score.
	quality := map[string][]float64{}
	for e := 1; e <= len(jb.CIDs); e++ {
		// The replica that merged the epoch wrote the report.
		var b []byte
		err := os.ErrNotExist
		for _, hd := range c.hanzodDirs() {
			if b, err = os.ReadFile(filepath.Join(hd, "checkpoints", jb.ID, fmt.Sprintf("merge-%04d.json", e))); err == nil {
				break
			}
		}
		if err != nil {
			continue
		}
		var rep judge.EpochReport
		if json.Unmarshal(b, &rep) != nil {
			continue
		}
		sum.Epochs = append(sum.Epochs, EpochSummary{Epoch: e, CID: rep.CID, Accuracy: rep.Accuracy, Quality: rep.Quality,
			Deltas: len(rep.Scores), SpotChecks: rep.SpotChecks, Targeted: rep.Targeted, NotReplayed: rep.NotReplayed, TraceChecks: rep.TraceChecks, Forfeited: rep.Forfeited, Excluded: rep.Excluded, RingDisagreements: rep.RingDisagreements,
			Evaluators: rep.Evaluators, Unmeasured: rep.Unmeasured, MergeSeconds: rep.MergeSeconds, Ejections: rep.Ejections, Rebases: rep.Rebases})
		for _, s := range rep.Scores {
			quality[s.Node] = append(quality[s.Node], s.Quality)
		}
		if byReports {
			if e == 1 {
				sum.EvalBefore, sum.LossBefore = rep.AccuracyBefore, rep.LossBefore
			}
			sum.EvalAfter, sum.LossAfter = rep.Accuracy, rep.LossAfter
		}
	}
	if jb.State == state.Published && len(jb.CIDs) > 0 {
		dst := filepath.Join(dir, "checkpoint")
		src, err := c.leader().Judge().RestoreCheckpoint(context.Background(), jb.ID, len(jb.CIDs), jb.CIDs[len(jb.CIDs)-1])
		if err != nil {
			return nil, err
		}
		if err := CopyDir(src, dst); err != nil {
			return nil, err
		}
		a, _, err := peft.Read(dst, base.Weights.Cfg)
		if err != nil {
			return nil, err
		}
		if !byReports {
			after, err := heldout.EvaluateOn(base.Weights, base.Tokenizer, a, spec.Dataset, evalSplit.Eval, plan.Trainer.Reward, threads)
			if err != nil {
				return nil, err
			}
			sum.EvalAfter, sum.LossAfter = after.Accuracy, after.Loss
		}
		sum.CheckpointCID, sum.CheckpointDir = jb.CIDs[len(jb.CIDs)-1], dst
	}
	// Every accepted delta, from hanzod's blob store (a directory, or
	// Valkey with replicas), named by its slot.
	if err := c.copyDeltas(jb, filepath.Join(dir, "deltas")); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, w := range c.Workers() {
		n := NodeSummary{Name: w.Name, ID: w.ID, Attack: w.Attack, Backend: strings.TrimPrefix(c.backendOf(w), "go"), Killed: w.Killed(), Restart: w.Restarted(),
			Reward: float64(t.paid[w.ID]) / float64(ledger.GYM), Refused: jb.Refusals[w.ID], Role: w.Role}
		c.View(func(m *state.Machine) {
			if nd, ok := m.Node(w.ID); ok {
				n.MissedChecks = nd.MissedChecks
			}
		})
		for _, s := range t.slashed[w.ID] {
			n.Slashed = true
			n.SlashGYM += float64(s.Amount) / float64(ledger.GYM)
			n.Slashes = append(n.Slashes, s.Reason)
		}
		if tl := jb.Tally[w.ID]; tl != nil {
			n.Accepted, n.Rejected = tl.Accepted, tl.Rejected
		}
		// Mean quality over every delta the node submitted: a rejected or
		// spot-check-excluded delta scores 0.
		if tot := n.Accepted + n.Rejected; tot > 0 {
			sumq := 0.0
			for _, q := range quality[w.ID] {
				sumq += q
			}
			n.Quality = sumq / float64(tot)
		}
		sum.Nodes = append(sum.Nodes, n)
	}
	// The reward curve.
	var xs, ys []float64
	steps := make([]int, 0, len(t.rewards))
	for s := range t.rewards {
		steps = append(steps, s)
	}
	sort.Ints(steps)
	for _, s := range steps {
		xs, ys = append(xs, float64(s)), append(ys, mean(t.rewards[s]))
	}
	ax, ay := []float64{0}, []float64{sum.EvalBefore}
	for _, e := range sum.Epochs {
		ax, ay = append(ax, float64(e.Epoch*spec.StepsPerEpoch)), append(ay, e.Accuracy)
	}
	chart := plot.Chart{Title: fmt.Sprintf("gym up: %d workers, %s, %s merge", c.cfg.Workers, spec.Dataset, spec.Aggregation), YMin: 0, YMax: 1,
		Series: []plot.Series{{Name: "sample reward (mean over workers)", X: xs, Y: ys, Color: plot.Palette[0]},
			{Name: "held-out accuracy of the checkpoint of record", X: ax, Y: ay, Color: plot.Palette[1]}}}
	if len(xs) > 1 {
		var img bytes.Buffer
		if err := chart.WritePNG(&img); err != nil {
			return nil, err
		}
		sum.RewardPNG = filepath.Join(dir, "reward.png")
		if err := os.WriteFile(sum.RewardPNG, img.Bytes(), 0o644); err != nil {
			return nil, err
		}
	}
	return sum, nil
}

// chainReport waits (up to Config.ChainWait) until hanzod's chain mirror
// has caught up with the event log as it stands now, then reads the job's
// record back from the chain.
func (c *Cluster) chainReport(ctx context.Context, job string) (*ChainSummary, error) {
	wait := cmp.Or(c.cfg.ChainWait, 2*time.Minute)
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	_, last, err := c.engine().Read(wctx, 1<<62, 1)
	if err != nil {
		return nil, err
	}
	if err := Poll(wctx, 50*time.Millisecond, func() bool {
		st, ok := c.leader().ChainStatus()
		return !ok || st.Cursor >= last
	}); err != nil {
		st, _ := c.leader().ChainStatus()
		return nil, fmt.Errorf("localcluster: hanzod's chain mirror did not catch up within %v (at event %d of %d, %d failures, last error %q)",
			wait, st.Cursor, last, st.Failures, st.LastError)
	}
	cs, err := c.cfg.ChainReport(ctx, job)
	if err != nil {
		return nil, fmt.Errorf("localcluster: read the chain: %w", err)
	}
	if st, ok := c.leader().ChainStatus(); ok {
		cs.MirrorPending, cs.MirrorFailures = st.Pending, st.Failures
	}
	return cs, nil
}
