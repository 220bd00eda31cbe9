package worker

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zooai/gym/internal/atomicfile"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/protocol/attack"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/merge"
	"github.com/zooai/gym/protocol/ring"
)

// scaled returns a copy of a with every value multiplied by f.
func scaled(a *llama.Adapter, f float64) *llama.Adapter {
	out := a.Clone()
	for _, t := range out.Views() {
		for i := range t.Data {
			t.Data[i] = float32(float64(t.Data[i]) * f)
		}
	}
	return out
}

// clipTo scales a down in place so its norm is at most c.
// It is jobconf.Clip, the function the orchestrator's replay uses: a
// spot-check compares the result bit for bit.
func clipTo(a *llama.Adapter, c float64) *llama.Adapter {
	if c > 0 {
		jobconf.Clip(a, c)
	}
	return a
}

// contribution turns the honest change d of sync k of epoch e of job into
// what this worker submits and puts into the ring: d clipped to c, or an
// attack; members is the ring's size (ALIE's n).
func (w *Worker) contribution(ctx context.Context, d *llama.Adapter, job string, e, k int, c float64, members int) (*llama.Adapter, error) {
	if NeedsPeek(w.c.Attack) {
		v, err := w.inBound(ctx, jobconf.Flatten(clipTo(d.Clone(), c)), job, e, k, c, members)
		if err != nil {
			return nil, err
		}
		out := d.Zeroed()
		if err := jobconf.AddFlat(out, v); err != nil {
			return nil, err
		}
		return out, nil
	}
	return w.contributionOf(d, c), nil
}

// inBound builds the in-bound attack's vector of a sync from the honest
// updates Peek shows (own: this worker's honest update, clipped, used when
// Peek shows none), clipped to c.
func (w *Worker) inBound(ctx context.Context, own []float32, job string, e, k int, c float64, members int) ([]float32, error) {
	var honest [][]float32
	if w.c.Peek != nil {
		hs, err := w.c.Peek(ctx, job, e, k)
		if err != nil {
			return nil, err
		}
		for _, h := range hs {
			if len(h) == len(own) {
				honest = append(honest, h)
			}
		}
	}
	if len(honest) == 0 {
		w.c.Logger.Warn("no honest update to attack with: using this worker's own", "attack", w.c.Attack, "epoch", e, "sync", k)
		honest = [][]float32{own}
	}
	var v []float32
	var err error
	var strength float64 // z, ε or the noise's scale
	p, f := w.c.AttackParams, max(w.c.Colluders, 1)
	switch w.c.Attack {
	case AttackALIE:
		strength = attack.DefaultALIEZ(members, f)
		if p.ALIEZ != nil {
			strength = *p.ALIEZ
		}
		v, err = attack.ALIE(honest, strength)
	case AttackALIEAdaptive:
		v, strength, err = attack.AdaptiveALIE(honest, c, unflagged(merge.BoundsFor(w.plan.SingleStep(), merge.OutlierConfig{}), honest, f))
		if errors.Is(err, attack.ErrNoHiding) { // f > 1 identical vectors are near-copies of each other whatever z
			strength = attack.DefaultALIEZ(members, f)
			w.c.Logger.Warn("adaptive ALIE: every z is flagged: the default z", "z", strength, "colluders", f, "epoch", e, "sync", k)
			v, err = attack.ALIE(honest, strength)
		}
	case AttackIPM:
		strength = cmp.Or(p.IPMEpsilon, attack.DefaultIPMEpsilon)
		v, err = attack.IPM(honest, strength)
	case AttackMimic:
		v, err = attack.Mimic(honest)
	case AttackMimicNoise:
		strength = cmp.Or(p.MimicNoise, attack.DefaultMimicNoise)
		v, err = attack.NoisyMimic(w.attackRand(job, e, k), honest, strength)
	}
	if err != nil {
		return nil, fmt.Errorf("worker: %s attack: %w", w.c.Attack, err)
	}
	w.c.Logger.Info("in-bound attack", "attack", w.c.Attack, "strength", strength, "honest", len(honest), "epoch", e, "sync", k)
	attack.Clip(v, c)
	return v, nil
}

// unflagged returns adaptive ALIE's test: whether the judge's outlier
// tests (merge.Outliers with c, the function the judge calls) flag none of
// f copies of v among the honest updates — the deltas of the sync as the
// judge will see them when the f colluders all send v.
func unflagged(c merge.OutlierConfig, honest [][]float32, f int) func(v []float32) (bool, error) {
	return func(v []float32) (bool, error) {
		in := make([]merge.Input, 0, len(honest)+f)
		for i, h := range honest {
			in = append(in, merge.Input{Node: fmt.Sprintf("honest-%03d", i), Vec: h})
		}
		for i := range f {
			in = append(in, merge.Input{Node: fmt.Sprintf("attacker-%03d", i), Vec: v})
		}
		out, err := merge.Outliers(c, in)
		if err != nil {
			return false, err
		}
		for _, o := range out {
			if strings.HasPrefix(o.Node, "attacker-") {
				return false, nil
			}
		}
		return true, nil
	}
}

