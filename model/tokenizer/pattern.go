package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/dlclark/regexp2/v2"
)

// matchTimeout bounds one regular-expression search, so a pathological
// pattern in an untrusted file fails an encode instead of hanging it.
const matchTimeout = 5 * time.Second

// pattern is the {"String": s} or {"Regex": r} of Split and Replace.
// tokenizers runs regexes with Oniguruma; here they run on regexp2, a
// backtracking engine with the lookahead, possessive quantifiers and
// inline flags those patterns use, after translateOnig has replaced their
// Unicode classes (\p{L}, \p{N}, \s) with Oniguruma's own ranges.
type pattern struct {
	lit string
	re  *regexp2.Regexp
}

func parsePattern(raw json.RawMessage, path string, lim *Limits) (*pattern, error) {
	o, err := parseObject(raw, path, lim, "String", "Regex")
	if err != nil {
		return nil, err
	}
	if len(o.m) != 1 {
		return nil, invalid(path, "must have exactly one of String and Regex")
	}
	if o.has("String") {
		s, err := o.str("String", true, "")
		if err != nil {
			return nil, err
		}
		if s == "" {
			return nil, unsupported(sub(path, "String"), "(empty pattern)")
		}
		return &pattern{lit: s}, nil
	}
	r, err := o.str("Regex", true, "")
	if err != nil {
		return nil, err
	}
	if len(r) > lim.MaxPatternLen {
		return nil, tooLarge(sub(path, "Regex"), "is %d bytes long", len(r))
	}
	re, err := compileOnig(r)
	if err != nil {
		return nil, unsupported(sub(path, "Regex"), "%q (%v)", r, err)
	}
	return &pattern{re: re}, nil
}

// compileOnig compiles an Oniguruma pattern of tokenizer.json with regexp2.
func compileOnig(p string) (*regexp2.Regexp, error) {
	t, err := translateOnig(p)
	if err != nil {
		return nil, err
	}
	re, err := regexp2.Compile(t)
	if err != nil {
		return nil, err
	}
	re.MatchTimeout = matchTimeout
	return re, nil
}

// span is a byte range of a string and whether it is a match.
type span struct {
	start, end int
	match      bool
}

// findMatches is tokenizers' Pattern::find_matches: the whole of s cut into
// matches and the gaps between them (one non-match span for "").
func (p *pattern) findMatches(s string) ([]span, error) {
	if s == "" {
		return []span{{0, 0, false}}, nil
	}
	var out []span
	prev := 0
	emit := func(a, b int) {
		if prev != a {
			out = append(out, span{prev, a, false})
		}
		out = append(out, span{a, b, true})
		prev = b
	}
	if p.re == nil {
		for i := 0; i <= len(s); {
			j := strings.Index(s[i:], p.lit)
			if j < 0 {
				break
			}
			emit(i+j, i+j+len(p.lit))
			i += j + len(p.lit)
		}
	} else {
		idx, err := p.re.FindAllStringIndex(s, -1)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: regular expression %q: %w", p.re.String(), err)
		}
		for _, m := range idx {
			emit(m[0], m[1])
		}
	}
	if prev != len(s) {
		out = append(out, span{prev, len(s), false})
	}
	return out, nil
}

// replaceAll replaces every match of p in s with content (literally).
func (p *pattern) replaceAll(s, content string) (string, error) {
	if p.re == nil {
		return strings.ReplaceAll(s, p.lit, content), nil
	}
	spans, err := p.findMatches(s)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, sp := range spans {
		if sp.match {
			b.WriteString(content)
		} else {
			b.WriteString(s[sp.start:sp.end])
		}
	}
	return b.String(), nil
}

// splitBehavior is tokenizers' SplitDelimiterBehavior.
type splitBehavior int

const (
	removed splitBehavior = iota
	isolated
	mergedWithPrevious
	mergedWithNext
	contiguous
)

func parseBehavior(s, path string) (splitBehavior, error) {
	switch s {
	case "Removed":
		return removed, nil
	case "Isolated":
		return isolated, nil
	case "MergedWithPrevious":
		return mergedWithPrevious, nil
	case "MergedWithNext":
		return mergedWithNext, nil
	case "Contiguous":
		return contiguous, nil
	}
	return 0, unsupported(path, "%q", s)
}

// splitSpans is NormalizedString::split: the spans of one string grouped
// by behavior into the byte ranges of its pieces (empty ones included;
// callers drop them).
func splitSpans(spans []span, b splitBehavior) [][2]int {
	var out [][2]int
	switch b {
	case isolated:
		for _, s := range spans {
			out = append(out, [2]int{s.start, s.end})
		}
	case removed:
		for _, s := range spans {
			if !s.match {
				out = append(out, [2]int{s.start, s.end})
			}
		}
	case contiguous:
		prev := false
		for _, s := range spans {
			if s.match == prev && len(out) > 0 {
				out[len(out)-1][1] = s.end
			} else {
				out = append(out, [2]int{s.start, s.end})
			}
			prev = s.match
		}
	case mergedWithPrevious:
		prev := false
		for _, s := range spans {
			if s.match && !prev && len(out) > 0 {
				out[len(out)-1][1] = s.end
			} else {
				out = append(out, [2]int{s.start, s.end})
			}
			prev = s.match
		}
	case mergedWithNext:
		prev := false
		for i := len(spans) - 1; i >= 0; i-- {
			s := spans[i]
			if s.match && !prev && len(out) > 0 {
				out[len(out)-1][0] = s.start
			} else {
				out = append(out, [2]int{s.start, s.end})
			}
			prev = s.match
		}
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}
