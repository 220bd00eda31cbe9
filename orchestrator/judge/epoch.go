package judge

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/store"
	"github.com/zooai/gym/basemodel"
	"github.com/zooai/gym/heldout"
	"github.com/zooai/gym/jobconf"
	"github.com/zooai/gym/jobspec"
	"github.com/zooai/gym/merge"
	"github.com/zooai/gym/model"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/state"
	ostore "github.com/zooai/gym/orchestrator/store"
	"github.com/zooai/gym/peft"
	"github.com/zooai/gym/ring"
	"github.com/zooai/gym/task"
	"github.com/zooai/gym/trainer"
)

// Step does whatever the jobs' progress calls for: end an epoch whose
// members all finished (or whose grace passed), merge and publish an
// aggregating epoch, settle a finished job. The daemon calls it on the
// leader about once a second.
func (j *Judge) Step(ctx context.Context) error {
	type todo struct {
		job    state.Job
		finish bool // every member submitted its last sync
		some   bool // at least one did
	}
	var work []todo
	j.eng.View(func(m *state.Machine) {
		for _, id := range m.Jobs() {
			jb, _ := m.Job(id)
			t := todo{job: jb}
			switch {
			case jb.State == state.Running && !jb.Paused:
				plan, err := jobconf.FromSpec(jb.ID, jb.Spec)
				if err != nil {
					continue
				}
				last := uint64(plan.SyncStep(jb.Epoch, plan.Syncs()))
				t.finish = true
				for _, n := range jb.Ring {
					if _, ok := jb.Slots[jobspec.Slot{Epoch: jb.Epoch, Step: last, Node: n}]; ok {
						t.some = true
					} else {
						t.finish = false
					}
				}
			case jb.State == state.Aggregating, jb.State.Terminal() && !jb.Settled:
			default:
				continue
			}
			t.job = jb.Clone()
			work = append(work, t)
		}
	})
	var errs []error
	for _, t := range work {
		jb := t.job
		switch {
		case jb.State == state.Running:
			key := fmt.Sprintf("%s/%d", jb.ID, jb.Epoch)
			j.mu.Lock()
			first, waiting := j.waiting[key]
			if t.some && !waiting {
				first = j.cfg.Now()
				j.waiting[key] = first
			}
			j.mu.Unlock()
			if t.finish || (t.some && j.cfg.Now().Sub(first) > j.cfg.EpochGrace) {
				if _, err := j.eng.Do(ctx, state.EndEpoch{Job: jb.ID, Epoch: jb.Epoch}); err != nil && !errors.Is(err, state.ErrPrecondition) {
					errs = append(errs, err)
				}
			}
		case jb.State == state.Aggregating:
			key := fmt.Sprintf("%s/%d", jb.ID, jb.Epoch)
			if err := j.aggregate(ctx, jb); err != nil {
				j.mu.Lock()
				j.failures[key]++
				n := j.failures[key]
				j.mu.Unlock()
				j.log.Error("merge failed", "job", jb.ID, "epoch", jb.Epoch, "attempt", n, "err", err)
				errs = append(errs, err)
				if n >= maxMergeFailures && ctx.Err() == nil {
					// A merge that cannot succeed (missing files, a full
					// disk) must not hold the job and its stakes for ever.
					if ferr := j.fail(ctx, jb.ID, fmt.Sprintf("merge of epoch %d failed %d times: %v", jb.Epoch, n, err)); ferr != nil {
						errs = append(errs, ferr)
					}
				}
			} else {
				j.mu.Lock()
				delete(j.failures, key)
				j.mu.Unlock()
			}
		case jb.State.Terminal():
			if err := j.settle(ctx, jb); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// maxMergeFailures is how many merges of one epoch may fail in a row
// before the job is failed.
const maxMergeFailures = 20

// DeltaScore is how one accepted delta fared in the merge.
type DeltaScore struct {
	Node    string  `json:"node"`
	Sync    int     `json:"sync"`
	Quality float64 `json:"quality"`
	DeltaL  float64 `json:"delta_l"`
	S       float64 `json:"s"`
	C       float64 `json:"c"`
	Norm    float64 `json:"norm"`
	Weight  float64 `json:"weight,omitempty"`
	Checked bool    `json:"spot_checked,omitempty"`
}

// EpochReport is what the merge of one epoch found; it is written next to
// the checkpoint (merge.json) and summarised in the publication record.
type EpochReport struct {
	Job      string       `json:"job"`
	Epoch    int          `json:"epoch"`
	Rule     string       `json:"rule"`
	Scores   []DeltaScore `json:"scores"`
	Excluded []string     `json:"excluded,omitempty"` // slots dropped by a failed spot-check
	// RingDisagreements lists nodes whose claimed base for a sync differs
	// from what the ring should have produced from the submitted deltas.
	RingDisagreements []string `json:"ring_disagreements,omitempty"`
	// RingUnknown lists syncs whose ring result matched no configuration.
	RingUnknown   []int   `json:"ring_unknown,omitempty"`
	SpotChecks    int     `json:"spot_checks"`
	LossBefore    float64 `json:"loss_before"`
	LossAfter     float64 `json:"loss_after"`
	Accuracy      float64 `json:"accuracy"`
	Quality       float64 `json:"quality"` // mean over accepted deltas
	CID           string  `json:"cid"`
	WeightsCID    string  `json:"weights_cid"`
	MergeSeconds  float64 `json:"merge_seconds"`
	CheckpointDir string  `json:"checkpoint_dir"`
}

// CheckpointDir is where the checkpoint of an epoch is written.
func (j *Judge) CheckpointDir(job string, epoch int) string {
	return filepath.Join(j.cfg.DataDir, "checkpoints", job, fmt.Sprintf("epoch-%04d", epoch))
}

// startAdapter is the adapter epoch e starts from.
func (j *Judge) startAdapter(plan jobconf.Plan, job string, epoch int) (*model.Adapter, error) {
	if epoch == 1 {
		return plan.InitialAdapter(j.base)
	}
	a, _, err := peft.Read(j.CheckpointDir(job, epoch-1))
	return a, err
}

// aggregate merges the epoch being aggregated and publishes it.
func (j *Judge) aggregate(ctx context.Context, jb state.Job) error {
	t0 := j.cfg.Now()
	plan, err := jobconf.FromSpec(jb.ID, jb.Spec)
	if err != nil {
		return j.fail(ctx, jb.ID, err.Error())
	}
	e := jb.Epoch
	start, err := j.startAdapter(plan, jb.ID, e)
	if err != nil {
		return fmt.Errorf("judge: checkpoint of epoch %d: %w", e-1, err)
	}
	rep, final, err := j.mergeEpoch(ctx, plan, jb, start)
	if err != nil {
		return err
	}
	// Publish: PEFT layout, the weights' own CID in the card, the
	// directory's CID from the store (kubo's, via boxo).
	ev, err := heldout.Evaluate(j.base, final, plan.Trainer.Task, j.cfg.EvalSize, j.cfg.Threads)
	if err != nil {
		return err
	}
	rep.Accuracy = ev.Accuracy
	wb, err := peft.WeightsBytes(final)
	if err != nil {
		return err
	}
	wcid, _, err := artifact.ImportReader(ctx, artifact.NewMemBlocks(), strings.NewReader(string(wb)))
	if err != nil {
		return err
	}
	rep.WeightsCID = wcid.String()
	dir := j.CheckpointDir(jb.ID, e)
	acc := ev.Accuracy
	card := peft.Card{BaseModel: "zoo-gym/" + jobconf.BuiltinModel, BaseSHA3: basemodel.SHA3(), Job: jb.ID, Epoch: e,
		Quality: rep.Quality, Accuracy: &acc, WeightsCID: rep.WeightsCID,
		Extra: map[string]string{peft.ExtraTask: plan.Trainer.Task, "aggregation": rep.Rule}}
	if err := os.RemoveAll(dir); err != nil { // a merge interrupted earlier left a partial directory
		return err
	}
	if err := peft.Write(dir, final, card); err != nil {
		return err
	}
	root, err := j.publish(ctx, jb.ID, e, dir)
	if err != nil {
		return err
	}
	rep.CID, rep.CheckpointDir = root, dir
	rep.MergeSeconds = j.cfg.Now().Sub(t0).Seconds()
	if b, err := json.MarshalIndent(rep, "", "  "); err == nil {
		_ = writeFile(filepath.Join(j.cfg.DataDir, "checkpoints", jb.ID, fmt.Sprintf("merge-%04d.json", e)), append(b, '\n'))
	}
	record, sig := j.sign("publication", map[string]any{
		"job": jb.ID, "epoch": e, "cid": rep.CID, "weights_cid": rep.WeightsCID, "quality": rep.Quality,
		"accuracy": rep.Accuracy, "rule": rep.Rule, "deltas": len(rep.Scores), "time": j.cfg.Now().UTC().Format(time.RFC3339Nano),
		"hanzod": hex.EncodeToString(j.cfg.Key.Public().(ed25519.PublicKey)),
	})
	j.pay(ctx, jb, e, rep)
	if _, err := j.eng.Do(ctx, state.PublishCheckpoint{Job: jb.ID, Epoch: e, CID: rep.CID, Record: record, Signature: sig}); err != nil {
		return err
	}
	j.countMerge(rep.MergeSeconds)
	j.log.Info("checkpoint published", "job", jb.ID, "epoch", e, "cid", rep.CID, "accuracy", rep.Accuracy,
		"quality", rep.Quality, "deltas", len(rep.Scores), "seconds", rep.MergeSeconds)
	return nil
}

// sign returns the canonical JSON of a record and its signature by hanzod
// over "zoo-gym/record/v1/" ‖ kind ‖ 0x00 ‖ record.
func (j *Judge) sign(kind string, fields map[string]any) (string, string) {
	fields["kind"] = kind
	b, _ := json.Marshal(fields) // map keys sorted: canonical
	return string(b), hex.EncodeToString(ed25519.Sign(j.cfg.Key, RecordMessage(kind, b)))
}

// RecordMessage is what hanzod signs for a record of kind.
func RecordMessage(kind string, record []byte) []byte {
	return append([]byte("zoo-gym/record/v1/"+kind+"\x00"), record...)
}

// VerifyRecord checks a publication or settlement record's signature.
func VerifyRecord(pub ed25519.PublicKey, kind, record, sigHex string) bool {
	sig, err := hex.DecodeString(sigHex)
	return err == nil && ed25519.Verify(pub, RecordMessage(kind, []byte(record)), sig)
}

func (j *Judge) fail(ctx context.Context, job, reason string) error {
	_, err := j.eng.Do(ctx, state.FailJob{Job: job, Reason: trim("validator: "+reason, 1024)})
	return err
}

type entry struct {
	node string
	slot string
	a    *model.Adapter
	meta struct {
		base string
		loss float64
	}
	digest  string
	checked bool
}

// mergeEpoch reconstructs the ring, spot-checks, scores and merges every
// sync of the epoch. It returns the report and the checkpoint of record.
func (j *Judge) mergeEpoch(ctx context.Context, plan jobconf.Plan, jb state.Job, start *model.Adapter) (*EpochReport, *model.Adapter, error) {
	e := jb.Epoch
	rule, err := merge.ParseRule(jb.Spec.Aggregation)
	if err != nil {
		return nil, nil, err
	}
	rep := &EpochReport{Job: jb.ID, Epoch: e, Rule: string(rule)}
	template := start.ZeroLike()
	K := plan.Syncs()
	syncs := make([][]*entry, K+1)
	for key, dig := range jb.Slots {
		slot := key.String()
		var ep int
		var step uint64
		var node string
		if _, err := fmt.Sscanf(strings.ReplaceAll(slot, "/", " "), "%d %d %s", &ep, &step, &node); err != nil || ep != e {
			continue
		}
		_, k, ok := plan.SyncOf(step)
		if !ok {
			continue
		}
		a, meta, err := j.loadDelta(ctx, jb.ID, slot, template)
		if err != nil {
			return nil, nil, err
		}
		en := &entry{node: node, slot: slot, a: a, digest: dig}
		en.meta.base, en.meta.loss = meta.BaseCheckpoint, meta.ClaimedLoss
		syncs[k] = append(syncs[k], en)
	}
	for k := range syncs {
		sort.Slice(syncs[k], func(a, b int) bool { return syncs[k][a].node < syncs[k][b].node })
	}

	// What the ring should have produced: S[k] is the adapter every
	// member held after sync k's all-reduce, rebuilt from the submitted
	// deltas in the order of a ring configuration of the job; the right
	// configuration is the one whose result the next sync's deltas name as
	// their base. nil: unknown.
	rings, err := j.ringHistory(ctx, jb.ID)
	if err != nil {
		return nil, nil, err
	}
	S := make([]*model.Adapter, K)
	S[0] = start
	if d := jobconf.Digest(start); true {
		for _, en := range syncs[1] {
			if en.meta.base != d {
				rep.RingDisagreements = append(rep.RingDisagreements, fmt.Sprintf("%s sync 1 (did not start from the checkpoint of record)", short(en.node)))
			}
		}
	}
	for k := 1; k < K; k++ {
		if S[k-1] == nil {
			break
		}
		claims := map[string]int{}
		for _, en := range syncs[k+1] {
			claims[en.meta.base]++
		}
		var best *model.Adapter
		bestVotes := 0
		for _, order := range rings {
			vecs, ok := ringInputs(order, syncs[k])
			if !ok {
				continue
			}
			mean, err := ring.Reference(vecs, ring.Mean)
			if err != nil {
				continue
			}
			c := S[k-1].Clone()
			if err := jobconf.AddFlat(c, mean); err != nil {
				return nil, nil, err
			}
			if v := claims[jobconf.Digest(c)]; v > bestVotes {
				best, bestVotes = c, v
			}
		}
		if best == nil {
			rep.RingUnknown = append(rep.RingUnknown, k)
			break
		}
		S[k] = best
		d := jobconf.Digest(best)
		for _, en := range syncs[k+1] {
			if en.meta.base != d {
				rep.RingDisagreements = append(rep.RingDisagreements, fmt.Sprintf("%s sync %d", short(en.node), k+1))
			}
		}
	}

	// A delta whose claimed start differs from what the ring produced (when
	// that is known) is not comparable with the others, and could be
	// dodging the spot-check by naming a false base: it is left out of the
	// merge (not slashed: a corrupted ring would make honest nodes
	// disagree too, and then no configuration matches at all).
	for k := 1; k <= K; k++ {
		if S[k-1] == nil {
			continue
		}
		d := jobconf.Digest(S[k-1])
		for _, en := range syncs[k] {
			if en.meta.base != d {
				en.a = nil
				rep.Excluded = append(rep.Excluded, en.slot+" (base disagrees with the ring)")
			}
		}
	}

	// Spot-checks: re-execute the sampled deltas whose start is known.
	bp := jb.Spec.SpotCheckShare()
	for k := 1; k <= K; k++ {
		for _, en := range syncs[k] {
			if en.a == nil || !j.sampled(en.digest, bp) || S[k-1] == nil || en.meta.base != jobconf.Digest(S[k-1]) {
				continue
			}
			rep.SpotChecks++
			en.checked = true
			ok, detail, err := j.replay(ctx, plan, e, k, en, S)
			if err != nil {
				return nil, nil, err
			}
			if !ok {
				rep.Excluded = append(rep.Excluded, en.slot)
				j.log.Warn("spot-check failed", "job", jb.ID, "node", short(en.node), "sync", k, "detail", detail)
				b, _ := os.ReadFile(j.deltaPath(jb.ID, en.slot))
				j.punish(ctx, jb.ID, en.node, "spot_check", "slot "+en.slot+": "+detail, []*submission{{file: b, digest: en.digest}})
				en.a = nil
			}
		}
	}

	// Score and merge sync by sync along the orchestrator's own
	// trajectory T.
	tk, err := task.Lookup(plan.Trainer.Task)
	if err != nil {
		return nil, nil, err
	}
	shard := task.NewSplit(tk, j.cfg.ShardSize).Eval
	loss := func(a *model.Adapter) (float64, error) {
		return heldout.Loss(&model.Model{W: j.base, A: a, Threads: j.cfg.Threads}, shard)
	}
	T := start.Clone()
	if rep.LossBefore, err = loss(T); err != nil {
		return nil, nil, err
	}
	var prevU []float32
	var normSum float64
	var normN int
	var qSum float64
	mcfg := merge.Config{Rule: rule, Byzantine: jb.Spec.Byzantine}
	for k := 1; k <= K; k++ {
		var live []*entry
		for _, en := range syncs[k] {
			if en.a != nil {
				live = append(live, en)
			}
		}
		if len(live) == 0 {
			continue
		}
		before, err := loss(T)
		if err != nil {
			return nil, nil, err
		}
		for _, en := range live {
			normSum += jobconf.Norm(en.a)
			normN++
		}
		nbar := normSum / float64(normN)
		var in []merge.Input
		var scores []DeltaScore
		w := merge.Weights{Alpha: j.cfg.Weights[0], Beta: j.cfg.Weights[1], Gamma: j.cfg.Weights[2]}
		for _, en := range live {
			v := jobconf.Flatten(en.a)
			after := T.Clone()
			_ = jobconf.AddFlat(after, v)
			la, err := loss(after)
			if err != nil {
				return nil, nil, err
			}
			n := merge.Norm(v)
			cos := 0.0
			if prevU != nil {
				cos = merge.Cosine(v, prevU)
			}
			sc := merge.Quality(w, before, la, n, nbar, cos)
			in = append(in, merge.Input{Node: en.node, Vec: v, Quality: sc.Q})
			scores = append(scores, DeltaScore{Node: en.node, Sync: k, Quality: sc.Q, DeltaL: sc.DeltaL, S: sc.S, C: sc.C, Norm: n, Checked: en.checked})
			qSum += sc.Q
		}
		c := mcfg
		if f := merge.CheckDefensible(rule, len(in), c.Byzantine); f != nil {
			// Fewer contributors than the declared f needs: merge what the
			// rule can still defend and say so.
			j.log.Warn("fewer deltas than the declared f needs", "job", jb.ID, "sync", k, "deltas", len(in), "err", f)
			c.Byzantine = max(0, (len(in)-1)/3)
			if rule == merge.Mean {
				c.Byzantine = 0
			}
		}
		u, mr, err := merge.Merge(c, in)
		if err != nil {
			return nil, nil, fmt.Errorf("judge: merge of sync %d: %w", k, err)
		}
		for i := range scores {
			for _, ct := range mr.Contributions {
				if ct.Node == scores[i].Node {
					scores[i].Weight = ct.Weight
				}
			}
		}
		rep.Scores = append(rep.Scores, scores...)
		if err := jobconf.AddFlat(T, u); err != nil {
			return nil, nil, err
		}
		prevU = u
	}
	if len(rep.Scores) > 0 {
		rep.Quality = qSum / float64(len(rep.Scores))
	}
	if rep.LossAfter, err = loss(T); err != nil {
		return nil, nil, err
	}
	return rep, T, nil
}

// ringInputs returns the members' deltas in ring order, if every member of
// the configuration submitted one for the sync.
func ringInputs(order []string, es []*entry) ([][]float32, bool) {
	by := map[string]*entry{}
	for _, en := range es {
		by[en.node] = en
	}
	var out [][]float32
	for _, id := range order {
		en := by[id]
		if en == nil || en.a == nil {
			return nil, false
		}
		out = append(out, jobconf.Flatten(en.a))
	}
	return out, len(out) > 0
}

// ringHistory lists the distinct ring orders the job was configured with,
// newest first (read from the event log).
func (j *Judge) ringHistory(ctx context.Context, job string) ([][]string, error) {
	evs, err := j.history.read(ctx, j.eng)
	if err != nil {
		return nil, err
	}
	var out [][]string
	seen := map[string]bool{}
	for _, ev := range evs {
		if rc, ok := ev.Body.(state.RingConfigured); ok && rc.Job == job {
			if key := strings.Join(rc.Ring, ","); !seen[key] {
				seen[key] = true
				out = append([][]string{rc.Ring}, out...)
			}
		}
	}
	return out, nil
}

// logReader is the part of the engine the event scans need.
type logReader interface {
	Read(ctx context.Context, from uint64, max int) ([]ostore.Record, uint64, error)
}

// historyKinds are the events the judge reads back from the log: ring
// configurations (ring reconstruction) and the money of a job (settlement).
var historyKinds = []string{"ring_configured", "job_submitted", "rewards_paid", "slashed"}

// eventHistory keeps the historyKinds events of the log read so far, so
// that each epoch reads only the records appended since the last one
// instead of the whole log (which grows with every heartbeat). The log is
// append-only, so what was read stays true.
type eventHistory struct {
	mu   sync.Mutex
	next uint64 // the first index not read yet
	evs  []state.Event
}

// read brings the history up to the end of the log and returns it. The
// slice is append-only: callers may keep it.
func (h *eventHistory) read(ctx context.Context, eng logReader) ([]state.Event, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	next, err := scanEvents(ctx, eng, max(h.next, 1), historyKinds, func(ev state.Event) error {
		h.evs = append(h.evs, ev)
		return nil
	})
	h.next = max(h.next, next)
	return h.evs[:len(h.evs):len(h.evs)], err
}

// scanEvents calls fn, in log order from index from, for every event whose
// type is one of kinds (all events when kinds is empty); records of other
// types are skipped without being decoded. It returns the index after the
// last record read (from when there was none).
func scanEvents(ctx context.Context, eng logReader, from uint64, kinds []string, fn func(state.Event) error) (uint64, error) {
	var quoted []string
	for _, k := range kinds {
		quoted = append(quoted, `"type":"`+k+`"`)
	}
	for {
		recs, last, err := eng.Read(ctx, from, 1000)
		if err != nil {
			return from, err
		}
		for _, r := range recs {
			if len(quoted) > 0 && !slices.ContainsFunc(quoted, func(q string) bool { return bytes.Contains(r.Data, []byte(q)) }) {
				from = r.Index + 1
				continue
			}
			ev, err := state.DecodeEvent(r.Data)
			if err != nil {
				return from, err
			}
			if err := fn(ev); err != nil {
				return from, err
			}
			from = r.Index + 1
		}
		if len(recs) == 0 || recs[len(recs)-1].Index >= last {
			return from, nil
		}
	}
}

// replay re-executes node's sync k from the start of the epoch, applying
// the reconstructed ring results between syncs exactly as a worker does,
// and compares the delta bit for bit.
func (j *Judge) replay(ctx context.Context, plan jobconf.Plan, epoch, k int, en *entry, S []*model.Adapter) (bool, string, error) {
	worker, err := jobconf.Worker(en.node)
	if err != nil {
		return false, err.Error(), nil
	}
	tr, err := trainer.Resume(j.base, plan.Trainer, worker, j.cfg.Threads, trainer.State{Step: plan.FirstStep(epoch), Adapter: S[0]})
	if err != nil {
		return false, "", err
	}
	var losses []float64
	for s := 1; s <= k; s++ {
		losses = losses[:0]
		for i := 0; i < plan.Interval; i++ {
			st, err := tr.Step(ctx)
			if err != nil {
				return false, "", err
			}
			losses = append(losses, st.Loss)
		}
		if s == k {
			break
		}
		st := tr.State()
		st.Adapter = S[s].Clone()
		if tr, err = trainer.Resume(j.base, plan.Trainer, worker, j.cfg.Threads, st); err != nil {
			return false, "", err
		}
	}
	d := jobconf.Sub(tr.Adapter(), S[k-1])
	jobconf.Clip(d, plan.ClipNorm(d.NumParams()))
	want, got := jobconf.Flatten(d), jobconf.Flatten(en.a)
	diff := 0
	for i := range want {
		if want[i] != got[i] {
			diff++
		}
	}
	if diff > 0 {
		return false, fmt.Sprintf("replay differs in %d of %d values (claimed loss %.6g, replayed %.6g)", diff, len(want), en.meta.loss, jobconf.ClaimedLoss(losses)), nil
	}
	if cl := jobconf.ClaimedLoss(losses); absf(cl-en.meta.loss) > 0.05 {
		return false, fmt.Sprintf("claimed loss %.6g, replay gives %.6g", en.meta.loss, cl), nil
	}
	return true, "", nil
}

func absf(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// pay distributes the epoch's reward: compute by accepted samples, quality
// by summed quality, participation by syncs contributed.
func (j *Judge) pay(ctx context.Context, jb state.Job, epoch int, rep *EpochReport) {
	type acc struct{ samples, quality, syncs uint64 }
	by := map[string]*acc{}
	plan, _ := jobconf.FromSpec(jb.ID, jb.Spec)
	for _, s := range rep.Scores {
		a := by[s.Node]
		if a == nil {
			a = &acc{}
			by[s.Node] = a
		}
		a.samples += plan.Samples()
		a.quality += uint64(s.Quality * 1e6)
		a.syncs++
	}
	var cs []ledger.Contribution
	for node, a := range by {
		cs = append(cs, ledger.Contribution{ID: node, Compute: a.samples, Quality: a.quality, Participation: a.syncs})
	}
	sort.Slice(cs, func(a, b int) bool { return cs[a].ID < cs[b].ID })
	if len(cs) == 0 {
		return
	}
	var enough bool
	j.eng.View(func(m *state.Machine) { enough = m.Treasury() >= j.cfg.Reward })
	if !enough {
		j.log.Warn("treasury cannot fund the epoch's reward; none paid", "job", jb.ID, "epoch", epoch, "reward", j.cfg.Reward)
		return
	}
	if _, err := j.eng.Do(ctx, state.PayRewards{Job: jb.ID, Epoch: epoch, Total: j.cfg.Reward, Contributions: cs}); err != nil {
		j.log.Warn("rewards not paid", "job", jb.ID, "epoch", epoch, "err", err)
	}
}

// Settlement is the signed record that closes a job.
type Settlement struct {
	Job        string                  `json:"job"`
	State      string                  `json:"state"`
	Checkpoint string                  `json:"checkpoint,omitempty"`
	Nodes      map[string]NodeSettling `json:"nodes"`
}

// NodeSettling is one participant's account of the job.
type NodeSettling struct {
	Accepted int           `json:"accepted"`
	Rejected int           `json:"rejected"`
	Samples  uint64        `json:"samples"`
	Rewards  ledger.Amount `json:"rewards"`
	Slashed  ledger.Amount `json:"slashed"`
	Slashes  []string      `json:"slashes,omitempty"`
}

func (j *Judge) settle(ctx context.Context, jb state.Job) error {
	s := Settlement{Job: jb.ID, State: string(jb.State), Nodes: map[string]NodeSettling{}}
	if len(jb.CIDs) > 0 {
		s.Checkpoint = jb.CIDs[len(jb.CIDs)-1]
	}
	rewards, slashes, err := j.jobMoney(ctx, jb)
	if err != nil {
		return err
	}
	for _, n := range jb.Participants {
		ns := NodeSettling{Rewards: rewards[n]}
		if t := jb.Tally[n]; t != nil {
			ns.Accepted, ns.Rejected, ns.Samples = t.Accepted, t.Rejected, t.Samples
		}
		for _, sl := range slashes[n] {
			ns.Slashed += sl.Amount
			ns.Slashes = append(ns.Slashes, sl.Reason)
		}
		s.Nodes[n] = ns
	}
	b, _ := json.Marshal(s)
	var fields map[string]any
	_ = json.Unmarshal(b, &fields)
	record, sig := j.sign("settlement", fields)
	_, err = j.eng.Do(ctx, state.Settle{Job: jb.ID, Record: record, Signature: sig})
	if err == nil {
		j.log.Info("job settled", "job", jb.ID, "state", jb.State)
	}
	return err
}

// jobMoney sums the rewards paid in a job and the slashes of its
// participants since the job was submitted, from the event log.
func (j *Judge) jobMoney(ctx context.Context, jb state.Job) (map[string]ledger.Amount, map[string][]state.Slashed, error) {
	rewards := map[string]ledger.Amount{}
	slashes := map[string][]state.Slashed{}
	in := false
	evs, err := j.history.read(ctx, j.eng)
	for _, ev := range evs {
		switch b := ev.Body.(type) {
		case state.JobSubmitted:
			in = in || b.Job == jb.ID
		case state.RewardsPaid:
			if b.Job == jb.ID {
				for _, p := range b.Payouts {
					rewards[p.ID] += p.Amount
				}
			}
		case state.Slashed:
			if in && contains(jb.Participants, b.Account) {
				slashes[b.Account] = append(slashes[b.Account], b)
			}
		}
	}
	return rewards, slashes, err
}

// publish puts dir into the store as version epoch of the job's
// checkpoint and returns its root CID. A merge repeated after a restart
// finds its own earlier publication (same bytes, same CID) and reuses it.
func (j *Judge) publish(ctx context.Context, job string, epoch int, dir string) (string, error) {
	im, err := artifact.Import(ctx, artifact.NewMemBlocks(), dir)
	if err != nil {
		return "", err
	}
	if k := j.cfg.Store.Known(artifact.KindCheckpoint, job); k != nil && k.Manifest.Version >= uint64(epoch) {
		if k.Manifest.Version == uint64(epoch) && k.Manifest.Root == im.Root.String() {
			return im.Root.String(), nil
		}
		return "", fmt.Errorf("judge: the store already holds version %d of %s's checkpoint with another root", k.Manifest.Version, job)
	}
	rec, err := j.cfg.Store.Publish(ctx, dir, store.Meta{Kind: artifact.KindCheckpoint, Name: job, Version: uint64(epoch)}, j.cfg.Key, j.cfg.Now())
	if err != nil {
		return "", fmt.Errorf("judge: publish %s: %w", dir, err)
	}
	if rec.Root != im.Root.String() {
		return "", fmt.Errorf("judge: store computed %s for %s, the importer %s", rec.Root, dir, im.Root)
	}
	return rec.Root, nil
}
