package tokenizer

import (
	"container/heap"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// bpe is the BPE model of tokenizers (models/bpe): a vocabulary, ranked
// merges, and the unk / byte-fallback rules for characters outside the
// vocabulary.
type bpe struct {
	vocab        map[string]int
	idToToken    []string // "" where no token has that id
	hasID        []bool
	merges       map[uint64]mergeRule // (left id, right id) → rank and result
	unk          int                  // -1: no unk token
	fuseUnk      bool
	byteFallback bool
	byteIDs      [256]int // <0xNN> tokens, -1 where absent
	ignoreMerges bool

	mu    sync.Mutex
	cache map[string][]int
}

type mergeRule struct {
	rank  int
	newID int
}

const cacheCapacity = 10000

func pairKey(a, b int) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

func parseBPE(raw json.RawMessage, path string, lim *Limits) (*bpe, error) {
	o, err := parseObject(raw, path, lim)
	if err != nil {
		return nil, err
	}
	typ, err := o.str("type", false, "BPE")
	if err != nil {
		return nil, err
	}
	if typ != "BPE" {
		return nil, unsupported(sub(path, "type"), "%q", typ)
	}
	if err := o.allow("type", "dropout", "unk_token", "continuing_subword_prefix",
		"end_of_word_suffix", "fuse_unk", "byte_fallback", "ignore_merges", "vocab", "merges"); err != nil {
		return nil, err
	}
	if o.has("dropout") {
		var p float64
		if err := json.Unmarshal(o.raw("dropout"), &p); err != nil {
			return nil, invalid(sub(path, "dropout"), "is not a number")
		}
		if p != 0 {
			return nil, unsupported(sub(path, "dropout"), "%v (only null or 0)", p)
		}
	}
	for _, k := range []string{"continuing_subword_prefix", "end_of_word_suffix"} {
		if s, err := o.str(k, false, ""); err != nil {
			return nil, err
		} else if s != "" {
			return nil, unsupported(sub(path, k), "%q", s)
		}
	}
	m := &bpe{unk: -1}
	if m.fuseUnk, err = o.boolean("fuse_unk", false); err != nil {
		return nil, err
	}
	if m.byteFallback, err = o.boolean("byte_fallback", false); err != nil {
		return nil, err
	}
	if m.ignoreMerges, err = o.boolean("ignore_merges", false); err != nil {
		return nil, err
	}
	if !o.has("vocab") {
		return nil, invalid(sub(path, "vocab"), "is missing")
	}
	if err := m.parseVocab(o.raw("vocab"), sub(path, "vocab"), lim); err != nil {
		return nil, err
	}
	if !o.has("merges") {
		return nil, invalid(sub(path, "merges"), "is missing")
	}
	if err := m.parseMerges(o.raw("merges"), sub(path, "merges"), lim); err != nil {
		return nil, err
	}
	unk, err := o.str("unk_token", false, "")
	if err != nil {
		return nil, err
	}
	if o.has("unk_token") {
		id, ok := m.vocab[unk]
		if !ok {
			return nil, invalid(sub(path, "unk_token"), "%q is not in the vocabulary", unk)
		}
		m.unk = id
	}
	for b := range m.byteIDs {
		m.byteIDs[b] = -1
		if id, ok := m.vocab[fmt.Sprintf("<0x%02X>", b)]; ok {
			m.byteIDs[b] = id
		}
	}
	return m, nil
}

// parseVocab reads the vocab object, checking its size and every id
// before the maps grow.
func (m *bpe) parseVocab(raw json.RawMessage, path string, lim *Limits) error {
	sc := &scanner{b: raw}
	if sc.expect('{') != nil {
		return invalid(path, "is not a JSON object")
	}
	m.vocab = map[string]int{}
	maxID := -1
	for first := true; ; first = false {
		more, err := sc.next(first, '}')
		if err != nil {
			return invalid(path, "%v", err)
		}
		if !more {
			break
		}
		if len(m.vocab) >= lim.MaxVocab {
			return tooLarge(path, "has more than %d entries", lim.MaxVocab)
		}
		tok, err := sc.str()
		if err != nil || sc.expect(':') != nil {
			return invalid(path, "%v", errSyntax)
		}
		p := func() string { return fmt.Sprintf("%s[%q]", path, tok) }
		n, ok := sc.uintValue()
		if !ok {
			return invalid(p(), "is not a non-negative integer")
		}
		if n >= uint64(lim.MaxVocab) {
			return tooLarge(p(), "is %d, over the limit of %d", n, lim.MaxVocab-1)
		}
		id := int(n)
		if len(tok) > lim.MaxTokenBytes {
			return tooLarge(p(), "is %d bytes long", len(tok))
		}
		if tok == "" {
			return invalid(path, "has an empty token")
		}
		if _, dup := m.vocab[tok]; dup {
			return invalid(p(), "is repeated")
		}
		m.vocab[tok] = id
		maxID = max(maxID, id)
	}
	m.idToToken = make([]string, maxID+1)
	m.hasID = make([]bool, maxID+1)
	for tok, id := range m.vocab {
		if m.hasID[id] {
			a, b := m.idToToken[id], tok
			if a > b {
				a, b = b, a
			}
			return invalid(path, "gives id %d to both %q and %q", id, a, b)
		}
		m.idToToken[id], m.hasID[id] = tok, true
	}
	return nil
}

// parseMerges reads the merges array, in either form: "a b" strings
// (split on the single space) or ["a", "b"] pairs.
func (m *bpe) parseMerges(raw json.RawMessage, path string, lim *Limits) error {
	sc := &scanner{b: raw}
	if sc.expect('[') != nil {
		return invalid(path, "is not a JSON array")
	}
	m.merges = map[uint64]mergeRule{}
	for rank := 0; ; rank++ {
		more, err := sc.next(rank == 0, ']')
		if err != nil {
			return invalid(path, "%v", err)
		}
		if !more {
			return nil
		}
		if rank >= lim.MaxMerges {
			return tooLarge(path, "has more than %d entries", lim.MaxMerges)
		}
		p := path + "[" + strconv.Itoa(rank) + "]"
		var a, b string
		switch sc.peek() {
		case '"':
			v, err := sc.str()
			if err != nil {
				return invalid(p, "%v", err)
			}
			parts := strings.Split(v, " ")
			if len(parts) != 2 {
				return invalid(p, "%q is not two tokens separated by one space", v)
			}
			a, b = parts[0], parts[1]
		case '[':
			sc.i++
			var pair []string
			for first := true; ; first = false {
				more, err := sc.next(first, ']')
				if err != nil {
					return invalid(p, "is not a pair of strings")
				}
				if !more {
					break
				}
				s, err := sc.str()
				if err != nil || len(pair) == 2 {
					return invalid(p, "is not a pair of strings")
				}
				pair = append(pair, s)
			}
			if len(pair) != 2 {
				return invalid(p, "is not a pair of strings")
			}
			a, b = pair[0], pair[1]
		default:
			return invalid(p, "is neither a string nor a pair")
		}
		ida, ok := m.vocab[a]
		if !ok {
			return invalid(p, "token %q is not in the vocabulary", a)
		}
		idb, ok := m.vocab[b]
		if !ok {
			return invalid(p, "token %q is not in the vocabulary", b)
		}
		idn, ok := m.vocab[a+b]
		if !ok {
			return invalid(p, "merged token %q is not in the vocabulary", a+b)
		}
		// A repeated pair keeps its last rank, as in tokenizers.
		m.merges[pairKey(ida, idb)] = mergeRule{rank: rank, newID: idn}
	}
}

func (m *bpe) initCache() { m.cache = make(map[string][]int) }

func (m *bpe) idToTok(id int) (string, bool) {
	if id < 0 || id >= len(m.idToToken) || !m.hasID[id] {
		return "", false
	}
	return m.idToToken[id], true
}

// tokenize appends the ids of one pre-tokenized piece to dst.
func (m *bpe) tokenize(dst []int, s string) []int {
	if s == "" {
		return dst
	}
	if m.ignoreMerges {
		if id, ok := m.vocab[s]; ok {
			return append(dst, id)
		}
	}
	m.mu.Lock()
	ids, ok := m.cache[s]
	m.mu.Unlock()
	if ok {
		return append(dst, ids...)
	}
	ids = m.mergeWord(s)
	m.mu.Lock()
	if len(m.cache) < cacheCapacity {
		m.cache[s] = ids
	}
	m.mu.Unlock()
	return append(dst, ids...)
}

type symbol struct {
	id         int
	prev, next int
	len        int // bytes; 0 once merged into its left neighbour
}

type mergeItem struct {
	pos, rank, newID int
}

type mergeQueue []mergeItem

func (q mergeQueue) Len() int { return len(q) }
func (q mergeQueue) Less(i, j int) bool {
	if q[i].rank != q[j].rank {
		return q[i].rank < q[j].rank
	}
	return q[i].pos < q[j].pos
}
func (q mergeQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *mergeQueue) Push(x any)   { *q = append(*q, x.(mergeItem)) }
func (q *mergeQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// mergeWord is BPE::merge_word followed by Word::merge_all: the characters
// of w become symbols (byte fallback or unk for those outside the
// vocabulary), then the lowest-ranked adjacent pair is merged until none is
// left, with a priority queue (O(n log n) in the word's length).
func (m *bpe) mergeWord(w string) []int {
	syms := make([]symbol, 0, len(w))
	add := func(id, n int) {
		i := len(syms)
		syms = append(syms, symbol{id: id, prev: i - 1, next: -1, len: n})
		if i > 0 {
			syms[i-1].next = i
		}
	}
	unkID, unkLen := -1, 0
	for i := 0; i < len(w); {
		_, n := utf8.DecodeRuneInString(w[i:])
		c := w[i : i+n]
		i += n
		if id, ok := m.vocab[c]; ok {
			if unkID >= 0 {
				add(unkID, unkLen)
				unkID = -1
			}
			add(id, n)
			continue
		}
		if m.byteFallback {
			all := true
			for j := 0; j < len(c); j++ {
				if m.byteIDs[c[j]] < 0 {
					all = false
					break
				}
			}
			if all {
				// tokenizers adds the byte tokens without flushing a pending unk.
				for j := 0; j < len(c); j++ {
					add(m.byteIDs[c[j]], 1)
				}
				continue
			}
		}
		if m.unk >= 0 {
			switch {
			case unkID >= 0 && m.fuseUnk:
				unkLen += n
			case unkID >= 0:
				add(unkID, unkLen)
				unkID, unkLen = m.unk, n
			default:
				unkID, unkLen = m.unk, n
			}
		}
	}
	if unkID >= 0 {
		add(unkID, unkLen)
	}

	q := make(mergeQueue, 0, len(syms))
	for i := 0; i+1 < len(syms); i++ {
		if r, ok := m.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			q = append(q, mergeItem{pos: i, rank: r.rank, newID: r.newID})
		}
	}
	heap.Init(&q)
	for q.Len() > 0 {
		top := heap.Pop(&q).(mergeItem)
		cur := &syms[top.pos]
		if cur.len == 0 || cur.next == -1 {
			continue
		}
		nextPos := cur.next
		right := syms[nextPos]
		if r, ok := m.merges[pairKey(cur.id, right.id)]; !ok || r.newID != top.newID {
			continue // stale entry
		}
		cur.id = top.newID
		cur.len += right.len
		cur.next = right.next
		syms[nextPos].len = 0
		if right.next >= 0 && right.next < len(syms) {
			syms[right.next].prev = top.pos
		}
		if cur.prev >= 0 {
			if r, ok := m.merges[pairKey(syms[cur.prev].id, cur.id)]; ok {
				heap.Push(&q, mergeItem{pos: cur.prev, rank: r.rank, newID: r.newID})
			}
		}
		if cur.next >= 0 && cur.next < len(syms) {
			if r, ok := m.merges[pairKey(cur.id, syms[cur.next].id)]; ok {
				heap.Push(&q, mergeItem{pos: top.pos, rank: r.rank, newID: r.newID})
			}
		}
	}
	ids := make([]int, 0, len(syms))
	for _, s := range syms {
		if s.len != 0 {
			ids = append(ids, s.id)
		}
	}
	return ids
}
