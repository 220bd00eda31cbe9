package judge_test

import (
	"bytes"
	"testing"
	"unicode/utf8"

	"github.com/zooai/gym/orchestrator/judge"
)

// FuzzSubmit feeds arbitrary bytes to Submit. Seeds: a valid delta of a
// running job, truncations of it and single bit flips. Nothing but the
// valid delta may ever be accepted (no forgery can verify), and nothing
// may panic or fail with an error rather than a verdict. One orchestrator
// serves every input: rejected garbage does not change its state.
func FuzzSubmit(f *testing.F) {
	e := newEnv(f, 3, tinySpec())
	valid := e.good(0, 1, 1)
	f.Add(valid)
	for _, n := range []int{0, 1, 5, 8, 16, 64, len(valid) / 2, len(valid) - 97, len(valid) - 96, len(valid) - 1} {
		f.Add(valid[:n])
	}
	for _, off := range []int{0, 5, 7, 12, 30, 60, len(valid) / 3, len(valid) / 2, len(valid) - 100, len(valid) - 60, len(valid) - 1} {
		for _, bit := range []byte{0x01, 0x80} {
			g := bytes.Clone(valid)
			g[off] ^= bit
			f.Add(g)
		}
	}
	f.Add(append(bytes.Clone(valid), 0))
	known := map[string]bool{}
	for _, r := range []string{judge.ReasonSignature, judge.ReasonFormat, judge.ReasonMetadata, judge.ReasonStale, judge.ReasonLate,
		judge.ReasonNotMember, judge.ReasonEquivocation, judge.ReasonReplay, judge.ReasonShape, judge.ReasonNonFinite, judge.ReasonNorm} {
		known[r] = true
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := e.j.Submit(e.ctx, b, nil)
		if err != nil {
			t.Fatalf("Submit returned an error, not a verdict: %v", err)
		}
		if r.Accepted && !bytes.Equal(b, valid) {
			t.Fatalf("accepted %d bytes that are not the signed delta: %+v", len(b), r)
		}
		if !r.Accepted && !known[r.Reason] {
			t.Fatalf("rejection without a known reason: %+v", r)
		}
		if !utf8.ValidString(r.Reason) || !utf8.ValidString(r.Detail) {
			t.Fatalf("verdict %+v cannot be sent: a protobuf string must be valid UTF-8", r)
		}
		if want := e.expectedDigest(b); r.Digest != want {
			t.Fatalf("digest %q, want %q", r.Digest, want)
		}
	})
}
