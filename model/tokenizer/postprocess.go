package tokenizer

import (
	"encoding/json"
	"sort"
)

// postProcessor adds the special tokens of a single sequence (pairs are
// not offered by this package).
type postProcessor interface {
	process(ids []int, addSpecial bool) []int
}

// byteLevelPost only trims offsets in tokenizers; ids pass unchanged.
type byteLevelPost struct{}

func (byteLevelPost) process(ids []int, _ bool) []int { return ids }

// templatePost is TemplateProcessing's single-sequence template: the
// sequence ($A) and special tokens around it.
type templatePost struct {
	single []templatePiece
}

type templatePiece struct {
	sequence bool
	ids      []int // of a special token
}

func (p templatePost) process(ids []int, addSpecial bool) []int {
	out := make([]int, 0, len(ids)+4)
	for _, pc := range p.single {
		if pc.sequence {
			out = append(out, ids...)
		} else if addSpecial {
			out = append(out, pc.ids...)
		}
	}
	return out
}

type sequencePost []postProcessor

func (q sequencePost) process(ids []int, addSpecial bool) []int {
	for _, p := range q {
		ids = p.process(ids, addSpecial)
	}
	return ids
}

func (t *Tokenizer) parsePostProcessor(raw json.RawMessage, path string, lim *Limits, depth int) (postProcessor, error) {
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
		return byteLevelPost{}, nil
	case "TemplateProcessing":
		return t.parseTemplate(raw, path, lim)
	case "Sequence":
		if err = o.allow("type", "processors"); err != nil {
			return nil, err
		}
		if depth >= lim.MaxDepth {
			return nil, tooLarge(path, "nests Sequences deeper than %d", lim.MaxDepth)
		}
		elems, err := parseArray(o.raw("processors"), sub(path, "processors"), 64)
		if err != nil {
			return nil, err
		}
		var seq sequencePost
		for i, e := range elems {
			p, err := t.parsePostProcessor(e, index(sub(path, "processors"), i), lim, depth+1)
			if err != nil {
				return nil, err
			}
			seq = append(seq, p)
		}
		return seq, nil
	}
	return nil, unsupported(sub(path, "type"), "%q", typ)
}

func (t *Tokenizer) parseTemplate(raw json.RawMessage, path string, lim *Limits) (postProcessor, error) {
	o, err := parseObject(raw, path, lim, "type", "single", "pair", "special_tokens")
	if err != nil {
		return nil, err
	}
	// special_tokens: {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}
	specials := map[string][]int{}
	if o.has("special_tokens") {
		so, err := parseObject(o.raw("special_tokens"), sub(path, "special_tokens"), lim)
		if err != nil {
			return nil, err
		}
		if len(so.m) > 1024 {
			return nil, tooLarge(so.path, "has %d entries", len(so.m))
		}
		keys := make([]string, 0, len(so.m))
		for k := range so.m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := sub(so.path, k)
			e, err := parseObject(so.m[k], p, lim, "id", "ids", "tokens")
			if err != nil {
				return nil, err
			}
			id, err := e.str("id", true, "")
			if err != nil {
				return nil, err
			}
			if id != k {
				return nil, invalid(sub(p, "id"), "is %q, not the key %q", id, k)
			}
			idElems, err := parseArray(e.raw("ids"), sub(p, "ids"), 64)
			if err != nil {
				return nil, err
			}
			tokElems, err := parseArray(e.raw("tokens"), sub(p, "tokens"), 64)
			if err != nil {
				return nil, err
			}
			if len(idElems) != len(tokElems) {
				return nil, invalid(p, "has %d ids but %d tokens", len(idElems), len(tokElems))
			}
			ids := make([]int, len(idElems))
			for i, ie := range idElems {
				if ids[i], err = parseUint(ie, index(sub(p, "ids"), i), lim.MaxVocab-1); err != nil {
					return nil, err
				}
				var tok string
				if err := json.Unmarshal(tokElems[i], &tok); err != nil {
					return nil, invalid(index(sub(p, "tokens"), i), "is not a string")
				}
				if got, ok := t.tokenToID(tok); !ok || got != ids[i] {
					return nil, invalid(index(sub(p, "ids"), i), "is %d but the token %q has id %d (known: %v)", ids[i], tok, got, ok)
				}
			}
			specials[k] = ids
		}
	}
	parse := func(key string, allowB bool) ([]templatePiece, error) {
		p := sub(path, key)
		elems, err := parseArray(o.raw(key), p, 64)
		if err != nil {
			return nil, err
		}
		var out []templatePiece
		seqA := 0
		for i, e := range elems {
			ep := index(p, i)
			eo, err := parseObject(e, ep, lim, "SpecialToken", "Sequence")
			if err != nil {
				return nil, err
			}
			if len(eo.m) != 1 {
				return nil, invalid(ep, "must be one of SpecialToken and Sequence")
			}
			for k, v := range eo.m {
				io, err := parseObject(v, sub(ep, k), lim, "id", "type_id")
				if err != nil {
					return nil, err
				}
				id, err := io.str("id", true, "")
				if err != nil {
					return nil, err
				}
				if _, err := io.uint("type_id", 1<<16); err != nil {
					return nil, err
				}
				if k == "Sequence" {
					switch {
					case id == "A":
						seqA++
						out = append(out, templatePiece{sequence: true})
					case id == "B" && allowB:
					default:
						return nil, unsupported(sub(sub(ep, k), "id"), "%q", id)
					}
					continue
				}
				ids, ok := specials[id]
				if !ok {
					return nil, invalid(sub(sub(ep, k), "id"), "%q is not in special_tokens", id)
				}
				out = append(out, templatePiece{ids: ids})
			}
		}
		if seqA != 1 {
			return nil, invalid(p, "must hold the sequence $A exactly once")
		}
		return out, nil
	}
	single, err := parse("single", false)
	if err != nil {
		return nil, err
	}
	if o.has("pair") {
		if _, err := parse("pair", true); err != nil {
			return nil, err
		}
	}
	return templatePost{single: single}, nil
}
