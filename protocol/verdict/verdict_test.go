package verdict

import (
	"fmt"
	"slices"
	"testing"
)

func TestDecide(t *testing.T) {
	P, F, U := Pass, Fail, Unverifiable
	for _, c := range []struct {
		k           int
		answers     []Outcome
		open, asked int
		want        Decision
	}{
		{2, nil, 0, 0, Decision{Need: 2}},
		{2, nil, 2, 2, Decision{}},
		{2, []Outcome{P}, 1, 2, Decision{}},
		{2, []Outcome{P, P}, 0, 2, Decision{Decided: true, Outcome: P, Agree: []int{0, 1}}},
		{2, []Outcome{F, F}, 0, 2, Decision{Decided: true, Outcome: F, Agree: []int{0, 1}}},
		// two that disagree go to a third, whose verdict decides
		{2, []Outcome{P, F}, 0, 2, Decision{Need: 1}},
		{2, []Outcome{P, F}, 1, 3, Decision{}},
		{2, []Outcome{P, F, F}, 0, 3, Decision{Decided: true, Outcome: F, Agree: []int{1, 2}, False: []int{0}}},
		{2, []Outcome{F, P, P}, 0, 3, Decision{Decided: true, Outcome: P, Agree: []int{1, 2}, False: []int{0}}},
		// a third outcome: one more
		{2, []Outcome{P, F, U}, 0, 3, Decision{Need: 1}},
		// an expired assignment is replaced
		{2, []Outcome{P}, 0, 2, Decision{Need: 1}},
		// every validator asked and no quorum: unverifiable, nobody false
		{2, []Outcome{P, F, U, U}, 0, 5, Decision{Decided: true, Outcome: U, Agree: []int{2, 3}}},
		{2, []Outcome{U, P, P}, 0, 3, Decision{Decided: true, Outcome: P, Agree: []int{1, 2}}},
		{2, []Outcome{P, F, U}, 0, 5, Decision{Decided: true, Exhausted: true, Outcome: U}},
		{2, nil, 0, 4, Decision{Decided: true, Exhausted: true, Outcome: U}},
		{3, []Outcome{P, P}, 1, 3, Decision{Decided: true, Outcome: P, Agree: []int{0, 1}}},
		{3, nil, 0, 0, Decision{Need: 3}},
	} {
		got := Decide(c.k, c.answers, c.open, c.asked)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("Decide(%d, %v, open %d, asked %d) = %+v, want %+v", c.k, c.answers, c.open, c.asked, got, c.want)
		}
	}
}

// TestDecideTerminates walks every sequence of answers and expiries of a
// K = 2 check: it is always decided within MaxAsked validators, and a
// decided check never asks for more.
func TestDecideTerminates(t *testing.T) {
	var walk func(answers []Outcome, asked int, depth int)
	walk = func(answers []Outcome, asked int, depth int) {
		d := Decide(2, answers, 0, asked)
		if d.Decided {
			if asked > MaxAsked(2) {
				t.Fatalf("decided after asking %d > %d", asked, MaxAsked(2))
			}
			return
		}
		if d.Need < 1 {
			t.Fatalf("undecided with no open assignment and nothing to ask: %v asked %d", answers, asked)
		}
		if depth > 10 {
			t.Fatalf("not decided after %d rounds: %v", depth, answers)
		}
		// the next validator answers something, or expires
		for _, o := range []Outcome{Pass, Fail, Unverifiable, ""} {
			next := slices.Clone(answers)
			if o != "" {
				next = append(next, o)
			}
			walk(next, asked+1, depth+1)
		}
	}
	walk(nil, 0, 0)
}

func TestDraw(t *testing.T) {
	vs := []string{"v1", "v2", "v3", "v4", "v5", "v6"}
	a := Draw([]byte("secret"), "job", "1/4/n", "d", 0, 2, vs, nil)
	if len(a) != 2 || a[0] == a[1] {
		t.Fatalf("draw %v", a)
	}
	if b := Draw([]byte("secret"), "job", "1/4/n", "d", 0, 2, reversed(vs), nil); !slices.Equal(a, b) {
		t.Fatalf("the draw depends on the candidates' order: %v, %v", a, b)
	}
	if c := Draw([]byte("secret"), "job", "1/4/n", "d", 0, 6, vs, a); slices.ContainsFunc(c, func(s string) bool { return slices.Contains(a, s) }) || len(c) != 4 {
		t.Fatalf("excluded validators drawn again: %v after %v", c, a)
	}
	// Another secret (or slot) gives another draw for some inputs: over 50
	// slots, the first pick must not always be the same validator.
	first := map[string]bool{}
	for i := range 50 {
		first[Draw([]byte("other"), "job", fmt.Sprintf("1/%d/n", i), "d", 0, 1, vs, nil)[0]] = true
	}
	if len(first) < 4 {
		t.Fatalf("the draw is not spread over the validators: %v", first)
	}
	if got := Draw([]byte("s"), "j", "s", "d", 0, 3, nil, nil); len(got) != 0 {
		t.Fatalf("draw from nobody: %v", got)
	}
}

func reversed(s []string) []string {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}

// TestDecideMeasured: an evaluation's answers agree only on equal digests;
// the one the decision contradicts is false, an unverifiable one is not.
func TestDecideMeasured(t *testing.T) {
	A, B, U := Measured("aa"), Measured("bb"), Unverifiable
	for _, c := range []struct {
		answers     []Outcome
		open, asked int
		want        Decision
	}{
		{[]Outcome{A, A}, 0, 2, Decision{Decided: true, Outcome: A, Agree: []int{0, 1}}},
		{[]Outcome{A, B}, 0, 2, Decision{Need: 1}},
		{[]Outcome{A, B, B}, 0, 3, Decision{Decided: true, Outcome: B, Agree: []int{1, 2}, False: []int{0}}},
		{[]Outcome{U, A, A}, 0, 3, Decision{Decided: true, Outcome: A, Agree: []int{1, 2}}},
		{[]Outcome{A, B, U}, 0, 5, Decision{Decided: true, Exhausted: true, Outcome: Unverifiable}},
	} {
		got := Decide(2, c.answers, c.open, c.asked)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("Decide(2, %v, open %d, asked %d) = %+v, want %+v", c.answers, c.open, c.asked, got, c.want)
		}
	}
	if d, ok := MeasuredDigest(A); !ok || d != "aa" {
		t.Errorf("MeasuredDigest(%q) = %q, %v", A, d, ok)
	}
	if _, ok := MeasuredDigest(Pass); ok {
		t.Errorf("MeasuredDigest(pass) claims a digest")
	}
}
