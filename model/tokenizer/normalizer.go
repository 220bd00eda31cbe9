package tokenizer

import (
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// normalizer is one of tokenizers' normalizers, applied to each piece of
// text between added tokens.
type normalizer interface {
	normalize(s string) (string, error)
}

type unicodeNorm struct{ form norm.Form }

// normalize applies the Unicode normalization form. x/text's tables are
// Unicode 15; tokenizers' (the unicode-normalization-alignments crate) are
// Unicode 12, to which these code points, assigned later, are unknown and
// so left as they are. Text is normalized between them, which is exact
// because an unassigned code point is a starter that composes with nothing.
func (n unicodeNorm) normalize(s string) (string, error) {
	start, i := 0, 0
	var b strings.Builder
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !unicode.Is(newerThanUnicode12, r) {
			i += size
			continue
		}
		b.WriteString(n.form.String(s[start:i]))
		b.WriteString(s[i : i+size])
		i += size
		start = i
	}
	if start == 0 {
		return n.form.String(s), nil
	}
	b.WriteString(n.form.String(s[start:]))
	return b.String(), nil
}

// newerThanUnicode12 holds the code points assigned after Unicode 12 that
// have a decomposition or take part in one (found by comparing every code
// point's NFC, NFD and NFKC with tokenizers 0.23): the whole Dives Akuru
// block (whose U+11938 decomposes canonically and whose marks reorder) and
// the compatibility characters below.
var newerThanUnicode12 = &unicode.RangeTable{
	R16: []unicode.Range16{
		{Lo: 0x32FF, Hi: 0x32FF, Stride: 1},
		{Lo: 0xA7F2, Hi: 0xA7F4, Stride: 1},
		{Lo: 0xAB69, Hi: 0xAB69, Stride: 1},
	},
	R32: []unicode.Range32{
		{Lo: 0x10781, Hi: 0x10785, Stride: 1},
		{Lo: 0x10787, Hi: 0x107B0, Stride: 1},
		{Lo: 0x107B2, Hi: 0x107BA, Stride: 1},
		{Lo: 0x11900, Hi: 0x1195F, Stride: 1},
		{Lo: 0x1E030, Hi: 0x1E06D, Stride: 1},
		{Lo: 0x1F16C, Hi: 0x1F16C, Stride: 1},
		{Lo: 0x1FBF0, Hi: 0x1FBF9, Stride: 1},
	},
}

// prependNorm is Prepend: adds its string in front of a non-empty piece.
type prependNorm struct{ s string }

func (n prependNorm) normalize(s string) (string, error) {
	if s == "" {
		return s, nil
	}
	return n.s + s, nil
}

type replaceNorm struct {
	p       *pattern
	content string
}

func (n replaceNorm) normalize(s string) (string, error) { return n.p.replaceAll(s, n.content) }

type sequenceNorm []normalizer

func (n sequenceNorm) normalize(s string) (string, error) {
	var err error
	for _, x := range n {
		if s, err = x.normalize(s); err != nil {
			return "", err
		}
	}
	return s, nil
}

func parseNormalizer(raw json.RawMessage, path string, lim *Limits, depth int) (normalizer, error) {
	o, err := parseObject(raw, path, lim)
	if err != nil {
		return nil, err
	}
	typ, err := o.typ()
	if err != nil {
		return nil, err
	}
	switch typ {
	case "NFC", "NFKC", "NFD", "NFKD":
		if err := o.allow("type"); err != nil {
			return nil, err
		}
		return unicodeNorm{map[string]norm.Form{"NFC": norm.NFC, "NFKC": norm.NFKC, "NFD": norm.NFD, "NFKD": norm.NFKD}[typ]}, nil
	case "Prepend":
		if err := o.allow("type", "prepend"); err != nil {
			return nil, err
		}
		s, err := o.str("prepend", true, "")
		if err != nil {
			return nil, err
		}
		return prependNorm{s}, nil
	case "Replace":
		if err := o.allow("type", "pattern", "content"); err != nil {
			return nil, err
		}
		p, err := parsePattern(o.raw("pattern"), sub(path, "pattern"), lim)
		if err != nil {
			return nil, err
		}
		c, err := o.str("content", true, "")
		if err != nil {
			return nil, err
		}
		return replaceNorm{p, c}, nil
	case "Sequence":
		if err := o.allow("type", "normalizers"); err != nil {
			return nil, err
		}
		if depth >= lim.MaxDepth {
			return nil, tooLarge(path, "nests Sequences deeper than %d", lim.MaxDepth)
		}
		elems, err := parseArray(o.raw("normalizers"), sub(path, "normalizers"), 64)
		if err != nil {
			return nil, err
		}
		var seq sequenceNorm
		for i, e := range elems {
			n, err := parseNormalizer(e, index(sub(path, "normalizers"), i), lim, depth+1)
			if err != nil {
				return nil, err
			}
			seq = append(seq, n)
		}
		return seq, nil
	}
	return nil, unsupported(sub(path, "type"), "%q", typ)
}
