// Package verdict decides a delegated trace check from its validators'
// verdicts and draws the validators asked for one (docs/validators.md).
// Both are pure functions of their inputs, so every hanzod replica and a
// replay of the log decide alike.
//
// A check asks K validators (K ≥ 2). Its answers are outcomes (pass, fail,
// unverifiable) or, for an evaluation, the digest of the figures measured
// (Measured). It is decided when K/2 + 1 verdicts
// agree on the outcome; while it is not, one more validator is asked (two
// verdicts that disagree go to a third), up to 2K + 1 in all, after which
// it is unverifiable. A verdict the decision contradicts is a false
// validation report.
package verdict

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
)

// Outcome is what a validator found.
type Outcome string

// Outcomes.
const (
	Pass         Outcome = "pass"
	Fail         Outcome = "fail"         // a check failed: the node lied
	Unverifiable Outcome = "unverifiable" // nobody's proven fault (an environment server down)
)

// Parse reads an outcome.
func Parse(s string) (Outcome, error) {
	switch o := Outcome(s); o {
	case Pass, Fail, Unverifiable:
		return o, nil
	}
	return "", fmt.Errorf("verdict: outcome %q (want pass, fail or unverifiable)", s)
}

// MinK and MaxK bound the verdicts a job may ask for per check.
const (
	MinK = 2
	MaxK = 5
)

// Quorum is how many agreeing verdicts decide a check asking k.
func Quorum(k int) int { return k/2 + 1 }

// MaxAsked is how many validators a check asking k may ask in all.
func MaxAsked(k int) int { return 2*k + 1 }

// Decision is where a check stands.
type Decision struct {
	// Decided: Outcome is final (Exhausted: reached by asking MaxAsked
	// validators without a quorum, Outcome is Unverifiable then).
	// A verdict the decision contradicts is a false validation report.
	Decided   bool
	Exhausted bool
	Outcome   Outcome
	// Need is how many more validators must be asked (beyond the open
	// assignments) for a quorum still to be possible.
	Need int
	// False are the indices (into the answers) of the verdicts the
	// decision contradicts (a pass where it is fail, or the reverse: an
	// unverifiable verdict is never false — the validator's environment
	// server may have failed it — and nobody is false when the decision
	// is unverifiable); Agree those it confirms.
	False, Agree []int
}

// Decide returns where a check asking k validators stands, given the
// outcomes answered so far (in the order answered), the assignments still
// open and how many validators were asked in all (answered, open and
// expired).
func Decide(k int, answers []Outcome, open, asked int) Decision {
	q := Quorum(k)
	count := map[Outcome]int{}
	for _, o := range answers {
		count[o]++
	}
	// The answers in the order first given: a check's answers are pass,
	// fail or unverifiable; an evaluation's carry the digest of what the
	// validator measured (Measured), so two agree only on equal figures.
	var distinct []Outcome
	for _, o := range answers {
		if !slices.Contains(distinct, o) {
			distinct = append(distinct, o)
		}
	}
	for _, o := range distinct {
		if count[o] >= q {
			d := Decision{Decided: true, Outcome: o}
			for i, a := range answers {
				switch {
				case a == o:
					d.Agree = append(d.Agree, i)
				case o != Unverifiable && a != Unverifiable:
					// pass against fail: one of them lied
					d.False = append(d.False, i)
				}
			}
			return d
		}
	}
	best := 0
	for _, c := range count {
		best = max(best, c)
	}
	// The fewest further verdicts that could give a quorum: the leading
	// outcome's shortfall, less the open assignments that may still
	// supply it.
	need := max(q-best-open, 0)
	if len(answers) == 0 {
		need = max(k-open, 0)
	}
	if room := MaxAsked(k) - asked; need > room || (open == 0 && room == 0) {
		// No quorum can be reached any more: nobody is wrong.
		return Decision{Decided: true, Exhausted: true, Outcome: Unverifiable}
	}
	return Decision{Need: need}
}

// Measured is the answer of a validator that measured figures whose
// digest is digest (an epoch's held-out evaluation, package evalpkg): two
// such answers agree when the digests are equal, and one the decision
// contradicts is a false report like a pass against a fail.
func Measured(digest string) Outcome { return Outcome(string(Pass) + ":" + digest) }

// MeasuredDigest returns the digest of a Measured answer, and whether o is
// one.
func MeasuredDigest(o Outcome) (string, bool) {
	return strings.CutPrefix(string(o), string(Pass)+":")
}

// Draw ranks candidates for round of the check of the delta with file
// digest of job's slot, keyed by secret (hanzod's, which nodes do not
// know): SHA-256 of the domain, the secret, job, slot, digest, round and
// the candidate, ascending. It returns the n first, skipping exclude.
func Draw(secret []byte, job, slot, digest string, round, n int, candidates, exclude []string) []string {
	type ranked struct {
		id  string
		key [32]byte
	}
	var rs []ranked
	for _, c := range candidates {
		if slices.Contains(exclude, c) {
			continue
		}
		h := sha256.New()
		h.Write([]byte("zoo-gym/validator-draw/v1\x00"))
		h.Write(secret)
		for _, s := range []string{job, slot, digest} {
			_ = binary.Write(h, binary.BigEndian, uint32(len(s)))
			h.Write([]byte(s))
		}
		_ = binary.Write(h, binary.BigEndian, uint64(round))
		h.Write([]byte(c))
		var r ranked
		r.id = c
		copy(r.key[:], h.Sum(nil))
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		if c := strings.Compare(string(a.key[:]), string(b.key[:])); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	out := make([]string, 0, min(n, len(rs)))
	for i := 0; i < len(rs) && i < n; i++ {
		out = append(out, rs[i].id)
	}
	return out
}
