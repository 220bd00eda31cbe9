package judge

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/store"
	"github.com/zooai/gym/internal/atomicfile"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/peft"
	"github.com/zooai/gym/orchestrator/blob"
	"github.com/zooai/gym/orchestrator/judge/epoch"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/verdict"
)

// The judge checks a running epoch's deltas sync by sync as they arrive
// (docs/byzantine.md), not only at the epoch's end: once every member's
// delta of a sync is in, epoch.ScreenSync runs the model-free outlier
// tests over them and replays (or trace-checks) the outliers and the keyed
// sample from the ring's reconstructed start. A proven cheater is slashed
// and ejected at once (the ring is repaired by the ejection), and the
// members are told to continue, at a sync none of them has submitted yet,
// from a state rebuilt from the honest deltas (epoch.RebaseState), so the
// rest of the epoch is not spent climbing out of the damage. The checks
// made here are handed to the end of the epoch's evaluation
// (epoch.Input.Screened), which does not make them again.

// screening is what the judge keeps of one running epoch's screening.
// It is a cache: a replica that takes over starts a new one (from sync 1,
// the published rebases read back from the blob store).
type screening struct {
	job   string
	epoch int
	next  int // the next sync to screen
	start *llama.Adapter
	outer *jobconf.Outer
	// deltas are the epoch's accepted deltas read so far, decoded.
	deltas  map[jobspec.Slot]epoch.Delta
	checks  map[jobspec.Slot]epoch.Check
	rebases map[int]epoch.Rebase
	// ejections are the in-epoch ejections, for the epoch's report;
	// first is when each node's first delta of the epoch was accepted
	// (under smu, both).
	ejections []epoch.Ejection
	first     map[string]time.Time
}

// screens returns the screening of jb's running epoch, dropping those of
// its earlier epochs.
func (j *Judge) screens(jb state.Job) *screening {
	j.smu.Lock()
	defer j.smu.Unlock()
	return j.screenLocked(jb.ID, jb.Epoch)
}

func (j *Judge) screenLocked(job string, e int) *screening {
	sc := j.screen[job]
	if sc == nil || sc.epoch < e {
		sc = &screening{job: job, epoch: e, next: 1, deltas: map[jobspec.Slot]epoch.Delta{},
			checks: map[jobspec.Slot]epoch.Check{}, rebases: map[int]epoch.Rebase{}, first: map[string]time.Time{}}
		j.screen[job] = sc
	}
	return sc
}

// noteAccepted records when node's first delta of job's epoch e was
// accepted (the start of an ejected cheater's lag).
func (j *Judge) noteAccepted(job string, e int, node string) {
	j.smu.Lock()
	defer j.smu.Unlock()
	if sc := j.screenLocked(job, e); sc.epoch == e {
		if _, ok := sc.first[node]; !ok {
			sc.first[node] = j.cfg.Now()
		}
	}
}

// screened returns what the screening of job's epoch e found (nil: none).
func (j *Judge) screened(job string, e int) *screening {
	j.smu.Lock()
	defer j.smu.Unlock()
	if sc := j.screen[job]; sc != nil && sc.epoch == e {
		return sc
	}
	return nil
}

// screenable reports whether jb's deltas are checked while its epoch
// runs: hanzod checks them itself (checks delegated to validators, and
// jobs whose model work runs on nodes, are checked at the epoch's end),
// and the job checks something.
func (j *Judge) screenable(jb state.Job) bool {
	return !j.cfg.NoScreening && jb.Spec.SpotCheckShare() > 0 && j.checkK(jb.Spec) < verdict.MinK && !j.OnNodes(jb.Spec.Model)
}

