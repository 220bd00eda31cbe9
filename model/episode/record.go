package episode

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
)

// Limits on a record.
const (
	MaxRecordBytes = 64 << 20 // one episode's JSON line
	MaxRecords     = 1 << 16  // episodes in one file
)

// ErrRecord reports a record that is not an episode: malformed JSON,
// unknown fields, or fields that contradict each other.
var ErrRecord = errors.New("episode: bad record")

var ends = []End{Done, TurnLimit, TokenLimit, ModelMistake, EnvFailure, TemplateFail}

// Check reports whether e is consistent: the token, mask and
// log-probability rows have one entry per token, the turns' spans are in
// order inside the sequence and are exactly the tokens the mask gives the
// model, the other tokens' log-probabilities are 0, the reward is finite
// and the end is one of the known ones.
func (e *Episode) Check() error {
	n := len(e.Tokens)
	switch {
	case len(e.Model) != n || len(e.LogP) != n:
		return fmt.Errorf("%w: %d tokens, %d mask entries, %d log-probabilities", ErrRecord, n, len(e.Model), len(e.LogP))
	case math.IsNaN(e.Reward) || math.IsInf(e.Reward, 0):
		return fmt.Errorf("%w: reward %v", ErrRecord, e.Reward)
	case !slices.Contains(ends, e.End):
		return fmt.Errorf("%w: end %q", ErrRecord, e.End)
	}
	for _, t := range e.Tokens {
		if t < 0 {
			return fmt.Errorf("%w: token %d", ErrRecord, t)
		}
	}
	model := make([]bool, n)
	last := 0
	for i, t := range e.Turns {
		if t.Start < max(last, 1) || t.End < t.Start || t.End > n {
			return fmt.Errorf("%w: turn %d spans [%d, %d) in %d tokens after %d", ErrRecord, i, t.Start, t.End, n, last)
		}
		for k := t.Start; k < t.End; k++ {
			model[k] = true
		}
		last = t.End
	}
	for k := range n {
		if e.Model[k] != model[k] {
			return fmt.Errorf("%w: token %d's mask says model %v, the turns %v", ErrRecord, k, e.Model[k], model[k])
		}
		if lp := float64(e.LogP[k]); !model[k] && lp != 0 || math.IsNaN(lp) || lp > 0 {
			return fmt.Errorf("%w: token %d's log-probability %v", ErrRecord, k, lp)
		}
	}
	return nil
}

// ReadJSONL reads episode records, one JSON object a line (blank lines
// skipped), strictly (unknown fields are errors) and checked (Check); at
// most max of them.
func ReadJSONL(r io.Reader, max int) ([]*Episode, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxRecordBytes)
	var out []*Episode
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if len(out) >= max {
			return nil, fmt.Errorf("%w: more than %d episodes", ErrRecord, max)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		e := &Episode{}
		if err := dec.Decode(e); err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrRecord, line, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("%w: line %d: more than one object", ErrRecord, line)
		}
		if err := e.Check(); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRecord, err)
	}
	return out, nil
}

// UnmarshalJSON reads a record strictly (an unknown field is an error, as
// it is for the decoder around it) and keeps Messages compact, so a
// record read and written again is the same.
func (e *Episode) UnmarshalJSON(b []byte) error {
	type plain Episode
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p plain
	if err := dec.Decode(&p); err != nil {
		return err
	}
	if p.Messages != nil {
		var c bytes.Buffer
		if err := json.Compact(&c, p.Messages); err != nil {
			return err
		}
		p.Messages = c.Bytes()
	}
	*e = Episode(p)
	return nil
}
