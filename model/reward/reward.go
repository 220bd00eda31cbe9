// Package reward holds the built-in verifiers that score a completion,
// and their weighted composition as a job file gives it:
//
//	reward:
//	  - {verifier: numeric, weight: 1}
//	  - {verifier: format, pattern: "^[0-9]+$", weight: 0.2}
//
// Verifiers and their scores:
//
//   - exact: 1 when the completion equals the reference answer after
//     normalisation (surrounding space trimmed, runs of white space made one
//     space, case folded), else 0.
//   - numeric: 1 when the completion's final number (ExtractNumber: after
//     "####", inside \boxed{}, or the last number) is within tolerance of
//     the answer's, else 0.
//   - format: 1 when the completion matches the regular expression pattern
//     (RE2 syntax: linear time on any input), else 0.
//   - length: 0 up to max_chars characters, then −(n−max_chars)/max_chars,
//     at least −1: a penalty in [−1, 0].
//   - partial: the built-in tasks' partial credit, the share of the answer's
//     characters the completion has at the same position, in [0, 1]; 1 only
//     for an exact match (task.Reward). It is the default of a job on a
//     built-in task.
//   - env: an environment server's reward (docs/environments.md) at url,
//     mapped from the server's declared range onto [0, 1]; a call that
//     fails scores 0 and is reported (Failed). The set calls it through an
//     Env bound with Bind: this package does no I/O.
//
// A Set's reward is Σ weight·score, finite and within Set.Range: from −(the
// weights of length terms) to the weights of the others. Weights are
// positive. Correct is what accuracy counts: every answer verifier (exact,
// numeric, partial, and env by the server's own verdict) gives 1 — or, in
// a set without one, the reward is the set's maximum.
//
// Scorer is the seam the trainer calls: a Set implements it, and a reward
// computed elsewhere (an environment server) can implement it too.
package reward

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Sample is what a verifier sees: the prompt, the reference answer and the
// model's completion (decoded text, special tokens left out).
type Sample struct {
	Prompt, Answer, Completion string
}

// Scorer scores completions. Score is finite and within the scorer's
// documented range; Correct says whether the completion counts as right
// for accuracy. Both are pure functions of the sample for the built-in
// verifiers, which is what lets a step be replayed.
type Scorer interface {
	Score(s Sample) float64
	Correct(s Sample) bool
}

// Verifier names.
const (
	Exact   = "exact"
	Numeric = "numeric"
	Format  = "format"
	Length  = "length"
	Partial = "partial"
	EnvName = "env"
)

// Names lists the verifiers.
func Names() []string { return []string{Exact, Numeric, Format, Length, Partial, EnvName} }

// MaxURLBytes bounds an env term's url.
const MaxURLBytes = 2048

// Env scores through an environment server: Reward is the server's reward
// mapped onto [0, 1] and its verdict, or an error when the call failed.
// envserver implements it.
type Env interface {
	Reward(s Sample) (unit float64, correct bool, err error)
}

// Failer is a Scorer that can say its score of a sample stood in for a
// failed call (an environment server that did not answer): a Set with an
// env term.
type Failer interface {
	Failed(s Sample) bool
}

// Limits on a reward list.
const (
	MaxTerms        = 16
	MaxWeight       = 1000
	MaxPatternBytes = 1024
	MaxChars        = 1 << 20
)

// ErrInvalid is every refusal of a reward list.
var ErrInvalid = errors.New("reward: invalid reward")

// Term is one verifier with its weight and settings, as a job gives it.
type Term struct {
	Verifier string  `json:"verifier"`
	Weight   float64 `json:"weight"`
	// Pattern is format's regular expression (required for it, only for it).
	Pattern string `json:"pattern,omitempty"`
	// Tolerance is numeric's absolute tolerance (≥ 0; 0: equal numbers).
	Tolerance float64 `json:"tolerance,omitempty"`
	// MaxChars is length's budget in characters (required for it, only for it).
	MaxChars int `json:"max_chars,omitempty"`
	// URL is env's server, http or https (required for it, only for it).
	URL string `json:"url,omitempty"`
}

// Set is a checked reward list, ready to score.
type Set struct {
	terms []Term
	res   []*regexp.Regexp // per term; nil but for format
	envs  []Env            // per term; nil but for a bound env
}

// Default is the reward of a job on a built-in task: partial credit,
// weight 1.
func Default() *Set {
	s, _ := New([]Term{{Verifier: Partial, Weight: 1}})
	return s
}

// DatasetDefault is the reward of a job on a dataset that gives none:
// normalised exact match, weight 1.
func DatasetDefault() *Set {
	s, _ := New([]Term{{Verifier: Exact, Weight: 1}})
	return s
}