// screenEpoch screens every sync of jb's running epoch whose deltas are
// all in, acts on what it proves, and publishes the rebases whose syncs
// are complete.
func (j *Judge) screenEpoch(ctx context.Context, jb state.Job) error {
	if jb.State != state.Running || !j.screenable(jb) {
		j.log.Debug("not screened", "job", jb.ID, "state", jb.State, "share", jb.Spec.SpotCheckShare(), "k", j.checkK(jb.Spec), "on_nodes", j.OnNodes(jb.Spec.Model))
		return nil
	}
	plan, err := j.plan(jb.ID, jb.Spec)
	if err != nil || plan.Base.ConfigOnly {
		return nil
	}
	sc := j.screens(jb)
	e, K := jb.Epoch, plan.Syncs()
	if sc.start == nil {
		if sc.start, sc.outer, err = j.startAdapter(ctx, plan, jb, e); err != nil {
			return fmt.Errorf("judge: checkpoint of epoch %d: %w", e-1, err)
		}
	}
	template := sc.start.Zeroed()
	for sl, dig := range jb.Slots {
		if _, ok := sc.deltas[sl]; ok || sl.Epoch != e {
			continue
		}
		if _, _, ok := plan.SyncOf(sl.Step); !ok {
			continue
		}
		d, err := j.epochDelta(ctx, jb.ID, sl, dig, template)
		if err != nil {
			return err
		}
		sc.deltas[sl] = d
	}
	for sc.next <= K && syncIn(plan, jb, sc.next) {
		k := sc.next
		in, err := j.screenInput(ctx, plan, jb, sc, k)
		if err != nil {
			return err
		}
		res, err := epoch.ScreenSync(ctx, in, k)
		if err != nil {
			return err
		}
		for _, c := range res.Checks {
			sc.checks[c.Slot] = c
		}
		j.countScreen(len(res.Checks))
		j.log.Debug("sync screened", "job", jb.ID, "epoch", e, "sync", k, "checks", len(res.Checks), "outliers", len(res.Outliers), "unknown", res.Unknown)
		if k < K {
			// The last sync is not all-reduced: nothing is left to
			// protect, and an ejection now could pause a small ring
			// before its epoch ends. The merge, which takes this check
			// back, slashes and ejects.
			for _, sl := range res.Slashes {
				j.ejectCheater(ctx, jb, sl)
			}
		}
		sc.next++
	}
	return j.publishRebases(ctx, plan, jb.ID, sc)
}

// syncIn reports whether every member of jb's ring submitted its delta of
// sync k. (A standby that came into the ring during the epoch submits no
// delta of the syncs before it came: the screening stops there, and the
// epoch's end checks the rest.)
func syncIn(plan jobconf.Plan, jb state.Job, k int) bool {
	step := uint64(plan.SyncStep(jb.Epoch, k))
	for _, n := range jb.Ring {
		if _, ok := jb.Slots[jobspec.Slot{Epoch: jb.Epoch, Step: step, Node: n}]; !ok {
			return false
		}
	}
	return len(jb.Ring) > 0
}

// screenInput is the input of the screening of sync k (or of a rebase at
// k): the epoch's deltas of syncs 1..k, the offenders and rebases known.
func (j *Judge) screenInput(ctx context.Context, plan jobconf.Plan, jb state.Job, sc *screening, k int) (epoch.Input, error) {
	in, err := j.epochInput(ctx, plan, jb.Clone(), sc.start, false, nil)
	if err != nil {
		return epoch.Input{}, err
	}
	in.StartOuter = sc.outer
	last := uint64(plan.SyncStep(jb.Epoch, k))
	for sl, d := range sc.deltas {
		if sl.Step <= last {
			in.Deltas = append(in.Deltas, d)
		}
	}
	if in.Offenders, err = j.offenders(ctx, jb.ID, jb.Epoch); err != nil {
		return epoch.Input{}, err
	}
	if in.Rebases, err = j.rebasesOf(ctx, plan, jb, sc); err != nil {
		return epoch.Input{}, err
	}
	in.Screened = sc.checks
	return in, nil
}

// ejectCheater slashes and ejects the node a screening check proved to
// cheat (penalizeAt, which has the others continue from a rebuilt state).
func (j *Judge) ejectCheater(ctx context.Context, jb state.Job, sl epoch.Slash) {
	b, _, _ := j.readDelta(ctx, jb.ID, sl.Slot, sl.Digest)
	j.log.Warn("check failed while the epoch runs", "job", jb.ID, "node", short(sl.Node), "sync", sl.Sync, "detail", sl.Detail)
	j.penalizeAt(ctx, jb.ID, sl.Node, Evidence{Offence: sl.Offence, Detail: "slot " + sl.Slot.String() + ": " + sl.Detail, Job: jb.ID, Epoch: jb.Epoch},
		[]*submission{{file: b, digest: sl.Digest}}, sl.Sync)
}

