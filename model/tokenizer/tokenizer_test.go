package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

const llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// byteLevelJSON is a small Llama-3-style byte-level tokenizer made here:
// the 256 byte characters and merges of a few letter pairs.
func byteLevelJSON() map[string]any {
	vocab := map[string]any{}
	for b := 0; b < 256; b++ {
		vocab[bytesChar[b]] = len(vocab)
	}
	var merges []any
	addMerge := func(a, b string, pair bool) {
		if _, ok := vocab[a+b]; !ok {
			vocab[a+b] = len(vocab)
		}
		if pair {
			merges = append(merges, []any{a, b})
		} else {
			merges = append(merges, a+" "+b)
		}
	}
	for i, p := range [][2]string{{"t", "h"}, {"th", "e"}, {"Ġ", "the"}, {"e", "r"}, {"Ġ", "a"}, {"i", "n"},
		{"a", "n"}, {"an", "d"}, {"Ġ", "and"}, {"o", "n"}, {"Ġ", "t"}, {"e", "s"}, {"1", "2"}, {"12", "3"},
		{"Ġ", "Ġ"}, {"ĠĠ", "ĠĠ"}, {"Ċ", "Ċ"}, {"Ã", "©"}} {
		addMerge(p[0], p[1], i%2 == 0)
	}
	return map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil,
		"added_tokens": []any{
			map[string]any{"id": len(vocab), "content": "<|begin_of_text|>", "single_word": false, "lstrip": false,
				"rstrip": false, "normalized": false, "special": true},
			map[string]any{"id": len(vocab) + 1, "content": "<|eot_id|>", "single_word": false, "lstrip": false,
				"rstrip": false, "normalized": false, "special": true},
		},
		"normalizer": nil,
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": llama3Pattern}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
		}},
		"post_processor": map[string]any{"type": "Sequence", "processors": []any{
			map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
			map[string]any{"type": "TemplateProcessing",
				"single": []any{map[string]any{"SpecialToken": map[string]any{"id": "<|begin_of_text|>", "type_id": 0}},
					map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
				"pair": []any{map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
					map[string]any{"Sequence": map[string]any{"id": "B", "type_id": 1}}},
				"special_tokens": map[string]any{"<|begin_of_text|>": map[string]any{
					"id": "<|begin_of_text|>", "ids": []any{len(vocab)}, "tokens": []any{"<|begin_of_text|>"}}}},
		}},
		"decoder": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "ignore_merges": true,
			"vocab": vocab, "merges": merges},
	}
}

func mustJSON(t testing.TB, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func byteLevelTokenizer(t testing.TB) *Tokenizer {
	tok, err := Parse(mustJSON(t, byteLevelJSON()))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestByteLevelBasics(t *testing.T) {
	tok := byteLevelTokenizer(t)
	bos, _ := tok.TokenToID("<|begin_of_text|>")
	eot, _ := tok.TokenToID("<|eot_id|>")
	the, _ := tok.TokenToID("Ġthe")
	for _, c := range []struct {
		text       string
		addSpecial bool
		want       []int
	}{
		{"", false, []int{}},
		{"", true, []int{bos}},
		{" the", false, []int{the}},
		{" the<|eot_id|>", true, []int{bos, the, eot}},
	} {
		got, err := tok.Encode(c.text, c.addSpecial)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q, %v) = %v, want %v", c.text, c.addSpecial, got, c.want)
		}
	}
	ids, _ := tok.Encode("x the<|eot_id|>", true)
	if s, _ := tok.Decode(ids, true); s != "x the" {
		t.Errorf("Decode(skip special) = %q", s)
	}
	if s, _ := tok.Decode(ids, false); s != "<|begin_of_text|>x the<|eot_id|>" {
		t.Errorf("Decode = %q", s)
	}
	if _, err := tok.Encode("bad \xff utf-8", false); !errors.Is(err, ErrInvalidText) {
		t.Errorf("invalid UTF-8: %v", err)
	}
	if !tok.IsSpecial(eot) || tok.IsSpecial(the) {
		t.Error("IsSpecial")
	}
	if tok.VocabSize() != eot+1 {
		t.Errorf("VocabSize = %d, want %d", tok.VocabSize(), eot+1)
	}
}

