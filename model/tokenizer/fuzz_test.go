package tokenizer

import (
	"errors"
	"testing"
	"unicode/utf8"
)

// metaspaceJSON is a small Llama-2-style tokenizer: Prepend/Replace
// normalizers, byte fallback, and the Replace/ByteFallback/Fuse/Strip
// decoder.
func metaspaceJSON() map[string]any {
	vocab := map[string]any{"<unk>": 0, "<s>": 1, "</s>": 2}
	for b := 0; b < 256; b++ {
		vocab[string([]byte{'<', '0', 'x', "0123456789ABCDEF"[b>>4], "0123456789ABCDEF"[b&15], '>'})] = len(vocab)
	}
	for _, s := range []string{"▁", "t", "h", "e", "a", "n", "d", "th", "the", "▁the", "an", "and", "▁and"} {
		vocab[s] = len(vocab)
	}
	return map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil,
		"added_tokens": []any{
			map[string]any{"id": 0, "content": "<unk>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
			map[string]any{"id": 1, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
			map[string]any{"id": 2, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
		},
		"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"},
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"}}},
		"pre_tokenizer": nil,
		"post_processor": map[string]any{"type": "TemplateProcessing",
			"single": []any{map[string]any{"SpecialToken": map[string]any{"id": "<s>", "type_id": 0}},
				map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
			"special_tokens": map[string]any{"<s>": map[string]any{"id": "<s>", "ids": []any{1}, "tokens": []any{"<s>"}}}},
		"decoder": map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": "▁"}, "content": " "},
			map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"},
			map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0}}},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": "<unk>", "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
			"vocab": vocab, "merges": []any{"t h", "th e", "▁ the", "a n", "an d", "▁ and"}},
	}
}

// FuzzParse: no input panics the parser; what it accepts encodes and
// decodes without panicking.
func FuzzParse(f *testing.F) {
	f.Add(mustJSON(f, byteLevelJSON()))
	f.Add(mustJSON(f, metaspaceJSON()))
	m := byteLevelJSON()
	m["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true}
	m["normalizer"] = map[string]any{"type": "NFKC"}
	f.Add(mustJSON(f, m))
	m = byteLevelJSON()
	m["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Digits", "individual_digits": true},
		map[string]any{"type": "ByteLevel", "add_prefix_space": true, "use_regex": true}}}
	f.Add(mustJSON(f, m))
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":[["a","b"]]}}`))
	f.Add([]byte(`{"model":{"type":"Unigram"}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := DefaultLimits()
		lim.MaxVocab, lim.MaxMerges = 1<<12, 1<<12
		tok, err := ParseLimits(data, lim)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *Error", err)
			}
			return
		}
		for _, s := range []string{"", "Hello, world! 123 <s> é 日本 😀", "  \n\t x"} {
			ids, err := tok.Encode(s, true)
			if err != nil {
				continue
			}
			if _, err := tok.Decode(ids, false); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := tok.Decode([]int{0, 1, 2, 3, 1 << 30, -1}, true); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzEncode: byte-level encoding round-trips every valid string
// (decode(encode(s)) == s); the Metaspace tokenizer never panics.
func FuzzEncode(f *testing.F) {
	bl := byteLevelTokenizer(f)
	ms, err := Parse(mustJSON(f, metaspaceJSON()))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range append([]string{"\xff\xfe", "a\x00b"}, fixedTexts...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids, err := bl.Encode(s, false)
		if !utf8.ValidString(s) {
			if !errors.Is(err, ErrInvalidText) {
				t.Fatalf("invalid UTF-8 accepted: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		got, err := bl.Decode(ids, false)
		if err != nil {
			t.Fatal(err)
		}
		if got != s {
			t.Fatalf("decode(encode(%q)) = %q", s, got)
		}
		ids, err = ms.Encode(s, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ms.Decode(ids, false); err != nil {
			t.Fatal(err)
		}
	})
}
