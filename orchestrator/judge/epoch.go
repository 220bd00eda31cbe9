package judge

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/store"
	"github.com/zooai/gym/internal/atomicfile"
	"github.com/zooai/gym/keys/edkey"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/peft"
	"github.com/zooai/gym/orchestrator/blob"
	"github.com/zooai/gym/orchestrator/judge/epoch"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/state"
	ostore "github.com/zooai/gym/orchestrator/store"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/merge"
	"github.com/zooai/gym/protocol/verdict"
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
	var settled []string
	// Bases named by CID are exported, verified and parsed here, outside
	// the engine's lock (once per process each); plan then finds them.
	// So are datasets named by CID, read with their job's mapping: the
	// plan is derived here and cached.
	var models []string
	var data []state.Job
	j.eng.View(func(m *state.Machine) {
		for _, id := range m.Jobs() {
			if jb, _ := m.Job(id); jb.State == state.Running || jb.State == state.Aggregating {
				models = append(models, jb.Spec.Model)
				if _, byCID, _ := jobspec.DatasetCID(jb.Spec.Dataset); byCID {
					data = append(data, jb)
				}
			}
		}
	})
	for _, model := range models {
		if _, err := j.baseFor(ctx, model); err != nil {
			j.log.Warn("base model unavailable", "model", model, "err", err)
		}
	}
	for _, jb := range data {
		if _, err := j.plan(jb.ID, jb.Spec); err != nil {
			j.log.Warn("job's dataset unavailable", "job", jb.ID, "dataset", jb.Spec.Dataset, "err", err)
		}
	}
	j.eng.View(func(m *state.Machine) {
		for _, id := range m.Jobs() {
			jb, _ := m.Job(id)
			t := todo{job: jb}
			switch {
			case jb.State == state.Running && !jb.Paused:
				plan, err := j.plan(jb.ID, jb.Spec)
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
			case jb.Settled:
				settled = append(settled, jb.ID)
				continue
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
			if err := j.screenEpoch(ctx, jb); err != nil {
				j.log.Warn("screening failed", "job", jb.ID, "epoch", jb.Epoch, "err", err)
				errs = append(errs, err)
			}
			key := fmt.Sprintf("%s/%d", jb.ID, jb.Epoch)
			if jb.Epoch > 1 && len(jb.CIDs) >= jb.Epoch-1 {
				// The workers fetch the epoch's start from the leader's
				// artifact server: a replica that took over since the
				// last merge restores and publishes it.
				j.mu.Lock()
				ready := j.ready[key]
				j.mu.Unlock()
				if !ready {
					if _, err := j.checkpoint(ctx, jb.ID, jb.Epoch-1, jb.CIDs[jb.Epoch-2]); err != nil {
						errs = append(errs, err)
					} else {
						j.mu.Lock()
						j.ready[key] = true
						j.mu.Unlock()
					}
				}
			}
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
			if err := j.CheckStake(); err != nil {
				errs = append(errs, err)
				continue
			}
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
			if err := j.CheckStake(); err != nil {
				errs = append(errs, err)
				continue
			}
			if err := j.settle(ctx, jb); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := j.reclaim(ctx, settled); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// reclaim deletes the accepted deltas and the evidence of the settled
// jobs once Config.BlobRetention has passed since this judge first saw
// each settled. Nothing else needs them: the log's verdicts name their
// digests but replay reads no blob, no running job refers to another
// job's files (their names start with the job's id), and the checkpoints
// of record (under their CIDs) are kept. Each judge deletes each job's
// files once, so a replica that takes over deletes again — idempotent,
// and it removes what a deposed leader may have written late.
func (j *Judge) reclaim(ctx context.Context, settled []string) error {
	if j.cfg.BlobRetention < 0 {
		return nil
	}
	now := j.cfg.Now()
	var errs []error
	for _, id := range settled {
		j.mu.Lock()
		done := j.reclaimed[id]
		at, seen := j.settledAt[id]
		if !seen {
			at = now
			j.settledAt[id] = at
		}
		j.mu.Unlock()
		if done || now.Sub(at) < j.cfg.BlobRetention {
			continue
		}
		var r blob.Reclaimed
		var err error
		for _, dir := range []string{"deltas/" + id, "traces/" + id, "evidence/" + id} {
			d, derr := j.cfg.Blobs.DeleteDir(ctx, dir)
			r = r.Add(d)
			err = errors.Join(err, derr)
		}
		j.cmu.Lock()
		j.freed = j.freed.Add(r)
		j.cmu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("judge: delete the blobs of settled job %s: %w", id, err))
			continue
		}
		j.mu.Lock()
		j.reclaimed[id] = true
		delete(j.settledAt, id)
		delete(j.seen, id)
		j.mu.Unlock()
		j.log.Info("blobs of a settled job deleted", "job", id, "blobs", r.Blobs, "bytes", r.Bytes)
	}
	return errors.Join(errs...)
}

// maxMergeFailures is how many merges of one epoch may fail in a row
// before the job is failed.
const maxMergeFailures = 20

// EpochReport is what the merge of one epoch found (epoch.Report); it is
// written next to the checkpoint (merge-NNNN.json) and summarised in the
// publication record.
type EpochReport = epoch.Report

// DeltaScore is how one accepted delta fared in the merge (epoch.Score).
type DeltaScore = epoch.Score

// CheckpointDir is where the checkpoint of an epoch is written.
func (j *Judge) CheckpointDir(job string, epoch int) string {
	return filepath.Join(j.cfg.DataDir, "checkpoints", job, fmt.Sprintf("epoch-%04d", epoch))
}

// startAdapter is the adapter epoch e starts from: the checkpoint of
// record of epoch e−1 (restored from the blob store when this replica did
// not merge it), with the outer optimiser's state it carries (nil: a fresh
// one).
func (j *Judge) startAdapter(ctx context.Context, plan jobconf.Plan, jb state.Job, epoch int) (*llama.Adapter, *jobconf.Outer, error) {
	if epoch == 1 {
		a, err := plan.InitialAdapter(plan.Base.Weights.Cfg)
		return a, nil, err
	}
	if len(jb.CIDs) < epoch-1 {
		return nil, nil, fmt.Errorf("judge: %s has %d checkpoints, epoch %d starts from the %dth", jb.ID, len(jb.CIDs), epoch, epoch-1)
	}
	dir, err := j.checkpoint(ctx, jb.ID, epoch-1, jb.CIDs[epoch-2])
	if err != nil {
		return nil, nil, err
	}
	a, _, err := peft.Read(dir, plan.Base.Weights.Cfg)
	if err != nil {
		return nil, nil, err
	}
	o, err := readOuter(dir, plan, a.NumParams())
	return a, o, err
}

// readOuter is the outer optimiser's state the checkpoint directory dir
// carries into the next epoch (jobconf.OuterFile; absent: a fresh one, as
// after an epoch whose merges took no step).
func readOuter(dir string, plan jobconf.Plan, params int) (*jobconf.Outer, error) {
	b, err := os.ReadFile(filepath.Join(dir, jobconf.OuterFile))
	if errors.Is(err, fs.ErrNotExist) {
		b, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	o, err := plan.ResumeOuter(b, params)
	if err != nil {
		return nil, fmt.Errorf("judge: checkpoint %s: %w", dir, err)
	}
	return o, nil
}

// checkpointFiles are the files of a checkpoint directory (peft.Write),
// and the outer optimiser's state where the job carries it
// (optionalCheckpointFiles: absent otherwise).
var (
	checkpointFiles         = []string{peft.WeightsFile, peft.ConfigFile, peft.CardFile, jobconf.OuterFile}
	optionalCheckpointFiles = map[string]bool{jobconf.OuterFile: true}
)

// checkpointBlob names a file of the checkpoint with root CID root.
func checkpointBlob(root, file string) string { return "checkpoints/" + root + "/" + file }

// keepCheckpoint puts the files of the checkpoint directory dir, whose
// root CID is root, into the blob store.
func (j *Judge) keepCheckpoint(ctx context.Context, dir, root string) error {
	for _, f := range checkpointFiles {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if optionalCheckpointFiles[f] && errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := j.cfg.Blobs.Put(ctx, checkpointBlob(root, f), b); err != nil {
			return fmt.Errorf("judge: keep checkpoint %s: %w", root, err)
		}
	}
	return nil
}

// RestoreCheckpoint returns the directory of the checkpoint of record of
// job's epoch e (root CID root, as logged), restoring it from the blob
// store when this replica did not merge it.
func (j *Judge) RestoreCheckpoint(ctx context.Context, job string, e int, root string) (string, error) {
	return j.checkpoint(ctx, job, e, root)
}

// checkpoint returns the directory of the checkpoint of record of job's
// epoch e, whose root CID the log records as root. A replica that did not
// merge it (it took over since) restores it from the blob store, checks
// that its files import to root, and publishes it into its artifact store
// (the same bytes, the same CID), so the workers fetch the epoch's start
// from whichever replica leads.
func (j *Judge) checkpoint(ctx context.Context, job string, e int, root string) (string, error) {
	dir := j.CheckpointDir(job, e)
	if _, err := os.Stat(filepath.Join(dir, peft.WeightsFile)); err != nil {
		if err := j.restoreDir(ctx, dir, root); err != nil {
			return "", fmt.Errorf("judge: checkpoint of epoch %d of %s (%s): %w", e, job, root, err)
		}
		j.log.Info("checkpoint restored from the blob store", "job", job, "epoch", e, "cid", root)
	}

	if k := j.cfg.Store.Known(artifact.KindCheckpoint, job); k != nil && k.Manifest.Version > uint64(e) {
		return dir, nil // a later epoch is published already (a merge interrupted after publishing)
	}
	if got, err := j.publish(ctx, job, e, dir); err != nil {
		return "", err
	} else if got != root {
		return "", fmt.Errorf("judge: checkpoint of epoch %d of %s in %s is %s, the log records %s", e, job, dir, got, root)
	}
	return dir, nil
}

// aggregate merges the epoch being aggregated and publishes it: it loads
// the evaluation's inputs, has package epoch decide, then acts on the
// result — slashes, the checkpoint's files and publication, rewards.
func (j *Judge) aggregate(ctx context.Context, jb state.Job) error {
	t0 := j.cfg.Now()
	plan, err := j.plan(jb.ID, jb.Spec)
	if err != nil {
		return j.fail(ctx, jb.ID, err.Error())
	}
	e := jb.Epoch
	start, startOuter, err := j.startAdapter(ctx, plan, jb, e)
	if err != nil {
		return fmt.Errorf("judge: checkpoint of epoch %d: %w", e-1, err)
	}
	onNodes := j.OnNodes(jb.Spec.Model)
	delegated := j.checkK(jb.Spec) >= verdict.MinK
	if delegated {
		// The merge waits for the verdicts of the checks an earlier
		// evaluation delegated (asking more validators as needed).
		if wait, err := j.awaiting(ctx, jb.ID, e); err != nil || wait {
			return err
		}
	}
	// The deltas the epoch's screening decoded are taken as they are (one
	// copy in memory); the others are read back.
	sc := j.screened(jb.ID, e)
	var cached map[jobspec.Slot]epoch.Delta
	if sc != nil {
		cached = sc.deltas
	}
	in, err := j.epochInput(ctx, plan, jb, start, true, cached)
	if err != nil {
		return err
	}
	in.StartOuter = startOuter
	if sc != nil {
		in.Screened = sc.checks
	}
	if in.Rebases, err = j.rebasesOf(ctx, plan, jb, sc); err != nil {
		return err
	}
	if onNodes {
		// No model here: every check and the evaluation go to validators.
		in.OnNodes, in.Replay = true, nil
	}
	var dl *delegation
	if delegated {
		dl = &delegation{j: j, job: jb.ID, e: e, plan: plan, self: in.CheckTraces}
		in.CheckTraces = dl.check
	}
	// A node proven to cheat on submission during the epoch forfeits all
	// its deltas of it. A proof that arrives while the evaluation runs (an
	// equivocation on a slot of this epoch) is caught by reading the
	// offenders again before publishing and evaluating again.
	var res *epoch.Result
	for try := 0; ; try++ {
		if in.Offenders, err = j.offenders(ctx, jb.ID, e); err != nil {
			return err
		}
		if dl != nil {
			dl.pending = nil
		}
		if res, err = epoch.Evaluate(ctx, in); err != nil {
			return err
		}
		now, err := j.offenders(ctx, jb.ID, e)
		if err != nil {
			return err
		}
		if len(now) == len(in.Offenders) || try == 2 {
			break
		}
	}
	if dl != nil && (res.Pending > 0 || len(dl.pending) > 0) {
		// Checks delegated to validators are not decided: the evaluation
		// is discarded and repeated when their verdicts are in.
		j.log.Info("merge waits for validators", "job", jb.ID, "epoch", e, "checks", len(dl.pending))
		return j.delegate(ctx, jb, plan, dl.pending)
	}
	if res.Evaluation != nil {
		// Merged without a model: the held-out figures are the
		// validators' to measure; the merge waits for them.
		m, who, why, err := j.measured(ctx, jb, plan, res.Evaluation)
		if err != nil || (m == nil && why == "") {
			return err
		}
		if why != "" {
			j.log.Warn("epoch published unscored", "job", jb.ID, "epoch", e, "reason", why)
		}
		in.Measured, in.Unmeasured = m, why
		dl.pending = nil
		res = nil // the first pass's adapters are garbage before the second's are made
		if res, err = epoch.Evaluate(ctx, in); err != nil {
			return err
		}
		if res.Evaluation != nil || res.Pending > 0 || len(dl.pending) > 0 {
			return fmt.Errorf("judge: epoch %d of %s changed while it was measured; evaluating again", e, jb.ID)
		}
		res.Report.Evaluators = who
	}
	if delegated {
		res.Rewards = j.settleChecks(ctx, jb.ID, e, res.Rewards)
	}
	for _, sl := range res.Slashes {
		j.log.Warn("spot-check failed", "job", jb.ID, "node", short(sl.Node), "sync", sl.Sync, "detail", sl.Detail)
		b, _, _ := j.readDelta(ctx, jb.ID, sl.Slot, sl.Digest)
		j.punish(ctx, jb.ID, sl.Node, sl.Offence, "slot "+sl.Slot.String()+": "+sl.Detail, []*submission{{file: b, digest: sl.Digest}})
	}
	for _, f := range res.Shortfalls {
		j.log.Warn("fewer deltas than the declared f needs", "job", jb.ID, "sync", f.Sync, "deltas", f.Deltas, "err", f.Err)
	}
	rep, final := &res.Report, res.Merged
	if sc != nil {
		j.smu.Lock()
		rep.Ejections = slices.Clone(sc.ejections)
		j.smu.Unlock()
	}
	for _, r := range jb.Rebases {
		if r.Epoch == e && r.CID != "" {
			rep.Rebases = append(rep.Rebases, r.Sync)
		}
	}
	// Publish: PEFT layout, the weights' own CID in the card, the
	// directory's CID from the store (kubo's, via boxo).
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
	acc := rep.Accuracy
	card := peft.Card{BaseModel: plan.Base.Name, BaseSHA3: plan.Base.SHA3, Job: jb.ID, Epoch: e,
		Quality: rep.Quality, Accuracy: &acc, WeightsCID: rep.WeightsCID,
		Extra: map[string]string{peft.ExtraTask: plan.Trainer.Task, "aggregation": rep.Rule}}
	if err := os.RemoveAll(dir); err != nil { // a merge interrupted earlier left a partial directory
		return err
	}
	if err := peft.Write(dir, final, card); err != nil {
		return err
	}
	if plan.CarriesOuter() {
		// The outer state the next epoch continues from, under the
		// checkpoint's CID (nothing when no merge took a step).
		b, err := res.Outer.MarshalState()
		if err != nil {
			return err
		}
		if b != nil {
			if err := atomicfile.WriteBytes(filepath.Join(dir, jobconf.OuterFile), 0o644, true, b); err != nil {
				return err
			}
		}
	}
	root, err := j.publish(ctx, jb.ID, e, dir)
	if err != nil {
		return err
	}
	// Before the publication is logged: a replica that takes over from
	// here on starts the next epoch from these bytes.
	if err := j.keepCheckpoint(ctx, dir, root); err != nil {
		return err
	}
	rep.CID, rep.CheckpointDir = root, dir
	rep.MergeSeconds = j.cfg.Now().Sub(t0).Seconds()
	if b, err := json.MarshalIndent(rep, "", "  "); err == nil {
		_ = atomicfile.WriteBytes(filepath.Join(j.cfg.DataDir, "checkpoints", jb.ID, fmt.Sprintf("merge-%04d.json", e)), 0o644, true, append(b, '\n'))
	}
	record, sig := j.sign("publication", map[string]any{
		"job": jb.ID, "epoch": e, "cid": rep.CID, "weights_cid": rep.WeightsCID, "quality": rep.Quality,
		"accuracy": rep.Accuracy, "rule": rep.Rule, "deltas": len(rep.Scores), "time": j.cfg.Now().UTC().Format(time.RFC3339Nano),
	})
	j.pay(ctx, jb.ID, e, res.Rewards)
	if len(res.Watch) > 0 {
		if _, err := j.eng.Do(ctx, state.WatchNodes{Job: jb.ID, Epoch: e, Nodes: res.Watch, Until: e + WatchEpochs}); err != nil {
			j.log.Warn("nodes not put under watch", "job", jb.ID, "nodes", len(res.Watch), "err", err)
		}
	}
	if _, err := j.eng.Do(ctx, state.PublishCheckpoint{Job: jb.ID, Epoch: e, CID: rep.CID, Record: record, Signature: sig}); err != nil {
		return err
	}
	j.smu.Lock()
	if j.screen[jb.ID] == sc {
		delete(j.screen, jb.ID) // the epoch is over; the next starts its own
	}
	j.smu.Unlock()
	j.countMerge(rep.MergeSeconds)
	j.log.Info("checkpoint published", "job", jb.ID, "epoch", e, "cid", rep.CID, "accuracy", rep.Accuracy,
		"quality", rep.Quality, "deltas", len(rep.Scores), "seconds", rep.MergeSeconds)
	return nil
}

// epochInput loads what the evaluation of jb's current epoch depends on:
// the epoch's accepted deltas (read back from disk and verified again),
// the job's ring configurations from the log, the merge rule.
//
// Without load the deltas are left out (the screening keeps its own).
// cached holds deltas already decoded, by slot (nil: none).
func (j *Judge) epochInput(ctx context.Context, plan jobconf.Plan, jb state.Job, start *llama.Adapter, load bool, cached map[jobspec.Slot]epoch.Delta) (epoch.Input, error) {
	e := jb.Epoch
	rule, err := merge.ParseRule(jb.Spec.Aggregation)
	if err != nil {
		return epoch.Input{}, err
	}
	in := epoch.Input{Job: jb.ID, Epoch: e, Plan: plan, Rule: rule, Byzantine: jb.Spec.Byzantine,
		SpotCheckBP: jb.Spec.SpotCheckShare(), SpotKey: j.cfg.Key.Seed(), Start: start,
		Base: plan.Base, ShardSize: j.cfg.ShardSize, EvalSize: j.cfg.EvalSize, Threads: j.cfg.Threads, Weights: j.cfg.Weights, Outliers: merge.BoundsFor(plan.SingleStep(), j.cfg.Outliers),
		Replay: epoch.Retrain(plan.Base, plan, e, j.cfg.Threads)}
	if plan.Base.ConfigOnly {
		in.Replay = nil // nothing to replay with: Evaluate runs on nodes
	}
	template := start.Zeroed()
	for sl, dig := range jb.Slots {
		if !load || sl.Epoch != e {
			continue
		}
		if _, _, ok := plan.SyncOf(sl.Step); !ok {
			continue
		}
		if d, ok := cached[sl]; ok && d.Digest == dig {
			in.Deltas = append(in.Deltas, d)
			continue
		}
		d, err := j.epochDelta(ctx, jb.ID, sl, dig, template)
		if err != nil {
			return epoch.Input{}, err
		}
		in.Deltas = append(in.Deltas, d)
	}
	in.CheckTraces = j.traceChecker(jb.ID, plan, e)
	job := jb.ID
	in.ClaimedSamples = func(ctx context.Context, d epoch.Delta) ([][]epoch.Sample, error) {
		sets, err := j.loadTraces(ctx, job, d.Traces)
		if err != nil {
			return nil, err
		}
		out := make([][]epoch.Sample, len(sets))
		for i, set := range sets {
			for _, q := range set.Seqs {
				out[i] = append(out[i], epoch.Sample{PromptIDs: q.PromptIDs, CompletionIDs: q.CompletionIDs, Reward: q.Reward})
			}
		}
		return out, nil
	}
	for n, until := range jb.Watch {
		if until >= e {
			if in.Watched == nil {
				in.Watched = map[string]bool{}
			}
			in.Watched[n] = true
		}
	}
	if in.Rings, in.RingGroups, err = j.ringHistory(ctx, jb.ID); err != nil {
		return epoch.Input{}, err
	}
	return in, nil
}

// epochDelta reads back and decodes the accepted delta of slot sl (file
// digest dig) of job, shaped like template.
func (j *Judge) epochDelta(ctx context.Context, job string, sl jobspec.Slot, dig string, template *llama.Adapter) (epoch.Delta, error) {
	d, err := j.loadDeltaBackend(ctx, job, sl, template)
	if err != nil {
		return epoch.Delta{}, err
	}
	return epoch.Delta{Slot: sl, Node: sl.Node, Step: sl.Step, Digest: dig,
		Base: d.meta.BaseCheckpoint, ClaimedLoss: d.meta.ClaimedLoss, Adapter: d.adapter, Backend: d.backend, DType: d.dtype, Traces: d.traces}, nil
}

// ErrUnstaked is returned when the signing key's account has less than
// Config.MinStake bonded: the judge signs no records then.
var ErrUnstaked = errors.New("judge: the orchestrator's signing key is not staked")

// Account is the ledger account of the signing key: its public key in hex.
func (j *Judge) Account() string { return hex.EncodeToString(j.cfg.Key.Public().(ed25519.PublicKey)) }

// CheckStake says whether the signing key's account has Config.MinStake
// bonded in the embedded ledger, and how to bond it when not.
func (j *Judge) CheckStake() error {
	if j.cfg.MinStake == 0 {
		return nil
	}
	acct := j.Account()
	var bonded ledger.Amount
	j.eng.View(func(m *state.Machine) { bonded = m.Account(acct).Bonded })
	if bonded >= j.cfg.MinStake {
		return nil
	}
	return fmt.Errorf("%w: account %s has %s GYM bonded, an orchestrator needs %s: deposit and bond it on the leader "+
		"(gym ledger deposit %s %s, then gym ledger bond %s %s); "+
		"every replica signs with the same key (--key FILE)", ErrUnstaked, acct, gymString(bonded), gymString(j.cfg.MinStake),
		acct, gymString(j.cfg.MinStake-bonded), acct, gymString(j.cfg.MinStake-bonded))
}

func gymString(a ledger.Amount) string {
	if a%ledger.GYM == 0 {
		return fmt.Sprintf("%d", a/ledger.GYM)
	}
	return fmt.Sprintf("%d.%06d", a/ledger.GYM, a%ledger.GYM)
}

// sign returns the canonical JSON of a record and its signature by hanzod
// over "zoo-gym/record/v1/" ‖ kind ‖ 0x00 ‖ record. Every record names the
// signing key ("hanzod", which is also its ledger account) and the stake
// it had bonded when it signed ("bonded", micro-GYM): anyone checks a
// record from the record itself and a ledger lookup (CheckRecord).
func (j *Judge) sign(kind string, fields map[string]any) (string, string) {
	fields["kind"] = kind
	fields["hanzod"] = j.Account()
	var bonded ledger.Amount
	j.eng.View(func(m *state.Machine) { bonded = m.Account(j.Account()).Bonded })
	fields["bonded"] = bonded
	b, _ := json.Marshal(fields) // map keys sorted: canonical
	return string(b), hex.EncodeToString(ed25519.Sign(j.cfg.Key, RecordMessage(kind, b)))
}

// RecordMessage is what hanzod signs for a record of kind.
func RecordMessage(kind string, record []byte) []byte {
	return append([]byte("zoo-gym/record/v1/"+kind+"\x00"), record...)
}

// CheckRecord checks a publication or settlement record from the record
// alone and a ledger lookup: the signature verifies under the key the
// record names ("hanzod"), and that key's account has at least min bonded
// (bonded reads the ledger: the embedded one's GetBalance, or the chain).
// It returns the account.
func CheckRecord(kind, record, sigHex string, bonded func(account string) (ledger.Amount, error), min ledger.Amount) (string, error) {
	var r struct {
		Kind   string `json:"kind"`
		Hanzod string `json:"hanzod"`
	}
	if err := json.Unmarshal([]byte(record), &r); err != nil {
		return "", fmt.Errorf("judge: record: %w", err)
	}
	if r.Kind != kind {
		return "", fmt.Errorf("judge: record of kind %q, want %q", r.Kind, kind)
	}
	pub, err := hex.DecodeString(r.Hanzod)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return "", fmt.Errorf("judge: record names no signing key (hanzod %q)", r.Hanzod)
	}
	if !VerifyRecord(pub, kind, record, sigHex) {
		return r.Hanzod, fmt.Errorf("judge: the %s record's signature does not verify under %s", kind, r.Hanzod)
	}
	b, err := bonded(r.Hanzod)
	if err != nil {
		return r.Hanzod, err
	}
	if b < min {
		return r.Hanzod, fmt.Errorf("%w: the record's signer %s has %s GYM bonded, an orchestrator needs %s", ErrUnstaked, r.Hanzod, gymString(b), gymString(min))
	}
	return r.Hanzod, nil
}

// VerifyRecord checks a publication or settlement record's signature
// (keys and signatures as package edkey checks them; a key of the wrong
// size is false, not a panic).
func VerifyRecord(pub ed25519.PublicKey, kind, record, sigHex string) bool {
	sig, err := hex.DecodeString(sigHex)
	return err == nil && edkey.Verify(pub, RecordMessage(kind, []byte(record)), sig) == nil
}

func (j *Judge) fail(ctx context.Context, job, reason string) error {
	_, err := j.eng.Do(ctx, state.FailJob{Job: job, Reason: trim("validator: "+reason, 1024)})
	return err
}

// ringHistory lists the distinct ring orders the job was configured with,
// newest first (read from the event log), and each one's groups (nil:
// flat), which decide the order its all-reduce summed in.
func (j *Judge) ringHistory(ctx context.Context, job string) ([][]string, [][]int, error) {
	evs, err := j.history.read(ctx, j.eng)
	if err != nil {
		return nil, nil, err
	}
	var out [][]string
	var groups [][]int
	seen := map[string]bool{}
	for _, ev := range evs {
		if rc, ok := ev.Body.(state.RingConfigured); ok && rc.Job == job {
			if key := fmt.Sprint(rc.Ring, rc.Groups); !seen[key] {
				seen[key] = true
				out = append([][]string{rc.Ring}, out...)
				groups = append([][]int{rc.Groups}, groups...)
			}
		}
	}
	return out, groups, nil
}

// offenders returns the nodes proven to cheat during epoch e of job, with
// the offence: on submission (the offence-proving verdicts of the log) or
// inside the ring all-reduce (a slash whose evidence holds a signed ring
// frame of the epoch, RingEvidence).
func (j *Judge) offenders(ctx context.Context, job string, e int) (map[string]string, error) {
	evs, err := j.history.read(ctx, j.eng)
	out := map[string]string{}
	for _, ev := range evs {
		switch b := ev.Body.(type) {
		case state.DeltaJudged:
			if b.Job == job && b.Epoch == e && offenceReasons[b.Reason] {
				if _, seen := out[b.Node]; !seen {
					out[b.Node] = b.Reason
				}
			}
		case state.Slashed:
			var evd Evidence
			if json.Unmarshal(b.Evidence, &evd) == nil && evd.Job == job && evd.Epoch == e {
				why := evd.Offence // a check the epoch's screening made (screen.go)
				if len(evd.Frames) > 0 {
					why = OffenceRingNorm
				}
				if _, seen := out[b.Account]; !seen && why != "" {
					out[b.Account] = why
				}
			}
		}
	}
	return out, err
}

// OffenceRingNorm is the offence a node slashed on ring evidence forfeits
// its epoch for (Report.Excluded names it).
const OffenceRingNorm = "ring norm"

// offenceReasons are the rejections that prove an offence (and slash).
var offenceReasons = map[string]bool{epoch.ReasonEquivocation: true, epoch.ReasonReplay: true, epoch.ReasonNorm: true}

// logReader is the part of the engine the event scans need.
type logReader interface {
	Read(ctx context.Context, from uint64, max int) ([]ostore.Record, uint64, error)
	First(ctx context.Context) (uint64, error)
}

// historyKinds are the events the judge reads back from the log: ring
// configurations (ring reconstruction), the money of a job (settlement)
// and the verdicts that proved an offence (forfeiture).
var historyKinds = []string{"ring_configured", "job_submitted", "rewards_paid", "slashed", "delta_judged"}

// eventHistory keeps the historyKinds events of the log read so far, so
// that each epoch reads only the records appended since the last one
// instead of the whole log (which grows with every heartbeat). The log is
// append-only, so what was read stays true. It keeps what the log keeps:
// events the engine compacted away (those of settled jobs only, see
// state.Machine.RetainFrom) are dropped here too, so a long-running judge
// holds as much as a fresh one that reads the log from its start.
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
	var err error
	// A compaction between First and the scan moves the start again: a
	// few tries.
	for try := 0; try < 3; try++ {
		var first, next uint64
		if first, err = eng.First(ctx); err != nil {
			break
		}
		h.forget(first)
		next, err = scanEvents(ctx, eng, h.next, historyKinds, func(ev state.Event) error {
			if v, ok := ev.Body.(state.DeltaJudged); ok && !offenceReasons[v.Reason] {
				return nil // only the verdicts that prove an offence are kept
			}
			h.evs = append(h.evs, ev)
			return nil
		})
		h.next = max(h.next, next)
		if !errors.Is(err, ostore.ErrCompacted) {
			break
		}
	}
	return h.evs[:len(h.evs):len(h.evs)], err
}

// forget drops the events before index first (compacted from the log)
// and moves the next read there if it was before.
func (h *eventHistory) forget(first uint64) {
	h.next = max(h.next, first, 1)
	i := 0
	for i < len(h.evs) && h.evs[i].Index < first {
		i++
	}
	if i > 0 {
		// A new array: callers may hold the old slice.
		h.evs = append([]state.Event(nil), h.evs[i:]...)
	}
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

// pay distributes the epoch's reward over the evaluation's contributions.
// The state machine decides the amount (state.Config: a rate per verified
// sample, capped) and who funds it (the submitter's escrow or the
// treasury); a payer that cannot fund it is refused and logged.
func (j *Judge) pay(ctx context.Context, job string, epoch int, cs []ledger.Contribution) {
	if len(cs) == 0 {
		return
	}
	evs, err := j.eng.Do(ctx, state.PayRewards{Job: job, Epoch: epoch, Contributions: cs})
	if err != nil {
		j.log.Warn("rewards not paid", "job", job, "epoch", epoch, "err", err)
		return
	}
	for _, ev := range evs {
		if rp, ok := ev.Body.(state.RewardsPaid); ok {
			j.log.Info("epoch paid", "job", job, "epoch", epoch, "samples", rp.Samples, "total", uint64(rp.Total), "from", cmp.Or(rp.From, ledger.Treasury))
		}
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