// TestLossyUTF8 checks Rust's String::from_utf8_lossy replacement rule.
func TestLossyUTF8(t *testing.T) {
	for in, want := range map[string]string{
		"ok":                   "ok",
		"\xE2\x82":             "\uFFFD",
		"a\xF0\x9F\x98b":       "a\uFFFDb",
		"\xC0\x80":             "\uFFFD\uFFFD",
		"\xED\xA0\x80":         "\uFFFD\uFFFD\uFFFD",
		"\xF4\x90\x80\x80":     "\uFFFD\uFFFD\uFFFD\uFFFD",
		"\xE0\x80":             "\uFFFD\uFFFD",
		"\xFF\xFE":             "\uFFFD\uFFFD",
		"\xE2\x82\xAC\xE2":     "€\uFFFD",
		"\xF0\x9F\x98\x80\x80": "😀\uFFFD",
	} {
		if got := lossyUTF8([]byte(in)); got != want {
			t.Errorf("lossyUTF8(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLongInputsAreNotQuadratic encodes 200,000-byte words, whitespace
// runs and digit strings: a quadratic merge loop or split would take
// minutes.
func TestLongInputsAreNotQuadratic(t *testing.T) {
	tok := byteLevelTokenizer(t)
	for _, text := range []string{
		strings.Repeat("thand", 40000),
		strings.Repeat(" ", 200000) + "x",
		strings.Repeat(" \n\t", 60000),
		strings.Repeat("1234567890", 20000),
		strings.Repeat("é", 100000),
	} {
		start := time.Now()
		ids, err := tok.Encode(text, false)
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("%q...: took %v", text[:10], d)
		}
		if s, _ := tok.Decode(ids, false); s != text {
			t.Errorf("%q...: round trip", text[:10])
		}
		t.Logf("%q... (%d bytes): %d tokens in %v", text[:6], len(text), len(ids), time.Since(start))
	}
}

func set(m map[string]any, path string, v any) {
	keys := strings.Split(path, ".")
	for _, k := range keys[:len(keys)-1] {
		m = m[k].(map[string]any)
	}
	if v == nil {
		delete(m, keys[len(keys)-1])
		return
	}
	m[keys[len(keys)-1]] = v
}

// TestRefusals: every unsupported or inconsistent input is refused at load
// with an error naming its JSON path.
func TestRefusals(t *testing.T) {
	type mut func(m map[string]any)
	setTo := func(path string, v any) mut { return func(m map[string]any) { set(m, path, v) } }
	cases := []struct {
		name string
		mut  mut
		want string
		kind error
	}{
		{"unigram", setTo("model.type", "Unigram"), `tokenizer.json: model.type "Unigram" not supported`, ErrUnsupported},
		{"wordpiece", setTo("model.type", "WordPiece"), `model.type "WordPiece" not supported`, ErrUnsupported},
		{"whitespace pre", setTo("pre_tokenizer", map[string]any{"type": "Whitespace"}), `pre_tokenizer.type "Whitespace" not supported`, ErrUnsupported},
		{"bert pre in sequence", func(m map[string]any) {
			seq := m["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)
			seq[1] = map[string]any{"type": "BertPreTokenizer"}
		}, `pre_tokenizer.pretokenizers[1].type "BertPreTokenizer" not supported`, ErrUnsupported},
		{"lowercase", setTo("normalizer", map[string]any{"type": "Lowercase"}), `normalizer.type "Lowercase" not supported`, ErrUnsupported},
		{"nested normalizer", setTo("normalizer", map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "NFC"}, map[string]any{"type": "StripAccents"}}}), `normalizer.normalizers[1].type "StripAccents" not supported`, ErrUnsupported},
		{"wordpiece decoder", setTo("decoder", map[string]any{"type": "WordPiece", "prefix": "##"}), `decoder.type "WordPiece" not supported`, ErrUnsupported},
		{"roberta", setTo("post_processor", map[string]any{"type": "RobertaProcessing"}), `post_processor.type "RobertaProcessing" not supported`, ErrUnsupported},
		{"truncation", setTo("truncation", map[string]any{"max_length": 8}), `truncation (non-null) not supported`, ErrUnsupported},
		{"padding", setTo("padding", map[string]any{"strategy": "BatchLongest"}), `padding (non-null) not supported`, ErrUnsupported},
		{"version", setTo("version", "2.0"), `version "2.0" not supported`, ErrUnsupported},
		{"dropout", setTo("model.dropout", 0.1), `model.dropout 0.1 (only null or 0) not supported`, ErrUnsupported},
		{"subword prefix", setTo("model.continuing_subword_prefix", "##"), `model.continuing_subword_prefix "##" not supported`, ErrUnsupported},
		{"unknown model field", setTo("model.frobnicate", true), `model.frobnicate (unknown field) not supported`, ErrUnsupported},
		{"unknown top field", setTo("extra", 1), `extra (unknown field) not supported`, ErrUnsupported},
		{"lookbehind", func(m map[string]any) {
			seq := m["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)
			seq[0].(map[string]any)["pattern"] = map[string]any{"Regex": `(?<=a)b`}
		}, `pre_tokenizer.pretokenizers[0].pattern.Regex "(?<=a)b"`, ErrUnsupported},
		{"unknown class", func(m map[string]any) {
			seq := m["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)
			seq[0].(map[string]any)["pattern"] = map[string]any{"Regex": `\p{Greek}+`}
		}, `pre_tokenizer.pretokenizers[0].pattern.Regex`, ErrUnsupported},
		{"anchor", func(m map[string]any) {
			seq := m["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)
			seq[0].(map[string]any)["pattern"] = map[string]any{"Regex": `^\s+`}
		}, `pre_tokenizer.pretokenizers[0].pattern.Regex`, ErrUnsupported},
		{"behavior", func(m map[string]any) {
			seq := m["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)
			seq[0].(map[string]any)["behavior"] = "Sideways"
		}, `pre_tokenizer.pretokenizers[0].behavior "Sideways" not supported`, ErrUnsupported},
		{"metaspace prefix", setTo("pre_tokenizer", map[string]any{"type": "Metaspace", "replacement": "▁", "add_prefix_space": false}),
			`pre_tokenizer.add_prefix_space false does not match prepend_scheme "always"`, ErrInvalid},
		{"metaspace replacement", setTo("pre_tokenizer", map[string]any{"type": "Metaspace", "replacement": "ab"}),
			`pre_tokenizer.replacement must be exactly one character`, ErrInvalid},
		{"merge oov", setTo("model.merges", []any{"a zz"}), `model.merges[0] token "zz" is not in the vocabulary`, ErrInvalid},
		{"merge form", setTo("model.merges", []any{"a b c"}), `model.merges[0] "a b c" is not two tokens`, ErrInvalid},
		{"merge pair", setTo("model.merges", []any{[]any{"a"}}), `model.merges[0] is not a pair of strings`, ErrInvalid},
		{"vocab id twice", func(m map[string]any) {
			m["model"].(map[string]any)["vocab"].(map[string]any)["zz"] = 0
		}, `model.vocab gives id 0 to both`, ErrInvalid},
		{"vocab negative", func(m map[string]any) {
			m["model"].(map[string]any)["vocab"].(map[string]any)["zz"] = -1
		}, `model.vocab["zz"] is not a non-negative integer`, ErrInvalid},
		{"vocab huge id", func(m map[string]any) {
			m["model"].(map[string]any)["vocab"].(map[string]any)["zz"] = 1 << 40
		}, `model.vocab["zz"] is 1099511627776, over the limit`, ErrTooLarge},
		{"unk oov", setTo("model.unk_token", "<unk>"), `model.unk_token "<unk>" is not in the vocabulary`, ErrInvalid},
		{"added id", func(m map[string]any) {
			m["added_tokens"].([]any)[0].(map[string]any)["id"] = 3
		}, `added_tokens[0].id is 3 but tokenizers gives "<|begin_of_text|>" the id`, ErrInvalid},
		{"added empty", func(m map[string]any) {
			m["added_tokens"].([]any)[0].(map[string]any)["content"] = ""
		}, `added_tokens[0].content is empty`, ErrInvalid},
		{"added unknown field", func(m map[string]any) {
			m["added_tokens"].([]any)[1].(map[string]any)["weird"] = true
		}, `added_tokens[1].weird (unknown field) not supported`, ErrUnsupported},
		{"template missing special", func(m map[string]any) {
			pp := m["post_processor"].(map[string]any)["processors"].([]any)[1].(map[string]any)
			pp["single"] = []any{map[string]any{"SpecialToken": map[string]any{"id": "<s>", "type_id": 0}},
				map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}}
		}, `post_processor.processors[1].single[0].SpecialToken.id "<s>" is not in special_tokens`, ErrInvalid},
		{"template no sequence", func(m map[string]any) {
			pp := m["post_processor"].(map[string]any)["processors"].([]any)[1].(map[string]any)
			pp["single"] = []any{}
		}, `post_processor.processors[1].single must hold the sequence $A exactly once`, ErrInvalid},
		{"deep sequence", func(m map[string]any) {
			var n any = map[string]any{"type": "NFC"}
			for range 10 {
				n = map[string]any{"type": "Sequence", "normalizers": []any{n}}
			}
			m["normalizer"] = n
		}, `nests Sequences deeper than 8`, ErrTooLarge},
		{"no model", setTo("model", nil), `model is missing`, ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := byteLevelJSON()
			c.mut(m)
			_, err := Parse(mustJSON(t, m))
			if err == nil {
				t.Fatalf("accepted")
			}
			if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "tokenizer.json: ") {
				t.Errorf("error %q, want it to contain %q", err, c.want)
			}
			if !errors.Is(err, c.kind) {
				t.Errorf("error %q is not %v", err, c.kind)
			}
		})
	}
}

func TestRefusesMalformedAndOversized(t *testing.T) {
	base := mustJSON(t, byteLevelJSON())
	for _, c := range []struct {
		name string
		data []byte
		lim  func(*Limits)
		kind error
		want string
	}{
		{"not json", []byte(`{"model":`), nil, ErrInvalid, "not valid JSON"},
		{"array", []byte(`[]`), nil, ErrInvalid, "is not a JSON object"},
		{"not utf-8", []byte("{\"model\": \"\xff\"}"), nil, ErrInvalid, "not valid UTF-8"},
		{"duplicate key", []byte(`{"model": null, "model": null}`), nil, ErrInvalid, `has the key "model" twice`},
		{"file", base, func(l *Limits) { l.MaxFileBytes = 1000 }, ErrTooLarge, "over the limit of 1000"},
		{"vocab", base, func(l *Limits) { l.MaxVocab = 100 }, ErrTooLarge, "model.vocab"},
		{"merges", base, func(l *Limits) { l.MaxMerges = 3 }, ErrTooLarge, "model.merges has more than 3 entries"},
		{"added", base, func(l *Limits) { l.MaxAddedTokens = 1 }, ErrTooLarge, "added_tokens has more than 1 entries"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lim := DefaultLimits()
			if c.lim != nil {
				c.lim(&lim)
			}
			_, err := ParseLimits(c.data, lim)
			if err == nil || !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want %v containing %q", err, c.kind, c.want)
			}
		})
	}
}

