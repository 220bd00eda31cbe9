package judge

import (
	"context"

	"github.com/zooai/gym/orchestrator/judge/epoch"
	"github.com/zooai/gym/protocol/delta"
	"github.com/zooai/gym/protocol/jobconf"
)

// Upload is a delta upload's announcement (NodeService.UploadDelta): the
// node that signed it (the server has verified that signature), the
// digest and sizes it announced, and the start of the file.
type Upload struct {
	Node        string
	Job         string
	Digest      string
	DeltaBytes  int64
	TracesBytes int64
	// Head is the file's first bytes: its header and whole __metadata__
	// entry (delta.ReadHead).
	Head []byte
}

// Preflight decides what an upload's announcement and head decide, before
// the rest of the file is read (docs/orchestrator.md, "Delta upload"): the
// metadata names the announcing node and a job that exists; the job's
// plan places the step; the binding, sync and samples are the job's; a
// file already held for the slot under the announced digest is a
// duplicate (answered without reading it); otherwise the sequence, the
// epoch and the node's place in the ring; then the sizes — the file at
// most what a delta of the job's adapter can take (jobconf.MaxFileBytes),
// traces sent exactly when the metadata names them. proceed false comes
// with the verdict to answer now; such a refusal is counted, not written
// to the log (nothing in it is proven until the file verifies). proceed
// true: read the file and Submit it.
func (j *Judge) Preflight(ctx context.Context, u Upload) (v Verdict, proceed bool, err error) {
	v, proceed, err = j.preflight(ctx, u)
	if err == nil && !proceed {
		if v.Duplicate {
			j.countVerdict("duplicate", "")
		} else {
			j.countVerdict("refused", v.Reason)
		}
	}
	return v, proceed, err
}

func (j *Judge) preflight(ctx context.Context, u Upload) (Verdict, bool, error) {
	info, err := delta.ReadHead(ctx, u.Head, delta.Limits{MaxMetadataBytes: maxMetadataBytes})
	if err != nil {
		return reject(ReasonFormat, "%v", err), false, nil
	}
	meta, err := info.Metadata.Fields()
	if err != nil {
		return reject(ReasonMetadata, "%v", err), false, nil
	}
	if meta.Node != u.Node {
		return reject(ReasonMetadata, "metadata names node %s but the upload is %s's", meta.Node, u.Node), false, nil
	}
	if meta.Job != u.Job {
		return reject(ReasonMetadata, "metadata names job %q but the upload was announced for %q", meta.Job, u.Job), false, nil
	}
	if _, err := jobconf.DTypeOf(info.Metadata); err != nil {
		return reject(ReasonMetadata, "%v", err), false, nil
	}
	s := &submission{digest: u.Digest, node: u.Node, meta: meta}
	sub := epoch.Submission{Node: u.Node, Digest: u.Digest, Meta: meta}
	sub.SyncKey, sub.HasSyncKey = info.Metadata.Get(jobconf.KeySync)
	sub.Binding, sub.HasBinding = info.Metadata.Get(jobconf.KeyBinding)
	st, jobID, v, err := j.standing(ctx, s, false)
	if jobID == "" || err != nil {
		return v, false, err
	}
	a, more := epoch.ScreenHead(sub, st)
	switch {
	case a.Outcome == epoch.Duplicate:
		d := duplicate
		d.Digest = u.Digest
		return d, false, nil
	case !more:
		return reject(a.Reason, "%s", a.Detail), false, nil
	}
	// The metadata entry ends where the first tensor's entry starts.
	m := info.Entries[0]
	metaEnd := m.DataOffset + m.StoredBytes
	if limit := jobconf.MaxFileBytes(st.Template, metaEnd); u.DeltaBytes > limit || u.DeltaBytes < metaEnd+delta.TrailerSize {
		return reject(ReasonShape, "the file is announced as %d bytes; a delta of job %s's adapter (%d tensors) takes %d to %d",
			u.DeltaBytes, jobID, len(st.Template.Views()), metaEnd+delta.TrailerSize, limit), false, nil
	}
	want, err := jobconf.TracesOf(info.Metadata)
	if err != nil {
		return reject(ReasonTraces, "%v", err), false, nil
	}
	be, err := jobconf.BackendOf(info.Metadata)
	if err != nil {
		return reject(ReasonMetadata, "%v", err), false, nil
	}
	switch {
	case want == "" && u.TracesBytes > 0:
		return reject(ReasonTraces, "traces are announced with a delta whose metadata names none (%q)", jobconf.KeyTraces), false, nil
	case want == "" && be != "go":
		return reject(ReasonTraces, "a %s delta must name its sync's rollout traces (metadata %q) and send them: hanzod checks it from them (docs/traces.md)", be, jobconf.KeyTraces), false, nil
	case want != "" && u.TracesBytes == 0:
		return reject(ReasonTraces, "the delta names traces %s but none are announced", want), false, nil
	}
	return Verdict{}, true, nil
}

// SubmitUpload judges an upload's whole file and traces (Submit), after
// checking that the file is the one announced: signed by the announcing
// node, with the announced digest. A file that is not is refused as
// format (its signer was authenticated, so the server charges it).
func (j *Judge) SubmitUpload(ctx context.Context, u Upload, file, traces []byte) (Verdict, error) {
	return j.counted(j.submit(ctx, file, traces, &u))
}
