package envserver

import (
	"math"
	"strings"
	"testing"
)

var unit = Health{Protocol: Protocol, RewardMin: 0, RewardMax: 1}

func TestParseScore(t *testing.T) {
	for _, c := range []struct {
		body    string
		want    ScoreResult
		kind    Kind
		errText string
	}{
		{body: `{"reward": 1}`, want: ScoreResult{1, true}},
		{body: `{"reward": 0.5}`, want: ScoreResult{0.5, false}},
		{body: ` {"reward": 0.5, "correct": true} ` + "\n", want: ScoreResult{0.5, true}},
		{body: `{"reward": 1, "correct": false}`, want: ScoreResult{1, false}},
		{body: `{"reward": 1.5}`, kind: KindOutOfRange, errText: "outside the declared range"},
		{body: `{"reward": -0.001}`, kind: KindOutOfRange},
		{body: `{"reward": 1e400}`, kind: KindMalformed},
		{body: `{"reward": NaN}`, kind: KindMalformed},
		{body: `{"reward": "1"}`, kind: KindMalformed, errText: "a JSON string where float64 belongs"},
		{body: `{"reward": null}`, kind: KindMalformed, errText: "null"},
		{body: `{"Reward": 1}`, kind: KindMalformed, errText: `unknown field "Reward"`},
		{body: `{"reward": 1, "extra": 1}`, kind: KindMalformed, errText: "unknown field"},
		{body: `{"reward": 1, "reward": 0}`, kind: KindMalformed, errText: "twice"},
		{body: `{"correct": true}`, kind: KindMalformed, errText: `missing field "reward"`},
		{body: `{"reward": 1}{"reward": 1}`, kind: KindMalformed, errText: "after the object"},
		{body: `{"reward": 1} x`, kind: KindMalformed, errText: "after the object"},
		{body: `[1]`, kind: KindMalformed, errText: "not a JSON object"},
		{body: ``, kind: KindMalformed},
		{body: `<html>oops</html>`, kind: KindMalformed, errText: "not JSON"},
		{body: `{"reward": 1`, kind: KindMalformed},
	} {
		got, err := ParseScore([]byte(c.body), unit)
		if c.kind == "" {
			if err != nil || got != c.want {
				t.Errorf("%q: got %+v, %v; want %+v", c.body, got, err, c.want)
			}
			continue
		}
		if KindOf(err) != c.kind {
			t.Errorf("%q: error %v, want kind %s", c.body, err, c.kind)
		} else if c.errText != "" && !strings.Contains(err.Error(), c.errText) {
			t.Errorf("%q: error %q does not say %q", c.body, err, c.errText)
		}
	}
}

func TestParseHealth(t *testing.T) {
	h, err := ParseHealth([]byte(`{"protocol":"gym-env/1","name":"x","reward_min":-1,"reward_max":2,"multi_turn":true}`))
	if err != nil || h != (Health{Protocol, "x", -1, 2, true}) {
		t.Fatalf("got %+v, %v", h, err)
	}
	for body, kind := range map[string]Kind{
		`{"protocol":"gym-env/2","reward_min":0,"reward_max":1}`:                KindProtocol,
		`{"protocol":"gym-env/1","reward_min":1,"reward_max":1}`:                KindProtocol,
		`{"protocol":"gym-env/1","reward_min":0,"reward_max":1e10}`:             KindProtocol,
		`{"protocol":"gym-env/1","reward_min":0}`:                               KindMalformed,
		`{"protocol":"gym-env/1","reward_min":0,"reward_max":1,"multi_turn":1}`: KindMalformed,
	} {
		if _, err := ParseHealth([]byte(body)); KindOf(err) != kind {
			t.Errorf("%s: %v, want %s", body, err, kind)
		}
	}
}

func TestParseStepAndReset(t *testing.T) {
	s, err := ParseStep([]byte(`{"observation":"higher","reward":0,"done":false}`), unit)
	if err != nil || s != (StepResult{"higher", 0, false}) {
		t.Fatalf("got %+v, %v", s, err)
	}
	if _, err := ParseStep([]byte(`{"observation":"x","reward":0}`), unit); KindOf(err) != KindMalformed {
		t.Errorf("step without done: %v", err)
	}
	if _, err := ParseStep([]byte(`{"observation":"x","reward":3,"done":true}`), unit); KindOf(err) != KindOutOfRange {
		t.Errorf("step out of range: %v", err)
	}
	if o, err := ParseReset([]byte(`{"observation":"go"}`)); err != nil || o != "go" {
		t.Errorf("reset: %q, %v", o, err)
	}
	if _, err := ParseReset([]byte(`{"observation":1}`)); KindOf(err) != KindMalformed {
		t.Errorf("reset with a number: %v", err)
	}
}

// FuzzParse: no input panics any parser, and what they accept is within
// the declared range and re-encodes to an accepted body.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"reward": 1}`, `{"reward": 0.5, "correct": true}`, `{"reward": 1e400}`,
		`{"observation":"higher","reward":0,"done":false}`, `{"observation":"go"}`,
		`{"protocol":"gym-env/1","name":"x","reward_min":-1,"reward_max":2,"multi_turn":true}`,
		`{"reward": 1, "reward": 0}`, `[{}]`, `{"a":{"b":[1,2,{"c":null}]}}`, "{\"reward\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	h := Health{Protocol: Protocol, RewardMin: -1, RewardMax: 2}
	f.Fuzz(func(t *testing.T, b []byte) {
		in := func(r float64) bool { return !math.IsNaN(r) && r >= h.RewardMin && r <= h.RewardMax }
		if r, err := ParseScore(b, h); err == nil && !in(r.Reward) {
			t.Fatalf("score %v accepted outside the range", r.Reward)
		} else if err != nil && KindOf(err) == "" {
			t.Fatalf("score error without a kind: %v", err)
		}
		if s, err := ParseStep(b, h); err == nil && !in(s.Reward) {
			t.Fatalf("step reward %v accepted outside the range", s.Reward)
		}
		if hh, err := ParseHealth(b); err == nil {
			if !(hh.RewardMin < hh.RewardMax) || math.Abs(hh.RewardMin) > MaxRewardMagnitude || math.Abs(hh.RewardMax) > MaxRewardMagnitude || hh.Protocol != Protocol {
				t.Fatalf("health %+v accepted", hh)
			}
		}
		_, _ = ParseReset(b)
	})
}
