package tokenizer

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// decoder is tokenizers' Decoder::decode_chain: token strings in, token
// strings out; Decode joins the last chain.
type decoder interface {
	decodeChain(toks []string) ([]string, error)
}

type byteLevelDec struct{}

// decodeChain maps each character back to its byte (a token with any
// character outside the table contributes its UTF-8 bytes as they are) and
// decodes the whole as Rust's String::from_utf8_lossy does.
func (byteLevelDec) decodeChain(toks []string) ([]string, error) {
	var buf []byte
	for _, t := range toks {
		start := len(buf)
		ok := true
		for _, r := range t {
			b, in := charBytes[r]
			if !in {
				ok = false
				break
			}
			buf = append(buf, b)
		}
		if !ok {
			buf = append(buf[:start], t...)
		}
	}
	return []string{lossyUTF8(buf)}, nil
}

// lossyUTF8 is Rust's String::from_utf8_lossy: each maximal prefix of a
// valid sequence that cannot be completed becomes one U+FFFD (Go's
// strings.ToValidUTF8 would merge a whole run of bad bytes into one).
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || n > 1 {
			sb.Write(b[i : i+n])
			i += n
			continue
		}
		// Invalid: consume the lead byte and as many continuation bytes as
		// could still belong to a valid sequence, per the Unicode
		// "maximal subpart" rule.
		c := b[i]
		var need int
		lo, hi := byte(0x80), byte(0xBF)
		switch {
		case c >= 0xC2 && c <= 0xDF:
			need = 1
		case c == 0xE0:
			need, lo = 2, 0xA0
		case c >= 0xE1 && c <= 0xEC || c == 0xEE || c == 0xEF:
			need = 2
		case c == 0xED:
			need, hi = 2, 0x9F
		case c == 0xF0:
			need, lo = 3, 0x90
		case c >= 0xF1 && c <= 0xF3:
			need = 3
		case c == 0xF4:
			need, hi = 3, 0x8F
		}
		j := i + 1
		for k := 0; k < need && j < len(b); k++ {
			if b[j] < lo || b[j] > hi {
				break
			}
			lo, hi = 0x80, 0xBF
			j++
		}
		sb.WriteString("\uFFFD")
		i = j
	}
	return sb.String()
}

type metaspaceDec struct{ m metaspacePre }

// decodeChain replaces the replacement character by a space; in the first
// token every replacement is dropped unless the prepend scheme is never
// (tokenizers' behaviour, kept as is).
func (d metaspaceDec) decodeChain(toks []string) ([]string, error) {
	out := make([]string, len(toks))
	for i, t := range toks {
		var sb strings.Builder
		for _, r := range t {
			if r == d.m.replacement {
				if i == 0 && d.m.scheme != prependNever {
					continue
				}
				sb.WriteByte(' ')
			} else {
				sb.WriteRune(r)
			}
		}
		out[i] = sb.String()
	}
	return out, nil
}

type replaceDec struct {
	p       *pattern
	content string
}

