package tokenizer

import (
	"encoding/json"
	"unicode/utf8"
)

// addedToken is an entry of added_tokens: matched in the text before the
// model runs.
type addedToken struct {
	id         int
	content    string
	pattern    string // what is matched: content, or content normalized when normalized is set
	singleWord bool
	lstrip     bool
	rstrip     bool
	normalized bool
	special    bool
}

// matcher finds added tokens leftmost-longest, as the Aho-Corasick automaton
// of tokenizers does, with a byte trie.
type matcher struct {
	nodes []trieNode
	first [256]bool
}

type trieNode struct {
	next  map[byte]int
	token int // index into Tokenizer.added, -1 if none ends here
}

func newMatcher(added []addedToken, want func(*addedToken) bool) *matcher {
	m := &matcher{nodes: []trieNode{{token: -1}}}
	any := false
	for i := range added {
		a := &added[i]
		if !want(a) {
			continue
		}
		any = true
		n := 0
		for j := 0; j < len(a.pattern); j++ {
			c := a.pattern[j]
			if j == 0 {
				m.first[c] = true
			}
			nx, ok := m.nodes[n].next[c]
			if !ok {
				if m.nodes[n].next == nil {
					m.nodes[n].next = map[byte]int{}
				}
				nx = len(m.nodes)
				m.nodes = append(m.nodes, trieNode{token: -1})
				m.nodes[n].next[c] = nx
			}
			n = nx
		}
		m.nodes[n].token = i
	}
	if !any {
		return nil
	}
	return m
}

// longestAt returns the longest token starting at s[i:] and its end.
func (m *matcher) longestAt(s string, i int) (tok, end int) {
	tok, end = -1, -1
	n := 0
	for j := i; j < len(s); j++ {
		nx, ok := m.nodes[n].next[s[j]]
		if !ok {
			break
		}
		n = nx
		if m.nodes[n].token >= 0 {
			tok, end = m.nodes[n].token, j+1
		}
	}
	return tok, end
}

// split is AddedVocabulary::find_matches: s cut into pieces, each either
// plain text (tok -1) or one added token with the whitespace its
// lstrip/rstrip options absorb.
type addedSplit struct {
	start, end int
	tok        int // index into added, -1 for text
}

func (t *Tokenizer) findAdded(m *matcher, s string) []addedSplit {
	if m == nil || s == "" {
		return []addedSplit{{0, len(s), -1}}
	}
	var out []addedSplit
	startOffset := 0
	for i := 0; i < len(s); {
		if !m.first[s[i]] {
			i++
			continue
		}
		tok, stop := m.longestAt(s, i)
		if tok < 0 {
			i++
			continue
		}
		start := i
		i = stop
		a := &t.added[tok]
		if a.singleWord {
			startSpace := start == 0 || !endsWithWord(s[:start])
			stopSpace := stop == len(s) || !startsWithWord(s[stop:])
			if !startSpace || !stopSpace {
				continue
			}
		}
		if a.lstrip {
			start = max(spaceLeftmostAtEnd(s[:start]), startOffset)
		}
		if a.rstrip {
			stop += spaceRightmostAtStart(s[stop:])
		}
		if startOffset < start {
			out = append(out, addedSplit{startOffset, start, -1})
		}
		out = append(out, addedSplit{start, stop, tok})
		startOffset = stop
	}
	if startOffset != len(s) {
		out = append(out, addedSplit{startOffset, len(s), -1})
	}
	return out
}

func endsWithWord(s string) bool {
	r, n := utf8.DecodeLastRuneInString(s)
	return n > 0 && isWordRune(r)
}

func startsWithWord(s string) bool {
	r, n := utf8.DecodeRuneInString(s)
	return n > 0 && isWordRune(r)
}

// spaceLeftmostAtEnd is where the run of whitespace ending s begins.
func spaceLeftmostAtEnd(s string) int {
	i := len(s)
	for i > 0 {
		r, n := utf8.DecodeLastRuneInString(s[:i])
		if !isSpace(r) {
			break
		}
		i -= n
	}
	return i
}

// spaceRightmostAtStart is the length of the whitespace beginning s.
func spaceRightmostAtStart(s string) int {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !isSpace(r) {
			break
		}
		i += n
	}
	return i
}

// parseAddedTokens reads added_tokens and gives each the id tokenizers
// gives it: its id in the model's vocabulary when its content is there,
// else the next free id after the vocabulary. A file whose "id" fields
// disagree with that is refused (tokenizers only warns, then uses its own).
func (t *Tokenizer) parseAddedTokens(raw json.RawMessage, path string, lim *Limits) error {
	elems, err := parseArray(raw, path, lim.MaxAddedTokens)
	if err != nil {
		return err
	}
	t.addedByContent = map[string]int{}
	t.addedByID = map[int]int{}
	t.special = map[string]bool{}
	vocabSize := len(t.model.vocab)
	nextID := vocabSize
	for i, e := range elems {
		p := index(path, i)
		o, err := parseObject(e, p, lim, "id", "content", "single_word", "lstrip", "rstrip", "normalized", "special")
		if err != nil {
			return err
		}
		var a addedToken
		if a.content, err = o.str("content", true, ""); err != nil {
			return err
		}
		if a.content == "" {
			return invalid(sub(p, "content"), "is empty")
		}
		if len(a.content) > lim.MaxTokenBytes {
			return tooLarge(sub(p, "content"), "is %d bytes long", len(a.content))
		}
		fileID, err := o.uint("id", lim.MaxVocab-1)
		if err != nil {
			return err
		}
		if a.singleWord, err = o.boolean("single_word", false); err != nil {
			return err
		}
		if a.lstrip, err = o.boolean("lstrip", false); err != nil {
			return err
		}
		if a.rstrip, err = o.boolean("rstrip", false); err != nil {
			return err
		}
		if a.special, err = o.boolean("special", false); err != nil {
			return err
		}
		if a.normalized, err = o.boolean("normalized", !a.special); err != nil {
			return err
		}
		if _, dup := t.addedByContent[a.content]; dup {
			return invalid(sub(p, "content"), "%q is repeated", a.content)
		}
		if id, ok := t.model.vocab[a.content]; ok {
			a.id = id
		} else {
			a.id = nextID
			nextID++
		}
		if a.id != fileID {
			return invalid(sub(p, "id"), "is %d but tokenizers gives %q the id %d", fileID, a.content, a.id)
		}
		if a.id >= lim.MaxVocab {
			return tooLarge(sub(p, "id"), "is %d, over the limit of %d", a.id, lim.MaxVocab)
		}
		a.pattern = a.content
		if a.normalized && t.normalizer != nil {
			if a.pattern, err = t.normalizer.normalize(a.content); err != nil {
				return invalid(sub(p, "content"), "cannot be normalized: %v", err)
			}
			if a.pattern == "" {
				return invalid(sub(p, "content"), "normalizes to the empty string")
			}
		}
		t.addedByContent[a.content] = len(t.added)
		t.addedByID[a.id] = len(t.added)
		if a.special {
			t.special[a.content] = true
		}
		t.added = append(t.added, a)
	}
	t.rawMatcher = newMatcher(t.added, func(a *addedToken) bool { return !a.normalized })
	t.normMatcher = newMatcher(t.added, func(a *addedToken) bool { return a.normalized })
	return nil
}