// afterEjection follows the ejection of node, a member of jb's running
// epoch proven to cheat (by the screening, on submission or in the ring):
// it records the ejection for the epoch's report and the metrics, and
// tells the other members to continue from a rebuilt state at the first
// sync none of them submitted — none when that sync is the epoch's last
// (it is not all-reduced), or when a rebase still to be published will
// leave the node's deltas out anyway. sync is the sync of the delta that
// proved the offence (0: not known).
func (j *Judge) afterEjection(ctx context.Context, jb state.Job, node, offence string, sync int) error {
	plan, err := j.plan(jb.ID, jb.Spec)
	if err != nil {
		return err
	}
	e := jb.Epoch
	ej := epoch.Ejection{Node: node, Offence: offence, Sync: sync, FirstSync: -1}
	var cur state.Job
	var ok bool
	read := func() {
		j.eng.View(func(m *state.Machine) {
			if cur, ok = m.Job(jb.ID); ok {
				cur = cur.Clone()
			}
		})
	}
	read()
	if !ok || cur.State != state.Running || cur.Epoch != e {
		return nil
	}
	ej.Reached = reachedSync(plan, cur)
	for s := range cur.Slots {
		if _, k, _ := plan.SyncOf(s.Step); s.Epoch == e && s.Node == node && (ej.FirstSync < 0 || k < ej.FirstSync) {
			ej.FirstSync = k
		}
	}
	if ej.FirstSync < 0 {
		ej.FirstSync = max(1, ej.Reached) // no delta accepted: its first was refused now
	}
	if ej.Sync == 0 {
		ej.Sync = ej.Reached
	}
	ej.Syncs = max(0, ej.Reached-ej.FirstSync)
	j.smu.Lock()
	sc := j.screenLocked(cur.ID, e)
	if at, ok := sc.first[node]; ok {
		ej.Seconds = j.cfg.Now().Sub(at).Seconds()
	}
	sc.ejections = append(sc.ejections, ej)
	j.smu.Unlock()
	j.countEjection(ej)
	j.log.Warn("cheater ejected while the epoch runs", "job", jb.ID, "node", short(node), "offence", offence, "proven_sync", ej.Sync,
		"first_sync", ej.FirstSync, "reached_sync", ej.Reached, "seconds", ej.Seconds)
	for try := 0; try < 4; try++ {
		if try > 0 {
			read()
		}
		if cur.State != state.Running || cur.Epoch != e || slices.ContainsFunc(cur.Rebases, func(r state.Rebase) bool { return r.CID == "" }) {
			return nil
		}
		at := reachedSync(plan, cur) + 1
		if at >= plan.Syncs() {
			return nil
		}
		_, err := j.eng.Do(ctx, state.SetRebase{Job: jb.ID, Epoch: e, Sync: at, Step: uint64(plan.SyncStep(e, at)),
			Reason: trim(fmt.Sprintf("%s ejected: %s", node, offence), 1024)})
		if err == nil {
			j.log.Info("members continue from a rebuilt state", "job", jb.ID, "epoch", e, "sync", at)
			return nil
		}
		if !errors.Is(err, state.ErrPrecondition) {
			return err
		}
	}
	return nil
}

// reachedSync is the highest sync of jb's running epoch any member has a
// delta accepted for (0: none yet).
func reachedSync(plan jobconf.Plan, jb state.Job) int {
	reached := 0
	for s := range jb.Slots {
		if s.Epoch == jb.Epoch {
			_, k, _ := plan.SyncOf(s.Step)
			reached = max(reached, k)
		}
	}
	return reached
}

// rebaseDir is where the state of job's rebase at epoch e, sync k is
// written.
func (j *Judge) rebaseDir(job string, e, k int) string {
	return filepath.Join(j.cfg.DataDir, "checkpoints", job, fmt.Sprintf("rebase-%04d-%04d", e, k))
}

