package jobspec

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrSlot is returned for a string that is not a slot as Slot.String
// writes it.
var ErrSlot = errors.New("jobspec: malformed slot")

// Slot is a delta's place in its job: the epoch, the global training step
// of the sync it ends, and the node that trained it. A job holds at most
// one accepted delta per slot.
//
// As text (String, MarshalText) a slot is "epoch/step/node" with both
// numbers in plain decimal, the form the event log and snapshots have
// always used for the keys of a job's slots: a map[Slot]string encodes to
// JSON exactly as the map[string]string it replaces.
type Slot struct {
	Epoch int
	Step  uint64
	Node  string
}

// String is "epoch/step/node".
func (s Slot) String() string {
	return strconv.Itoa(s.Epoch) + "/" + strconv.FormatUint(s.Step, 10) + "/" + s.Node
}

// ParseSlot reads a slot as String writes it, strictly: the epoch and step
// in canonical decimal (no sign, no leading zeros, no spaces), the epoch
// at least 0, and a non-empty node (which may itself hold "/"). Anything
// String would not produce for such a slot is refused with ErrSlot.
func ParseSlot(s string) (Slot, error) {
	e, rest, ok := strings.Cut(s, "/")
	if !ok {
		return Slot{}, fmt.Errorf("%w: %q is not epoch/step/node", ErrSlot, s)
	}
	st, node, ok := strings.Cut(rest, "/")
	if !ok {
		return Slot{}, fmt.Errorf("%w: %q is not epoch/step/node", ErrSlot, s)
	}
	if node == "" {
		return Slot{}, fmt.Errorf("%w: %q has no node", ErrSlot, s)
	}
	if !canonical(e) || !canonical(st) {
		return Slot{}, fmt.Errorf("%w: %q: epoch and step must be plain decimal numbers", ErrSlot, s)
	}
	epoch, err := strconv.ParseInt(e, 10, strconv.IntSize)
	if err != nil {
		return Slot{}, fmt.Errorf("%w: %q: epoch out of range", ErrSlot, s)
	}
	step, err := strconv.ParseUint(st, 10, 64)
	if err != nil {
		return Slot{}, fmt.Errorf("%w: %q: step out of range", ErrSlot, s)
	}
	return Slot{Epoch: int(epoch), Step: step, Node: node}, nil
}

// canonical reports whether d is a decimal number as strconv writes a
// non-negative one: digits only, no leading zero unless it is "0".
func canonical(d string) bool {
	if d == "" || (len(d) > 1 && d[0] == '0') {
		return false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return false
		}
	}
	return true
}

// MarshalText writes String's form (so a Slot can key a JSON object).
func (s Slot) MarshalText() ([]byte, error) {
	if s.Epoch < 0 || s.Node == "" {
		return nil, fmt.Errorf("%w: %+v has a negative epoch or no node", ErrSlot, s)
	}
	return []byte(s.String()), nil
}

// UnmarshalText reads a slot with ParseSlot.
func (s *Slot) UnmarshalText(b []byte) error {
	v, err := ParseSlot(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// EvalSubject begins the node of an epoch's held-out evaluation's slot:
// the check validators answer with the figures they measured (package
// evalpkg, docs/validators.md "Evaluations"). Node ids are hex keys, so it
// names no node.
const EvalSubject = "@eval/"

// EvalSlot is the slot of the evaluation of epoch whose request has digest
// digest.
func EvalSlot(epoch int, digest string) Slot { return Slot{Epoch: epoch, Node: EvalSubject + digest} }

// IsEval reports whether s is an evaluation's slot (EvalSlot).
func (s Slot) IsEval() bool { return strings.HasPrefix(s.Node, EvalSubject) }
