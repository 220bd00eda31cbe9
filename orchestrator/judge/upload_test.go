package judge_test

import (
	"testing"

	"github.com/zooai/gym/orchestrator/judge"
	"github.com/zooai/gym/protocol/delta"
	"github.com/zooai/gym/protocol/jobconf"
)

// upload is file's announcement by node i with the first n bytes as head
// (n ≤ 0: the whole file).
func (e *env) upload(i int, file []byte, n int, traces int64) judge.Upload {
	if n <= 0 || n > len(file) {
		n = len(file)
	}
	return judge.Upload{Node: e.ids[i], Job: e.job, Digest: digestOf(file), DeltaBytes: int64(len(file)), TracesBytes: traces, Head: file[:n]}
}

func (e *env) preflight(u judge.Upload) (judge.Verdict, bool) {
	e.t.Helper()
	v, ok, err := e.j.Preflight(e.ctx, u)
	if err != nil {
		e.t.Fatal(err)
	}
	return v, ok
}

// TestPreflight: what an upload's head decides is decided before its file
// is read — and written to no log — and a file that passes is judged as
// Submit judges it, only if it is the one announced.
func TestPreflight(t *testing.T) {
	e := newEnv(t, 3, tinySpec())
	f := e.good(0, 1, 1)
	metaEnd := 0
	if info, err := delta.ReadHead(e.ctx, f, delta.DefaultLimits()); err != nil {
		t.Fatal(err)
	} else {
		m := info.Entries[0]
		metaEnd = int(m.DataOffset + m.StoredBytes)
	}
	before := len(e.events())
	refused := func(u judge.Upload, reason string) {
		t.Helper()
		v, ok := e.preflight(u)
		if ok || v.Accepted || v.Reason != reason || v.Detail == "" {
			t.Fatalf("preflight %+v %v, want refused for %s", v, ok, reason)
		}
	}
	// The head is the header and the metadata: enough.
	if v, ok := e.preflight(e.upload(0, f, metaEnd, 0)); !ok {
		t.Fatalf("a good head: %+v", v)
	}
	refused(e.upload(0, f, metaEnd-1, 0), judge.ReasonFormat)  // cut inside the metadata
	refused(e.upload(1, f, metaEnd, 0), judge.ReasonMetadata)  // announced by another node
	refused(e.upload(0, f, metaEnd, 1000), judge.ReasonTraces) // traces for a delta naming none
	otherJob := e.upload(0, f, metaEnd, 0)
	otherJob.Job = "job-00000099" // announced for another job than the metadata names
	refused(otherJob, judge.ReasonMetadata)
	huge := e.upload(0, f, metaEnd, 0)                                                           //
	huge.DeltaBytes = jobconf.MaxFileBytes(e.tmpl, int64(metaEnd)) + 1                           // more than the adapter takes
	refused(huge, judge.ReasonShape)                                                             //
	refused(e.upload(0, e.encode(0, e.sd(0, 2, 1, e.small(2, 1e-4))), 0, 0), judge.ReasonLate)   // a later epoch
	refused(e.upload(0, e.rawFile(0, tensors(e.small(1, 1e-4)), nil), 0, 0), judge.ReasonFormat) // no metadata
	other := e.sd(0, 1, 1, e.small(3, 1e-4))
	other.Binding = "another deployment"
	refused(e.upload(0, e.encode(0, other), 0, 0), judge.ReasonMetadata)
	if n := len(e.events()); n != before {
		t.Fatalf("preflight refusals wrote %d events", n-before)
	}

	// Not the file announced: refused, nothing recorded.
	g := e.good(0, 2, 2)
	wrong := e.upload(0, f, 0, 0)
	if v, err := e.j.SubmitUpload(e.ctx, wrong, g, nil); err != nil || v.Accepted || v.Reason != judge.ReasonFormat {
		t.Fatalf("another file than announced: %+v %v", v, err)
	}
	if v, err := e.j.SubmitUpload(e.ctx, e.upload(1, f, 0, 0), f, nil); err != nil || v.Accepted || v.Reason != judge.ReasonSignature {
		t.Fatalf("a file another node signed: %+v %v", v, err)
	}
	// The file announced: judged and accepted; announced again, a
	// duplicate from the head alone.
	if v, err := e.j.SubmitUpload(e.ctx, e.upload(0, f, 0, 0), f, nil); err != nil || !v.Accepted {
		t.Fatalf("the announced file: %+v %v", v, err)
	}
	if v, ok := e.preflight(e.upload(0, f, metaEnd, 0)); ok || !v.Duplicate || v.Digest != digestOf(f) {
		t.Fatalf("again: %+v %v", v, ok)
	}
	// A different file for the same slot must be read: it may be
	// equivocation.
	if _, ok := e.preflight(e.upload(0, e.encode(0, e.sd(0, 1, 1, e.small(9, 1e-4))), 0, 0)); !ok {
		t.Fatal("a different file for a held slot was not read")
	}
}

// TestTracesAfterCheaperRefusals: a delta refused on cheaper grounds (its
// epoch is over) is refused as such, without its traces being
// decompressed or hashed (they were before anything else once).
func TestTracesAfterCheaperRefusals(t *testing.T) {
	e := newEnv(t, 3, tinySpec())
	d := e.sd(0, 2, 1, e.small(1, 1e-4)) // epoch 2 has not started
	d.Traces = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"
	file := e.encode(0, d)
	v, err := e.j.Submit(e.ctx, file, []byte("not a zstd frame, never read"))
	if err != nil || v.Reason != judge.ReasonLate {
		t.Fatalf("verdict %+v %v, want late (not traces)", v, err)
	}
}
