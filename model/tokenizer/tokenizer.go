package tokenizer

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// ErrInvalidText reports text that is not valid UTF-8 (tokenizers takes
// only Unicode strings).
var ErrInvalidText = errors.New("tokenizer: text is not valid UTF-8")

// Tokenizer is a loaded tokenizer.json. It is safe for concurrent use.
type Tokenizer struct {
	normalizer   normalizer
	preTokenizer preTokenizer
	model        *bpe
	post         postProcessor
	decoder      decoder

	added          []addedToken
	addedByContent map[string]int // content → index into added
	addedByID      map[int]int    // id → index into added
	special        map[string]bool
	rawMatcher     *matcher // added tokens with normalized false
	normMatcher    *matcher // added tokens with normalized true
}

// Encode returns the token ids of text, as tokenizers'
// Tokenizer.encode(text, add_special_tokens=addSpecial).ids. An error comes
// only from text that is not valid UTF-8 or a regular expression of the
// file that runs over its time limit.
func (t *Tokenizer) Encode(text string, addSpecial bool) ([]int, error) {
	if !utf8.ValidString(text) {
		return nil, ErrInvalidText
	}
	var ids []int
	// 1. Added tokens that match the raw text.
	for _, sp := range t.findAdded(t.rawMatcher, text) {
		if sp.tok >= 0 {
			ids = append(ids, t.added[sp.tok].id)
			continue
		}
		s := text[sp.start:sp.end]
		if s == "" {
			continue
		}
		// 2. Normalize the text between them, then match the normalized
		// added tokens in it.
		if t.normalizer != nil {
			var err error
			if s, err = t.normalizer.normalize(s); err != nil {
				return nil, err
			}
		}
		for _, nsp := range t.findAdded(t.normMatcher, s) {
			if nsp.tok >= 0 {
				ids = append(ids, t.added[nsp.tok].id)
				continue
			}
			ns := s[nsp.start:nsp.end]
			if ns == "" {
				continue
			}
			// 3. Pre-tokenize and run the model on each piece.
			ps := []piece{{s: ns, atStart: sp.start == 0 && nsp.start == 0}}
			if t.preTokenizer != nil {
				var err error
				if ps, err = t.preTokenizer.preTokenize(ps); err != nil {
					return nil, err
				}
			}
			for _, p := range ps {
				ids = t.model.tokenize(ids, p.s)
			}
		}
	}
	// 4. Post-process.
	if t.post != nil {
		ids = t.post.process(ids, addSpecial)
	}
	if ids == nil {
		ids = []int{}
	}
	return ids, nil
}

// Decode returns the text of ids, as tokenizers'
// Tokenizer.decode(ids, skip_special_tokens=skipSpecial). Ids that name no
// token are left out, as tokenizers does.
func (t *Tokenizer) Decode(ids []int, skipSpecial bool) (string, error) {
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		tok, ok := t.idToken(id)
		if !ok || skipSpecial && t.special[tok] {
			continue
		}
		toks = append(toks, tok)
	}
	if t.decoder == nil {
		return strings.Join(toks, " "), nil
	}
	out, err := t.decoder.decodeChain(toks)
	if err != nil {
		return "", err
	}
	return strings.Join(out, ""), nil
}

// idToken is the string an id decodes from: an added token's content (its
// normalized form when it is matched normalized), else the model's token.
func (t *Tokenizer) idToken(id int) (string, bool) {
	if i, ok := t.addedByID[id]; ok {
		return t.added[i].pattern, true
	}
	return t.model.idToTok(id)
}

// IDToToken returns the token with the given id.
func (t *Tokenizer) IDToToken(id int) (string, bool) { return t.idToken(id) }

func (t *Tokenizer) tokenToID(tok string) (int, bool) {
	if i, ok := t.addedByContent[tok]; ok {
		return t.added[i].id, true
	}
	id, ok := t.model.vocab[tok]
	return id, ok
}

// TokenToID returns the id of a token (an added token or one of the
// model's vocabulary).
func (t *Tokenizer) TokenToID(tok string) (int, bool) { return t.tokenToID(tok) }

// VocabSize is one more than the largest id: the size an embedding matrix
// needs.
func (t *Tokenizer) VocabSize() int {
	n := len(t.model.idToToken)
	for _, a := range t.added {
		n = max(n, a.id+1)
	}
	return n
}

// IsSpecial reports whether id is a special added token (skipped by Decode
// with skipSpecial).
func (t *Tokenizer) IsSpecial(id int) bool {
	i, ok := t.addedByID[id]
	return ok && t.added[i].special
}
