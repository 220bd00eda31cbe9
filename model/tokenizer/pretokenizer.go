package tokenizer

import (
	"encoding/json"
	"strings"
	"sync"
	"unicode/utf8"
)

// piece is a piece of normalized text on its way to the model. atStart
// says it begins at offset 0 of the original text (Metaspace's "first"
// prepend scheme needs it).
type piece struct {
	s       string
	atStart bool
}

// preTokenizer splits pieces into smaller ones, as tokenizers'
// PreTokenizedString::split does (empty pieces are dropped).
type preTokenizer interface {
	preTokenize(ps []piece) ([]piece, error)
}

// splitEach applies f to every piece, keeping the non-empty results, and
// marks a sub-piece atStart when it starts its parent and the parent was.
func splitEach(ps []piece, f func(p piece) ([]string, error)) ([]piece, error) {
	out := make([]piece, 0, len(ps))
	for _, p := range ps {
		subs, err := f(p)
		if err != nil {
			return nil, err
		}
		for i, s := range subs {
			if s != "" {
				out = append(out, piece{s: s, atStart: p.atStart && i == 0})
			}
		}
	}
	return out, nil
}

func cut(s string, ranges [][2]int) []string {
	out := make([]string, len(ranges))
	for i, r := range ranges {
		out[i] = s[r[0]:r[1]]
	}
	return out
}

// bytesChar is GPT-2's byte → printable character table; charBytes its
// inverse.
var bytesChar, charBytes = func() ([256]string, map[rune]byte) {
	var bc [256]string
	cb := map[rune]byte{}
	n := 0
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !(b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF) {
			r = rune(256 + n)
			n++
		}
		bc[b] = string(r)
		cb[r] = byte(b)
	}
	return bc, cb
}()

// gpt2Pattern is the split ByteLevel applies when use_regex is true.
var gpt2Pattern = sync.OnceValue(func() *pattern {
	re, err := compileOnig(`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`)
	if err != nil {
		panic(err)
	}
	return &pattern{re: re}
})

type byteLevelPre struct {
	addPrefixSpace bool
	useRegex       bool
}

func (b byteLevelPre) preTokenize(ps []piece) ([]piece, error) {
	ps, err := splitEach(ps, func(p piece) ([]string, error) {
		s := p.s
		if b.addPrefixSpace && !strings.HasPrefix(s, " ") {
			s = " " + s
		}
		if !b.useRegex {
			return []string{s}, nil
		}
		spans, err := gpt2Pattern().findMatches(s)
		if err != nil {
			return nil, err
		}
		return cut(s, splitSpans(spans, isolated)), nil
	})
	if err != nil {
		return nil, err
	}
	for i := range ps {
		ps[i].s = byteLevelEncode(ps[i].s)
	}
	return ps, nil
}

func byteLevelEncode(s string) string {
	var sb strings.Builder
	sb.Grow(2 * len(s))
	for i := 0; i < len(s); i++ {
		sb.WriteString(bytesChar[s[i]])
	}
	return sb.String()
}

type splitPre struct {
	p        *pattern
	behavior splitBehavior
	invert   bool
}

func (sp splitPre) preTokenize(ps []piece) ([]piece, error) {
	return splitEach(ps, func(p piece) ([]string, error) {
		spans, err := sp.p.findMatches(p.s)
		if err != nil {
			return nil, err
		}
		if sp.invert {
			for i := range spans {
				spans[i].match = !spans[i].match
			}
		}
		return cut(p.s, splitSpans(spans, sp.behavior)), nil
	})
}

// runeSpans is Pattern::find_matches for a character predicate.
func runeSpans(s string, is func(rune) bool) []span {
	if s == "" {
		return []span{{0, 0, false}}
	}
	var out []span
	last := 0
	for i, r := range s {
		if is(r) {
			if last < i {
				out = append(out, span{last, i, false})
			}
			n := utf8.RuneLen(r)
			if n < 0 {
				n = 1
			}
			out = append(out, span{i, i + n, true})
			last = i + n
		}
	}
	if last < len(s) {
		out = append(out, span{last, len(s), false})
	}
	return out
}

type digitsPre struct{ individual bool }

func (d digitsPre) preTokenize(ps []piece) ([]piece, error) {
	b := contiguous
	if d.individual {
		b = isolated
	}
	return splitEach(ps, func(p piece) ([]string, error) {
		return cut(p.s, splitSpans(runeSpans(p.s, isNumeric), b)), nil
	})
}

type prependScheme int

const (
	prependAlways prependScheme = iota
	prependFirst
	prependNever
)

type metaspacePre struct {
	replacement rune
	scheme      prependScheme
	split       bool
}