func (d replaceDec) decodeChain(toks []string) ([]string, error) {
	out := make([]string, len(toks))
	for i, t := range toks {
		s, err := d.p.replaceAll(t, d.content)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

type byteFallbackDec struct{}

// parseByteToken reads a <0xNN> token as u8::from_str_radix does.
func parseByteToken(t string) (byte, bool) {
	if len(t) != 6 || !strings.HasPrefix(t, "<0x") || t[5] != '>' {
		return 0, false
	}
	hex := func(c byte) (byte, bool) {
		switch {
		case c >= '0' && c <= '9':
			return c - '0', true
		case c >= 'a' && c <= 'f':
			return c - 'a' + 10, true
		case c >= 'A' && c <= 'F':
			return c - 'A' + 10, true
		}
		return 0, false
	}
	if t[3] == '+' { // from_str_radix accepts a sign
		d, ok := hex(t[4])
		return d, ok
	}
	h, ok1 := hex(t[3])
	l, ok2 := hex(t[4])
	return h<<4 | l, ok1 && ok2
}

func (byteFallbackDec) decodeChain(toks []string) ([]string, error) {
	out := make([]string, 0, len(toks))
	var pending []byte
	flush := func() {
		if len(pending) == 0 {
			return
		}
		if utf8.Valid(pending) {
			out = append(out, string(pending))
		} else {
			for range pending {
				out = append(out, "\uFFFD")
			}
		}
		pending = pending[:0]
	}
	for _, t := range toks {
		if b, ok := parseByteToken(t); ok {
			pending = append(pending, b)
			continue
		}
		flush()
		out = append(out, t)
	}
	flush()
	return out, nil
}

type fuseDec struct{}

func (fuseDec) decodeChain(toks []string) ([]string, error) {
	return []string{strings.Join(toks, "")}, nil
}

type stripDec struct {
	content     rune
	start, stop int
}

func (d stripDec) decodeChain(toks []string) ([]string, error) {
	out := make([]string, len(toks))
	for i, t := range toks {
		rs := []rune(t)
		startCut := 0
		for j := 0; j < d.start && j < len(rs); j++ {
			if rs[j] != d.content {
				break
			}
			startCut = j + 1
		}
		stopCut := len(rs)
		for j := 0; j < d.stop && j < len(rs); j++ {
			k := len(rs) - j - 1
			if rs[k] != d.content {
				break
			}
			stopCut = k
		}
		if stopCut < startCut {
			stopCut = startCut
		}
		out[i] = string(rs[startCut:stopCut])
	}
	return out, nil
}

type sequenceDec []decoder

func (q sequenceDec) decodeChain(toks []string) ([]string, error) {
	var err error
	for _, d := range q {
		if toks, err = d.decodeChain(toks); err != nil {
			return nil, err
		}
	}
	return toks, nil
}

func parseDecoder(raw json.RawMessage, path string, lim *Limits, depth int) (decoder, error) {
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
		for _, k := range []string{"add_prefix_space", "trim_offsets", "use_regex"} {
			if _, err := o.boolean(k, true); err != nil {
				return nil, err
			}
		}
		return byteLevelDec{}, nil
	case "Metaspace":
		m, err := parseMetaspace(raw, path, lim)
		return metaspaceDec{m}, err
	case "Replace":
		if err = o.allow("type", "pattern", "content"); err != nil {
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
		return replaceDec{p, c}, nil
	case "ByteFallback", "Fuse":
		if err = o.allow("type"); err != nil {
			return nil, err
		}
		if typ == "Fuse" {
			return fuseDec{}, nil
		}
		return byteFallbackDec{}, nil
	case "Strip":
		if err = o.allow("type", "content", "start", "stop"); err != nil {
			return nil, err
		}
		var d stripDec
		if d.content, err = o.char("content", ' '); err != nil {
			return nil, err
		}
		if d.start, err = o.uint("start", 1<<16); err != nil {
			return nil, err
		}
		if d.stop, err = o.uint("stop", 1<<16); err != nil {
			return nil, err
		}
		return d, nil
	case "Sequence":
		if err = o.allow("type", "decoders"); err != nil {
			return nil, err
		}
		if depth >= lim.MaxDepth {
			return nil, tooLarge(path, "nests Sequences deeper than %d", lim.MaxDepth)
		}
		elems, err := parseArray(o.raw("decoders"), sub(path, "decoders"), 64)
		if err != nil {
			return nil, err
		}
		var seq sequenceDec
		for i, e := range elems {
			d, err := parseDecoder(e, index(sub(path, "decoders"), i), lim, depth+1)
			if err != nil {
				return nil, err
			}
			seq = append(seq, d)
		}
		return seq, nil
	}
	return nil, unsupported(sub(path, "type"), "%q", typ)
}