// TestByteFallbackDecoder: a run of byte tokens that is not UTF-8 becomes
// one U+FFFD per byte; "<0x+A>" is a byte token (u8::from_str_radix takes
// a sign).
func TestByteFallbackDecoder(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"<0x41>", "<0x+A>", "y"}, []string{"A\n", "y"}},
		{[]string{"<0x41>", "<0xE2>", "<0x82>", "x", "<0xZZ>"}, []string{"\uFFFD", "\uFFFD", "\uFFFD", "x", "<0xZZ>"}},
		{[]string{"<0xE2>", "<0x82>", "<0xAC>"}, []string{"€"}},
	} {
		got, _ := byteFallbackDec{}.decodeChain(c.in)
		if !slices.Equal(got, c.want) {
			t.Errorf("decodeChain(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestTranslateOnig(t *testing.T) {
	for _, c := range []struct {
		in, err string
		match   map[string]bool
	}{
		{in: `[一-龥\u3040-ゟ]+`, match: map[string]bool{"ぁ": true, "中": true, "a": false}},
		{in: `\x41+`, match: map[string]bool{"AA": true, "B": false}},
		{in: `\p{L}+`, match: map[string]bool{"\u1C89": true, "1": false}},
		{in: `[^\s\p{L}]`, match: map[string]bool{"!": true, " ": false, "a": false}},
		{in: `\P{N}`, match: map[string]bool{"a": true, "7": false}},
		{in: `\xFF`, err: `\x other than`},
		{in: `\u12`, err: `four hex digits`},
		{in: `[\P{L}]`, err: `negated class`},
		{in: `[a[b]]`, err: `nested character class`},
		{in: `[a&&b]`, err: `intersection`},
		{in: `a$`, err: `anchor $`},
		{in: `(?<n>a)`, err: `group (?<`},
		{in: `\bword`, err: `escape \b`},
		{in: `\p{Greek}`, err: `class \p{Greek}`},
		{in: `[abc`, err: `unterminated character class`},
	} {
		re, err := compileOnig(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		for s, want := range c.match {
			if got, _ := re.MatchString(s); got != want {
				t.Errorf("%s matches %q: %v, want %v", c.in, s, got, want)
			}
		}
	}
}

// TestConcurrentEncode: one Tokenizer serves several goroutines (the word
// cache is shared) with the results of serial use.
func TestConcurrentEncode(t *testing.T) {
	tok := byteLevelTokenizer(t)
	want := make([][]int, len(fixedTexts))
	for i, s := range fixedTexts {
		want[i], _ = tok.Encode(s, true)
	}
	tok.model.initCache()
	errs := make(chan error, 4)
	for g := range 4 {
		go func() {
			for k := range len(fixedTexts) {
				i := (k + g*7) % len(fixedTexts)
				got, err := tok.Encode(fixedTexts[i], true)
				if err == nil && !slices.Equal(got, want[i]) {
					err = fmt.Errorf("Encode(%q) = %v, want %v", fixedTexts[i], got, want[i])
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