// attackRand is the randomness of this worker's attack on sync k of epoch
// e of job: seeded from its public key and the slot, so that colluders
// draw apart and a run can be repeated.
func (w *Worker) attackRand(job string, e, k int) *rand.Rand {
	h := sha256.New()
	h.Write(w.c.Key.Public().(ed25519.PublicKey))
	fmt.Fprintf(h, "\x00%s\x00%d\x00%d", job, e, k)
	s := h.Sum(nil)
	return rand.New(rand.NewPCG(binary.LittleEndian.Uint64(s), binary.LittleEndian.Uint64(s[8:])))
}

// contributionOf is contribution for the attacks that need no honest
// update (and for none).
func (w *Worker) contributionOf(d *llama.Adapter, c float64) *llama.Adapter {
	switch w.c.Attack {
	case AttackSignFlip:
		return scaled(d, -1000)
	case AttackScale:
		return clipTo(scaled(d, 1.5), c)
	case AttackNoise:
		n := d.Zeroed()
		for _, t := range n.Views() {
			for i := range t.Data {
				t.Data[i] = float32(rand.NormFloat64())
			}
		}
		n = scaled(n, 0.9*c/jobconf.Norm(n))
		nt := n.Views()
		out := d.Clone()
		for i, t := range out.Views() {
			for j := range t.Data {
				t.Data[j] += nt[i].Data[j]
			}
		}
		return clipTo(out, c)
	case AttackReplay:
		if w.first == nil {
			w.first = clipTo(d, c).Clone()
			return w.first.Clone()
		}
		return w.first.Clone()
	}
	return clipTo(d, c)
}

// suspectKind names a ring failure the way Suspect.Kind does.
func suspectKind(pe *ring.PeerError, ev []ring.Evidence) string {
	switch {
	case errors.Is(pe, ring.ErrTimeout):
		return "timeout"
	case errors.Is(pe, ring.ErrBroken):
		return "broken"
	}
	for _, e := range ev {
		if e.Kind == ring.NormExceeded {
			return "norm"
		}
	}
	return "misbehaved"
}

// EvidenceRecord is one ring.Evidence in a suspect report: byte fields in
// hex except the payload (base64, as encoding/json writes []byte).
type EvidenceRecord struct {
	Kind        string `json:"kind"` // ring.Violation name, e.g. norm-exceeded
	Suspect     int    `json:"suspect_index"`
	SuspectID   string `json:"suspect"`
	Claimed     int    `json:"claimed_sender"`
	Signed      bool   `json:"signed"`
	SignedBytes string `json:"signed_bytes,omitempty"` // hex
	Signature   string `json:"signature,omitempty"`    // hex
	Payload     []byte `json:"payload,omitempty"`      // base64
	ConfigID    string `json:"ring_config_id"`         // hex of ring.ID
	Seq         uint64 `json:"call"`
	Detail      string `json:"detail,omitempty"`
}

// SuspectReport is the JSON of Suspect.Evidence.
type SuspectReport struct {
	Error    string           `json:"error"`
	Phase    string           `json:"phase"`
	Round    int              `json:"round"`
	Evidence []EvidenceRecord `json:"evidence,omitempty"`
}

// SuspectEvidence encodes a failed call and the evidence naming its
// suspect as JSON.
func SuspectEvidence(pe *ring.PeerError, ev []ring.Evidence) []byte {
	r := SuspectReport{Error: pe.Error(), Phase: pe.Phase.String(), Round: pe.Round}
	for _, e := range ev {
		r.Evidence = append(r.Evidence, EvidenceRecord{Kind: e.Kind.String(), Suspect: e.Suspect, SuspectID: e.SuspectID,
			Claimed: e.Claimed, Signed: e.Signed, SignedBytes: hex.EncodeToString(e.SignedBytes),
			Signature: hex.EncodeToString(e.Signature), Payload: e.Payload, ConfigID: hex.EncodeToString(e.ConfigID[:]),
			Seq: e.Seq, Detail: e.Detail})
	}
	b, _ := json.Marshal(r)
	return b
}

// sequencer hands out delta sequence numbers: max(last + 1, unix
// nanoseconds), the last one persisted in dir/sequence when dir is set.
type sequencer struct {
	mu   sync.Mutex
	last uint64
	path string
}

func openSequencer(dir string) (*sequencer, error) {
	s := &sequencer{}
	if dir == "" {
		return s, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	s.path = filepath.Join(dir, "sequence")
	b, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if s.last, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err != nil {
			return nil, fmt.Errorf("worker: %s: %w", s.path, err)
		}
	}
	return s, nil
}

func (s *sequencer) next(now time.Time) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := max(s.last+1, uint64(max(now.UnixNano(), 0)))
	if s.path != "" {
		err := atomicfile.Write(s.path, 0o644, true, func(w io.Writer) error {
			_, err := fmt.Fprintln(w, v)
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("worker: persist sequence: %w", err)
		}
	}
	s.last = v
	return v, nil
}
