package judge_test

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/zooai/gym/model/peft"
	"github.com/zooai/gym/orchestrator/state"
)

// TestMergeDeterministic submits the same honest deltas of epoch 1 in two
// different orders into two fresh orchestrators: the checkpoint files
// and the CID must be identical.
func TestMergeDeterministic(t *testing.T) {
	long(t)
	spec := tinySpec()
	spec.SpotCheckBP = 10000 // the replays must not depend on the order either
	type result struct {
		weights []byte
		cid     string
		scores  string
	}
	run := func(order func(h *honest) [][]byte) result {
		e := newEnv(t, 3, spec)
		h := honestEpoch1(t, e)
		for _, f := range order(h) {
			if r := e.submit(f); !r.Accepted || r.Duplicate {
				t.Fatalf("honest delta: %+v", r)
			}
		}
		e.stepUntil("epoch 1 merged", func(jb state.Job) bool { return jb.State == state.Running && jb.Epoch == 2 })
		e.checkPublished(1)
		w, err := os.ReadFile(filepath.Join(e.j.CheckpointDir(e.job, 1), peft.WeightsFile))
		if err != nil {
			t.Fatal(err)
		}
		rep := e.report(1)
		if len(rep.Excluded) > 0 || rep.SpotChecks != len(rep.Scores) {
			t.Fatalf("excluded %v, %d spot-checks of %d deltas", rep.Excluded, rep.SpotChecks, len(rep.Scores))
		}
		var sc bytes.Buffer
		for _, s := range rep.Scores {
			sc.WriteString(s.Node)
			sc.WriteString(" ")
			sc.WriteString(formatFloat(s.Quality, s.Weight, s.Norm))
			sc.WriteString("\n")
		}
		return result{weights: w, cid: e.published(1).CID, scores: sc.String()}
	}
	// Sync by sync in ring order.
	a := run(func(h *honest) [][]byte {
		var out [][]byte
		for k := 1; k < len(h.files); k++ {
			for _, i := range h.ring {
				out = append(out, h.files[k][i])
			}
		}
		return out
	})
	// Node by node, last ring member first.
	b := run(func(h *honest) [][]byte {
		var out [][]byte
		r := slices.Clone(h.ring)
		slices.Reverse(r)
		for _, i := range r {
			for k := 1; k < len(h.files); k++ {
				out = append(out, h.files[k][i])
			}
		}
		return out
	})
	if !bytes.Equal(a.weights, b.weights) {
		t.Fatalf("%s differs between submission orders (%d and %d bytes)", peft.WeightsFile, len(a.weights), len(b.weights))
	}
	if a.cid != b.cid {
		t.Fatalf("CIDs differ: %s and %s", a.cid, b.cid)
	}
	if a.scores != b.scores {
		t.Fatalf("scores differ:\n%s\n%s", a.scores, b.scores)
	}
}

// formatFloat renders values bit-exactly.
func formatFloat(v ...float64) string {
	var b bytes.Buffer
	for _, x := range v {
		fmt.Fprintf(&b, " %016x", math.Float64bits(x))
	}
	return b.String()
}