func (m metaspacePre) preTokenize(ps []piece) ([]piece, error) {
	rep := string(m.replacement)
	return splitEach(ps, func(p piece) ([]string, error) {
		s := strings.ReplaceAll(p.s, " ", rep)
		if !strings.HasPrefix(s, rep) && (m.scheme == prependAlways || m.scheme == prependFirst && p.atStart) {
			s = rep + s
		}
		if !m.split {
			return []string{s}, nil
		}
		return cut(s, splitSpans(runeSpans(s, func(r rune) bool { return r == m.replacement }), mergedWithNext)), nil
	})
}

type sequencePre []preTokenizer

func (q sequencePre) preTokenize(ps []piece) ([]piece, error) {
	var err error
	for _, p := range q {
		if ps, err = p.preTokenize(ps); err != nil {
			return nil, err
		}
	}
	return ps, nil
}

func parsePrependScheme(o *object) (prependScheme, error) {
	s, err := o.str("prepend_scheme", false, "always")
	if err != nil {
		return 0, err
	}
	var scheme prependScheme
	switch s {
	case "always":
		scheme = prependAlways
	case "first":
		scheme = prependFirst
	case "never":
		scheme = prependNever
	default:
		return 0, unsupported(sub(o.path, "prepend_scheme"), "%q", s)
	}
	if o.has("add_prefix_space") {
		aps, err := o.boolean("add_prefix_space", true)
		if err != nil {
			return 0, err
		}
		if !aps {
			if scheme != prependNever {
				return 0, invalid(sub(o.path, "add_prefix_space"), "false does not match prepend_scheme %q", s)
			}
		}
	}
	return scheme, nil
}

func parseMetaspace(raw json.RawMessage, path string, lim *Limits) (metaspacePre, error) {
	o, err := parseObject(raw, path, lim, "type", "replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep")
	if err != nil {
		return metaspacePre{}, err
	}
	var m metaspacePre
	if m.replacement, err = o.char("replacement", '▁'); err != nil {
		return m, err
	}
	if m.scheme, err = parsePrependScheme(o); err != nil {
		return m, err
	}
	if m.split, err = o.boolean("split", true); err != nil {
		return m, err
	}
	return m, nil
}

func parsePreTokenizer(raw json.RawMessage, path string, lim *Limits, depth int) (preTokenizer, error) {
	o, err := parseObject(raw, path, lim)
	if err != nil {
		return nil, err
	}
	typ, err := o.typ()
	if err != nil {
		return nil, err
	}
	switch typ {
	case "ByteLevel":
		if err = o.allow("type", "add_prefix_space", "trim_offsets", "use_regex"); err != nil {
			return nil, err
		}
		var b byteLevelPre
		if b.addPrefixSpace, err = o.boolean("add_prefix_space", true); err != nil {
			return nil, err
		}
		if _, err = o.boolean("trim_offsets", true); err != nil {
			return nil, err
		}
		if b.useRegex, err = o.boolean("use_regex", true); err != nil {
			return nil, err
		}
		return b, nil
	case "Split":
		if err = o.allow("type", "pattern", "behavior", "invert"); err != nil {
			return nil, err
		}
		var s splitPre
		if s.p, err = parsePattern(o.raw("pattern"), sub(path, "pattern"), lim); err != nil {
			return nil, err
		}
		bs, err := o.str("behavior", true, "")
		if err != nil {
			return nil, err
		}
		if s.behavior, err = parseBehavior(bs, sub(path, "behavior")); err != nil {
			return nil, err
		}
		if s.invert, err = o.boolean("invert", false); err != nil {
			return nil, err
		}
		return s, nil
	case "Digits":
		if err = o.allow("type", "individual_digits"); err != nil {
			return nil, err
		}
		ind, err := o.boolean("individual_digits", false)
		return digitsPre{ind}, err
	case "Metaspace":
		return parseMetaspace(raw, path, lim)
	case "Sequence":
		if err = o.allow("type", "pretokenizers"); err != nil {
			return nil, err
		}
		if depth >= lim.MaxDepth {
			return nil, tooLarge(path, "nests Sequences deeper than %d", lim.MaxDepth)
		}
		elems, err := parseArray(o.raw("pretokenizers"), sub(path, "pretokenizers"), 64)
		if err != nil {
			return nil, err
		}
		var seq sequencePre
		for i, e := range elems {
			p, err := parsePreTokenizer(e, index(sub(path, "pretokenizers"), i), lim, depth+1)
			if err != nil {
				return nil, err
			}
			seq = append(seq, p)
		}
		return seq, nil
	}
	return nil, unsupported(sub(path, "type"), "%q", typ)
}
