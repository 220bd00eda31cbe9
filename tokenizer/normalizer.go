package tokenizer

import (
	"encoding/json"

	"golang.org/x/text/unicode/norm"
)

// normalizer is one of tokenizers' normalizers, applied to each piece of
// text between added tokens.
type normalizer interface {
	normalize(s string) (string, error)
}

type unicodeNorm struct{ form norm.Form }

func (n unicodeNorm) normalize(s string) (string, error) { return n.form.String(s), nil }

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
		if _, err := parseObject(raw, path, lim, "type"); err != nil {
			return nil, err
		}
		return unicodeNorm{map[string]norm.Form{"NFC": norm.NFC, "NFKC": norm.NFKC, "NFD": norm.NFD, "NFKD": norm.NFKD}[typ]}, nil
	case "Prepend":
		if _, err := parseObject(raw, path, lim, "type", "prepend"); err != nil {
			return nil, err
		}
		s, err := o.str("prepend", true, "")
		if err != nil {
			return nil, err
		}
		return prependNorm{s}, nil
	case "Replace":
		if _, err := parseObject(raw, path, lim, "type", "pattern", "content"); err != nil {
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
		if _, err := parseObject(raw, path, lim, "type", "normalizers"); err != nil {
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
