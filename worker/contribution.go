package worker

import (
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
	"github.com/zooai/gym/jobconf"
	"github.com/zooai/gym/llama"
	"github.com/zooai/gym/ring"
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

// contribution turns the honest change d of sync k into what this worker
// submits and puts into the ring: d clipped to c, or an attack.
func (w *Worker) contribution(d *llama.Adapter, k int, c float64) *llama.Adapter {
	switch w.c.Attack {
	case AttackSignFlip:
		return scaled(d, -1000)
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