// New checks terms and compiles them; a refusal says which term is wrong
// and how to fix it.
func New(terms []Term) (*Set, error) {
	if len(terms) == 0 {
		return nil, fmt.Errorf("%w: an empty list (give at least one verifier: %s)", ErrInvalid, strings.Join(Names(), ", "))
	}
	if len(terms) > MaxTerms {
		return nil, fmt.Errorf("%w: %d verifiers, at most %d", ErrInvalid, len(terms), MaxTerms)
	}
	s := &Set{terms: append([]Term(nil), terms...), res: make([]*regexp.Regexp, len(terms)), envs: make([]Env, len(terms))}
	for i, t := range terms {
		if err := t.check(); err != nil {
			return nil, fmt.Errorf("%w: reward[%d] (%s): %v", ErrInvalid, i, t.Verifier, err)
		}
		if t.Verifier == Format {
			re, err := regexp.Compile(t.Pattern)
			if err != nil {
				return nil, fmt.Errorf("%w: reward[%d] (format): pattern %q: %v", ErrInvalid, i, t.Pattern, err)
			}
			s.res[i] = re
		}
	}
	return s, nil
}

func (t Term) check() error {
	known := false
	for _, n := range Names() {
		known = known || n == t.Verifier
	}
	switch {
	case !known:
		return fmt.Errorf("unknown verifier %q (want one of %s)", t.Verifier, strings.Join(Names(), ", "))
	case math.IsNaN(t.Weight) || !(t.Weight > 0) || t.Weight > MaxWeight:
		return fmt.Errorf("weight %v must be above 0 and at most %d", t.Weight, MaxWeight)
	case t.Pattern != "" && t.Verifier != Format:
		return errors.New("pattern is a setting of format only")
	case t.Verifier == Format && t.Pattern == "":
		return errors.New("format needs a pattern (a regular expression the completion must match)")
	case len(t.Pattern) > MaxPatternBytes:
		return fmt.Errorf("pattern of %d bytes, at most %d", len(t.Pattern), MaxPatternBytes)
	case t.Tolerance != 0 && t.Verifier != Numeric:
		return errors.New("tolerance is a setting of numeric only")
	case math.IsNaN(t.Tolerance) || math.IsInf(t.Tolerance, 0) || t.Tolerance < 0:
		return fmt.Errorf("tolerance %v must be a finite number ≥ 0", t.Tolerance)
	case t.MaxChars != 0 && t.Verifier != Length:
		return errors.New("max_chars is a setting of length only")
	case t.Verifier == Length && (t.MaxChars < 1 || t.MaxChars > MaxChars):
		return fmt.Errorf("length needs max_chars from 1 to %d (got %d)", MaxChars, t.MaxChars)
	case t.URL != "" && t.Verifier != EnvName:
		return errors.New("url is a setting of env only")
	case t.Verifier == EnvName:
		return checkURL(t.URL)
	}
	return nil
}