// publishRebases computes, writes and publishes the state of every
// rebase of the epoch whose sync is complete (every member's delta in,
// screened), and logs its CID and digest.
func (j *Judge) publishRebases(ctx context.Context, plan jobconf.Plan, job string, sc *screening) error {
	var jb state.Job
	var ok bool
	j.eng.View(func(m *state.Machine) {
		if jb, ok = m.Job(job); ok {
			jb = jb.Clone()
		}
	})
	if !ok || jb.State != state.Running || jb.Epoch != sc.epoch {
		return nil
	}
	for _, r := range jb.Rebases {
		if r.CID != "" || r.Epoch != sc.epoch || sc.next <= r.Sync {
			continue
		}
		in, err := j.screenInput(ctx, plan, jb, sc, r.Sync)
		if err != nil {
			return err
		}
		a, o, err := epoch.RebaseState(in, r.Sync)
		if err != nil {
			return err
		}
		dir := j.rebaseDir(job, r.Epoch, r.Sync)
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		card := peft.Card{BaseModel: plan.Base.Name, BaseSHA3: plan.Base.SHA3, Job: job, Epoch: r.Epoch,
			Extra: map[string]string{peft.ExtraTask: plan.Trainer.Task, "rebase_sync": strconv.Itoa(r.Sync)}}
		if err := peft.Write(dir, a, card); err != nil {
			return err
		}
		ob, err := o.MarshalRebase()
		if err != nil {
			return err
		}
		if ob != nil {
			if err := atomicfile.WriteBytes(filepath.Join(dir, jobconf.OuterFile), 0o644, true, ob); err != nil {
				return err
			}
		}
		rec, err := j.cfg.Store.Publish(ctx, dir, store.Meta{Kind: artifact.KindCheckpoint, Name: job + "/rebase",
			Version: uint64(r.Epoch)<<16 | uint64(r.Sync)}, j.cfg.Key, j.cfg.Now())
		if err != nil {
			return fmt.Errorf("judge: publish the rebase state of %s epoch %d sync %d: %w", job, r.Epoch, r.Sync, err)
		}
		// Before it is logged: a replica that takes over reads it back.
		if err := j.keepCheckpoint(ctx, dir, rec.Root); err != nil {
			return err
		}
		digest := jobconf.Digest(a)
		if _, err := j.eng.Do(ctx, state.PublishRebase{Job: job, Epoch: r.Epoch, Sync: r.Sync, CID: rec.Root, Digest: digest}); err != nil {
			return err
		}
		sc.rebases[r.Sync] = epoch.Rebase{Sync: r.Sync, Adapter: a, Outer: o}
		j.log.Info("rebase state published", "job", job, "epoch", r.Epoch, "sync", r.Sync, "cid", rec.Root, "offenders", len(in.Offenders))
	}
	return nil
}

// rebasesOf returns the published rebases of jb's running (or
// aggregating) epoch, from the screening's cache or read back from the
// blob store (a replica that took over), checked against the logged
// digest.
func (j *Judge) rebasesOf(ctx context.Context, plan jobconf.Plan, jb state.Job, sc *screening) ([]epoch.Rebase, error) {
	var out []epoch.Rebase
	for _, r := range jb.Rebases {
		if r.CID == "" || r.Epoch != jb.Epoch {
			continue
		}
		if sc != nil {
			if c, ok := sc.rebases[r.Sync]; ok {
				out = append(out, c)
				continue
			}
		}
		dir := j.rebaseDir(jb.ID, r.Epoch, r.Sync)
		if err := j.restoreDir(ctx, dir, r.CID); err != nil {
			return nil, fmt.Errorf("judge: rebase state of %s epoch %d sync %d: %w", jb.ID, r.Epoch, r.Sync, err)
		}
		a, _, err := peft.Read(dir, plan.Base.Weights.Cfg)
		if err != nil {
			return nil, err
		}
		if d := jobconf.Digest(a); d != r.Digest {
			return nil, fmt.Errorf("judge: rebase state %s has digest %s, the log records %s", r.CID, d, r.Digest)
		}
		b, err := os.ReadFile(filepath.Join(dir, jobconf.OuterFile))
		if errors.Is(err, fs.ErrNotExist) {
			b, err = nil, nil
		}
		if err != nil {
			return nil, err
		}
		o, err := plan.ResumeRebase(b, a.NumParams())
		if err != nil {
			return nil, err
		}
		c := epoch.Rebase{Sync: r.Sync, Adapter: a, Outer: o}
		if sc != nil {
			sc.rebases[r.Sync] = c
		}
		out = append(out, c)
	}
	return out, nil
}

// restoreDir makes sure dir holds the checkpoint-layout directory whose
// root CID is root, restoring its files from the blob store
// (keepCheckpoint) when this replica did not write it (a partial
// directory of an interrupted write is replaced): a checkpoint of record
// or a rebase state.
func (j *Judge) restoreDir(ctx context.Context, dir, root string) error {
	if _, err := os.Stat(filepath.Join(dir, peft.WeightsFile)); err == nil {
		return nil
	}
	_ = os.RemoveAll(dir)
	err := atomicfile.Dir(dir, 0o755, func(tmp string) error {
		for _, f := range checkpointFiles {
			b, err := j.cfg.Blobs.Get(ctx, checkpointBlob(root, f))
			if optionalCheckpointFiles[f] && errors.Is(err, blob.ErrNotFound) {
				continue // the import below finds the root changed if it belonged
			}
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(tmp, f), b, 0o644); err != nil {
				return err
			}
		}
		im, err := artifact.Import(ctx, artifact.NewMemBlocks(), tmp)
		if err != nil {
			return err
		}
		if im.Root.String() != root {
			return fmt.Errorf("the stored files import to %s, the log records %s", im.Root, root)
		}
		return nil
	})
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	return err
}
