package envserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
)

// Protocol is the version of the protocol this client speaks; a server
// declares it at /health.
const Protocol = "gym-env/1"

// MaxBody is the largest request or response body, in bytes (1 MiB).
const MaxBody = 1 << 20

// MaxRewardMagnitude bounds a declared reward range: both ends within ±1e9.
const MaxRewardMagnitude = 1e9

// Health is what a server declares at GET /health.
type Health struct {
	Protocol  string  `json:"protocol"`
	Name      string  `json:"name,omitempty"`
	RewardMin float64 `json:"reward_min"`
	RewardMax float64 `json:"reward_max"`
	MultiTurn bool    `json:"multi_turn"`
}

// ScoreResult is a /score answer, checked: Reward is finite and within the
// declared range; Correct is the server's, or Reward == RewardMax when it
// gave none.
type ScoreResult struct {
	Reward  float64 `json:"reward"`
	Correct bool    `json:"correct"`
}

// StepResult is a /step answer, checked like ScoreResult.
type StepResult struct {
	Observation string  `json:"observation"`
	Reward      float64 `json:"reward"`
	Done        bool    `json:"done"`
}

// field is one member of a strictly decoded object.
type field struct {
	name     string
	required bool
	dst      any // pointer
}

// decodeObject decodes b, which must be exactly one JSON object whose
// members are among fields (exact names, each at most once, none null),
// with every required one present.
func decodeObject(b []byte, fields []field) error {
	if len(b) > MaxBody {
		return fmt.Errorf("%d bytes, over %d", len(b), MaxBody)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("not JSON: %v", shortErr(err))
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("not a JSON object (starts with %v)", describe(tok))
	}
	seen := make([]bool, len(fields))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("not JSON: %v", shortErr(err))
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("object key %v is not a string", describe(tok))
		}
		i := -1
		for j, f := range fields {
			if f.name == key {
				i = j
			}
		}
		if i < 0 {
			return fmt.Errorf("unknown field %q", truncate(key, 64))
		}
		if seen[i] {
			return fmt.Errorf("field %q given twice", key)
		}
		seen[i] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("field %q: not JSON: %v", key, shortErr(err))
		}
		if string(raw) == "null" {
			return fmt.Errorf("field %q is null", key)
		}
		if err := json.Unmarshal(raw, fields[i].dst); err != nil {
			return fmt.Errorf("field %q: %v", key, shortErr(err))
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return fmt.Errorf("not JSON: %v", shortErr(err))
	}
	if tok, err := dec.Token(); err != io.EOF {
		if err != nil {
			return fmt.Errorf("data after the object: %v", shortErr(err))
		}
		return fmt.Errorf("data after the object (%v)", describe(tok))
	}
	for i, f := range fields {
		if f.required && !seen[i] {
			return fmt.Errorf("missing field %q", f.name)
		}
	}
	return nil
}

func describe(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		return fmt.Sprintf("%q", string(t))
	case string:
		return fmt.Sprintf("string %q", truncate(t, 32))
	case nil:
		return "null"
	default:
		return fmt.Sprintf("%T %v", t, t)
	}
}

func shortErr(err error) string {
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		return fmt.Sprintf("a JSON %s where %s belongs", ute.Value, ute.Type)
	}
	return truncate(err.Error(), 200)
}

// truncate cuts s to at most n bytes.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func malformed(endpoint string, err error) *Error {
	return &Error{Endpoint: endpoint, Kind: KindMalformed, Status: 200, Msg: err.Error()}
}

// checkReward reports a reward outside h's range (JSON cannot carry NaN or
// an infinity, but a caller may hand ParseScore anything).
func checkReward(endpoint string, r float64, h Health) error {
	if math.IsNaN(r) || math.IsInf(r, 0) || r < h.RewardMin || r > h.RewardMax {
		return &Error{Endpoint: endpoint, Kind: KindOutOfRange, Status: 200,
			Msg: fmt.Sprintf("reward %v outside the declared range [%v, %v]", r, h.RewardMin, h.RewardMax)}
	}
	return nil
}

// ParseHealth reads and checks a /health body: the protocol version this
// client speaks and a finite range with reward_min < reward_max.
func ParseHealth(b []byte) (Health, error) {
	var h Health
	var lo, hi float64
	err := decodeObject(b, []field{
		{"protocol", true, &h.Protocol},
		{"name", false, &h.Name},
		{"reward_min", true, &lo},
		{"reward_max", true, &hi},
		{"multi_turn", false, &h.MultiTurn},
	})
	if err != nil {
		return Health{}, malformed("/health", err)
	}
	h.RewardMin, h.RewardMax = lo, hi
	switch {
	case h.Protocol != Protocol:
		return Health{}, &Error{Endpoint: "/health", Kind: KindProtocol, Status: 200,
			Msg: fmt.Sprintf("protocol %q, this client speaks %q", truncate(h.Protocol, 64), Protocol)}
	case len(h.Name) > 256:
		return Health{}, &Error{Endpoint: "/health", Kind: KindProtocol, Status: 200, Msg: fmt.Sprintf("name of %d bytes, at most 256", len(h.Name))}
	case !(lo < hi) || math.Abs(lo) > MaxRewardMagnitude || math.Abs(hi) > MaxRewardMagnitude:
		return Health{}, &Error{Endpoint: "/health", Kind: KindProtocol, Status: 200,
			Msg: fmt.Sprintf("reward range [%v, %v]: want reward_min < reward_max, both within ±%g", lo, hi, MaxRewardMagnitude)}
	}
	return h, nil
}

// ParseScore reads and checks a /score body against the declared range.
func ParseScore(b []byte, h Health) (ScoreResult, error) {
	var r float64
	var correct *bool
	fs := []field{{"reward", true, &r}, {"correct", false, &correct}}
	if err := decodeObject(b, fs); err != nil {
		return ScoreResult{}, malformed("/score", err)
	}
	if err := checkReward("/score", r, h); err != nil {
		return ScoreResult{}, err
	}
	res := ScoreResult{Reward: r, Correct: r == h.RewardMax}
	if correct != nil {
		res.Correct = *correct
	}
	return res, nil
}

// ParseReset reads a /reset body: its observation.
func ParseReset(b []byte) (string, error) {
	var obs string
	if err := decodeObject(b, []field{{"observation", true, &obs}}); err != nil {
		return "", malformed("/reset", err)
	}
	return obs, nil
}

// ParseStep reads and checks a /step body against the declared range.
func ParseStep(b []byte, h Health) (StepResult, error) {
	var s StepResult
	err := decodeObject(b, []field{
		{"observation", true, &s.Observation},
		{"reward", true, &s.Reward},
		{"done", true, &s.Done},
	})
	if err != nil {
		return StepResult{}, malformed("/step", err)
	}
	if err := checkReward("/step", s.Reward, h); err != nil {
		return StepResult{}, err
	}
	return s, nil
}