// checkURL accepts an absolute http or https URL with a host and no
// query, fragment or user information.
func checkURL(raw string) error {
	if raw == "" {
		return errors.New("env needs a url (the environment server, e.g. http://10.0.0.5:8090)")
	}
	if len(raw) > MaxURLBytes {
		return fmt.Errorf("url of %d bytes, at most %d", len(raw), MaxURLBytes)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("url %q: %v", raw, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("url %q: want http or https", raw)
	case u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("url %q: want scheme://host[:port][/path], without user, query or fragment", raw)
	}
	return nil
}

// EnvURLs lists the servers of the set's env terms, in term order (a
// server named twice is listed twice).
func (s *Set) EnvURLs() []string {
	var out []string
	for _, t := range s.terms {
		if t.Verifier == EnvName {
			out = append(out, t.URL)
		}
	}
	return out
}

// Bind returns a copy of s whose env terms score through open(url); a
// set with env terms scores them 0 (failed) until bound.
func (s *Set) Bind(open func(url string) Env) *Set {
	out := &Set{terms: s.terms, res: s.res, envs: make([]Env, len(s.terms))}
	for i, t := range s.terms {
		if t.Verifier == EnvName {
			out.envs[i] = open(t.URL)
		}
	}
	return out
}

// Failed implements Failer: whether an env term's call for x failed (or
// the term is not bound), so that its score stood in as 0.
func (s *Set) Failed(x Sample) bool {
	for i, t := range s.terms {
		if t.Verifier == EnvName {
			if _, _, err := s.env(i, x); err != nil {
				return true
			}
		}
	}
	return false
}

var errUnbound = errors.New("reward: env term not bound to a server")

func (s *Set) env(i int, x Sample) (float64, bool, error) {
	if s.envs == nil || s.envs[i] == nil {
		return 0, false, errUnbound
	}
	u, ok, err := s.envs[i].Reward(x)
	if err != nil || math.IsNaN(u) || u < 0 || u > 1 {
		if err == nil {
			err = fmt.Errorf("reward: env term's reward %v outside [0, 1]", u)
		}
		return 0, false, err
	}
	return u, ok, nil
}

// ScoreFailed is the score x gets when every env term's call failed (they
// count 0): what a checker compares a claimed failure with.
func (s *Set) ScoreFailed(x Sample) float64 {
	var r float64
	for i, t := range s.terms {
		if t.Verifier != EnvName {
			r += t.Weight * s.score(i, x)
		}
	}
	return r
}

// HasEnv says whether the set scores through an environment server.
func (s *Set) HasEnv() bool { return len(s.EnvURLs()) > 0 }

// Terms returns the set's terms.
func (s *Set) Terms() []Term { return append([]Term(nil), s.terms...) }

// Range is the least and greatest reward of the set.
func (s *Set) Range() (lo, hi float64) {
	for _, t := range s.terms {
		if t.Verifier == Length {
			lo -= t.Weight
		} else {
			hi += t.Weight
		}
	}
	return lo, hi
}

// Score implements Scorer: Σ weight·score in term order.
func (s *Set) Score(x Sample) float64 {
	var r float64
	for i, t := range s.terms {
		r += t.Weight * s.score(i, x)
	}
	return r
}

func (s *Set) score(i int, x Sample) float64 {
	t := s.terms[i]
	switch t.Verifier {
	case Exact:
		return b2f(Normalize(x.Completion) == Normalize(x.Answer))
	case Numeric:
		return b2f(NumbersMatch(x.Completion, x.Answer, t.Tolerance))
	case Format:
		return b2f(s.res[i].MatchString(x.Completion))
	case Length:
		n := utf8.RuneCountInString(x.Completion)
		if n <= t.MaxChars {
			return 0
		}
		return -math.Min(1, float64(n-t.MaxChars)/float64(t.MaxChars))
	case Partial:
		return PartialCredit(x.Answer, x.Completion)
	case EnvName:
		u, _, _ := s.env(i, x)
		return u
	}
	return 0
}

// Correct implements Scorer.
func (s *Set) Correct(x Sample) bool {
	answers := 0
	for i, t := range s.terms {
		switch t.Verifier {
		case Exact, Numeric:
			answers++
			if s.score(i, x) != 1 {
				return false
			}
		case Partial:
			answers++
			if x.Completion != x.Answer {
				return false
			}
		case EnvName:
			answers++
			if _, ok, err := s.env(i, x); err != nil || !ok {
				return false
			}
		}
	}
	if answers > 0 {
		return true
	}
	_, hi := s.Range()
	return s.Score(x) == hi
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// PartialCredit is the fraction of answer's characters completion has at
// the same position, in [0, 1]; 1 only for an exact match (a completion
// longer than the answer loses the extra characters' share).
func PartialCredit(answer, completion string) float64 {
	n := utf8.RuneCountInString(answer)
	if n == 0 {
		return 0
	}
	ok := 0
	c := []rune(completion)
	for i, a := range []rune(answer) {
		if i < len(c) && c[i] == a {
			ok++
		}
	}
	if extra := len(c) - n; extra > 0 {
		return float64(ok) / float64(n+extra)
	}
	return float64(ok) / float64(n)
}

// Normalize trims s, makes every run of white space one space and folds
// case: what exact compares.
func Normalize(s string) string {
	return strings.ToLower(strings.Join(strings.FieldsFunc(s, unicode.IsSpace), " "))
}

var (
	number  = regexp.MustCompile(`-?[0-9]+(?:,[0-9]{3})*(?:\.[0-9]+)?`)
	hashes  = regexp.MustCompile(`####\s*([^\n]*)`)
	boxedRe = regexp.MustCompile(`\\boxed\{([^{}]*)\}`)
)

// ExtractNumber returns the final answer's number in text, as written:
// the first number after the last "####", else the first number inside
// the last \boxed{...}, else the last number in the text. Numbers are
// decimal with an optional sign, thousands commas and fraction
// ("-1,234.5").
func ExtractNumber(text string) (string, bool) {
	if m := hashes.FindAllStringSubmatch(text, -1); len(m) > 0 {
		if n := number.FindString(m[len(m)-1][1]); n != "" {
			return n, true
		}
	}
	if m := boxedRe.FindAllStringSubmatch(text, -1); len(m) > 0 {
		if n := number.FindString(m[len(m)-1][1]); n != "" {
			return n, true
		}
	}
	all := number.FindAllString(text, -1)
	if len(all) == 0 {
		return "", false
	}
	return all[len(all)-1], true
}

// ParseNumber reads a number as ExtractNumber writes it.
func ParseNumber(s string) (float64, bool) {
	v, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
	return v, err == nil && !math.IsInf(v, 0)
}

// NumbersMatch reports whether completion's final number is within tol of
// answer's.
func NumbersMatch(completion, answer string, tol float64) bool {
	a, ok := ExtractNumber(answer)
	if !ok {
		return false
	}
	c, ok := ExtractNumber(completion)
	if !ok {
		return false
	}
	av, ok1 := ParseNumber(a)
	cv, ok2 := ParseNumber(c)
	return ok1 && ok2 && math.Abs(av-cv) <= tol
}

// MarshalTerms writes terms in canonical JSON (the form a job spec
// stores: keys in order, zero settings left out).
func MarshalTerms(terms []Term) string {
	b, _ := json.Marshal(terms)
	return string(b)
}
