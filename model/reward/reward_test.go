package reward

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestVerifiers(t *testing.T) {
	for _, tc := range []struct {
		term       Term
		answer     string
		completion string
		want       float64
	}{
		{Term{Verifier: Exact, Weight: 1}, "Paris", "  paris\n", 1},
		{Term{Verifier: Exact, Weight: 1}, "New  York", "new york", 1},
		{Term{Verifier: Exact, Weight: 1}, "Paris", "Paris.", 0},
		{Term{Verifier: Numeric, Weight: 1}, "She pays 2*3=6 dollars. #### 6", "The answer is 6", 1},
		{Term{Verifier: Numeric, Weight: 1}, "#### 1,234", `so \boxed{1234}`, 1},
		{Term{Verifier: Numeric, Weight: 1}, "46", "46.0", 1},
		{Term{Verifier: Numeric, Weight: 1}, "46", "45 or 47", 0},
		{Term{Verifier: Numeric, Weight: 1}, "46", "no idea", 0},
		{Term{Verifier: Numeric, Weight: 2, Tolerance: 0.5}, "3.14", "#### 3.5", 2},
		{Term{Verifier: Numeric, Weight: 1}, "-7", "x = -7", 1},
		{Term{Verifier: Format, Weight: 0.2, Pattern: `^[0-9]+$`}, "", "123", 0.2},
		{Term{Verifier: Format, Weight: 0.2, Pattern: `^[0-9]+$`}, "", "12a", 0},
		{Term{Verifier: Length, Weight: 1, MaxChars: 4}, "", "abcd", 0},
		{Term{Verifier: Length, Weight: 1, MaxChars: 4}, "", "abcdef", -0.5},
		{Term{Verifier: Length, Weight: 3, MaxChars: 2}, "", strings.Repeat("x", 100), -3},
		{Term{Verifier: Partial, Weight: 1}, "180", "130", 2.0 / 3},
		{Term{Verifier: Partial, Weight: 1}, "180", "1800", 0.75},
	} {
		s, err := New([]Term{tc.term})
		if err != nil {
			t.Fatal(err)
		}
		x := Sample{Answer: tc.answer, Completion: tc.completion}
		if got := s.Score(x); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%+v on %q vs %q = %v, want %v", tc.term, tc.completion, tc.answer, got, tc.want)
		}
		lo, hi := s.Range()
		if got := s.Score(x); got < lo || got > hi {
			t.Errorf("%v outside [%v, %v]", got, lo, hi)
		}
	}
}

// Weights add up; Correct is every answer verifier right.
func TestSet(t *testing.T) {
	s, err := New([]Term{{Verifier: Numeric, Weight: 1}, {Verifier: Format, Pattern: `^[0-9]+$`, Weight: 0.25}, {Verifier: Length, MaxChars: 3, Weight: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi := s.Range(); lo != -0.5 || hi != 1.25 {
		t.Fatalf("range [%v, %v]", lo, hi)
	}
	for _, tc := range []struct {
		c       string
		r       float64
		correct bool
	}{{"46", 1.25, true}, {"#### 46", 0.5, true}, {"4646", 0.25 - 0.5/3, false}, {"x", 0, false}} {
		x := Sample{Answer: "46", Completion: tc.c}
		if got := s.Score(x); math.Abs(got-tc.r) > 1e-12 || s.Correct(x) != tc.correct {
			t.Errorf("%q: %v %v, want %v %v", tc.c, got, s.Correct(x), tc.r, tc.correct)
		}
	}
	f, _ := New([]Term{{Verifier: Format, Pattern: "^a", Weight: 1}})
	if !f.Correct(Sample{Completion: "ab"}) || f.Correct(Sample{Completion: "b"}) {
		t.Fatal("a format-only set is correct at its maximum")
	}
}

// The built-in tasks' reward is the partial verifier at weight 1, to the bit.
func TestDefaultIsPartialCredit(t *testing.T) {
	d := Default()
	for _, c := range []string{"", "1", "180", "18", "1800", "081", "xyz", "180180"} {
		x := Sample{Answer: "180", Completion: c}
		if got, want := d.Score(x), PartialCredit("180", c); math.Float64bits(got) != math.Float64bits(want) {
			t.Errorf("%q: %v, want %v", c, got, want)
		}
		if d.Correct(x) != (c == "180") {
			t.Errorf("%q: correct %v", c, d.Correct(x))
		}
	}
}

func TestInvalid(t *testing.T) {
	for _, tc := range []struct {
		terms []Term
		want  string
	}{
		{nil, "empty list"},
		{[]Term{{Verifier: "bleu", Weight: 1}}, "unknown verifier"},
		{[]Term{{Verifier: Exact}}, "weight"},
		{[]Term{{Verifier: Exact, Weight: math.NaN()}}, "weight"},
		{[]Term{{Verifier: Exact, Weight: -1}}, "weight"},
		{[]Term{{Verifier: Format, Weight: 1}}, "needs a pattern"},
		{[]Term{{Verifier: Format, Weight: 1, Pattern: "("}}, "pattern"},
		{[]Term{{Verifier: Exact, Weight: 1, Pattern: "x"}}, "format only"},
		{[]Term{{Verifier: Numeric, Weight: 1, Tolerance: math.Inf(1)}}, "tolerance"},
		{[]Term{{Verifier: Length, Weight: 1}}, "max_chars"},
		{[]Term{{Verifier: Exact, Weight: 1, MaxChars: 3}}, "length only"},
	} {
		_, err := New(tc.terms)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.terms, err, tc.want)
		}
	}
}

func TestExtractNumber(t *testing.T) {
	for in, want := range map[string]string{
		"Natalia sold 48/2 = 24 clips in May. 48+24 = 72 #### 72": "72",
		`The final answer is $\boxed{-3.5}$ then 9`:               "-3.5",
		"1, 2, and 3,000": "3,000",
		"#### \n 5":       "5",
		"0180":            "0180",
	} {
		if got, ok := ExtractNumber(in); !ok || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, ok, want)
		}
	}
	if _, ok := ExtractNumber("none"); ok {
		t.Error("a number in none")
	}
}
