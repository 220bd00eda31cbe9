package tokenizer

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zooai/gym/internal/pyenv"
)

// families are the tokenizers testdata/reference.py trains.
var families = []string{"llama3", "qwen2", "gpt2", "smollm", "llama2", "mistral", "metaspace_split",
	"misc_bytelevel", "misc_metaspace"}

// fixedTexts are the hand-picked cases; randomTexts adds generated ones.
var fixedTexts = []string{
	"", " ", "  ", "   ", "\n", "\n\n", "\n\n\n", "\t", "\t\t", "\r\n", " \n ", "\n \n", " \t\n\r ",
	"Hello world", "hello   world", "Hello, world!", "  leading", "trailing  ", "a  b   c    d",
	"tab\tseparated\tvalues", "line one\nline two\n\nline four", "mixed \t \n whitespace\n\t end",
	"don't", "I'M", "they'll", "we'VE", "she'd", "it's", "'s", "'", "x'y", "''", "O'Neil's",
	"0", "12", "123", "1234", "12345678", "3.14159", "1,000,000", "2026-12-01", "v1.2.3", "x1y22z333",
	"café", "naïve", "Straße", "e\u0301", "ﬁnance", "ｆｕｌｌ　ｗｉｄｔｈ", "①②③", "Ⅻ", "²³", "ſ", "'ſ",
	"日本語のテキスト", "中文字符和标点。", "한국어 문장", "नमस्ते दुनिया", "مرحبا بالعالم", "שלום", "Привет, мир!",
	"😀", "😀😀😀", "👍🏽", "👨‍👩‍👧", "🚀 to the moon 🌕", "\u00a0x", "x\u3000y", "a\u2028b", "a\u0085b",
	"\u200b", "\ufeffBOM", "\u0000", "\x7f", "\U0010FFFF", "\uFFFD",
	"<|begin_of_text|>", "<|begin_of_text|>Hello", "a<|eot_id|>b", " <|eot_id|> ", "<|eot_id|><|eot_id|>",
	"<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>", "<|endoftext|>", "x<|im_start|>y<|im_end|>",
	"<|start", "<|startx", "<|start_header_id|>x", "<|start<|start_header_id|>", "Élan", "Elan élan", "E\u0301lan",
	"a-b--c, d;e", "HelloWorldFOO", "x,,y;;z", "xx", "ax xa", "xxx yyy xxx",
	"x <lstrip> y", "x    <lstrip>y", "<lstrip>", "x <rstrip>   y", "<rstrip> \n z", "<tool_call>{}</tool_call>",
	"a word b", "awordb", "Ⓐword", "Ⅻword", "word\u200d", "é word_", "word1", "١word", "_word", "-word-", "word", "words", " word ", "(word)", "<think>ok</think>",
	"<s>", "</s>", "<unk>", "<s>Hello</s>", "Hello <s> world", " <s>", "[INST] hi [/INST]", "<tool>", "a <tool> b",
	"<0x41>", "<0x0A>", "▁", "▁▁x", "x▁y", "Ġ", "Ċ",
	"def f(x):\n    return x ** 2\n", "if (a && b) { c(); }", "https://example.com/a?b=c&d=e", "#!/bin/sh",
}

var pools = [][]rune{
	[]rune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"),
	[]rune("0123456789"),
	[]rune(" \t\n\r  "),
	[]rune(".,;:!?'\"`()[]{}<>/\\|-_=+*&^%$#@~"),
	[]rune("éèêëàâäôöûüçñßøåæœÉÀÇ"),
	[]rune("日本語中文字符漢字のテキストです한국어"),
	[]rune("😀😂🚀🌕👍🏽👨\u200d👩\u200d👧❤️"),
	[]rune("\u00a0\u3000\u2028\u0085\u200b\u0301\u0308ﬁ①Ⅻ²ſ"),
	[]rune("абвгдежзийклмнопрстуфхцчшщыэюяαβγδεζηθικλμνξοπρστυφχψω"),
	[]rune("नमस्तेमरحباשלום"),
}

var words = []string{"the", "hello", "world", "model", "token", "don't", "it's", "<|eot_id|>", "<s>", "</s>",
	"<|endoftext|>", "[INST]", "<tool>", "word", "<lstrip>", "<rstrip>", "<think>", "<0x41>", "123456", " ", "  ", "\n"}

func randomTexts(r *rand.Rand, n int) []string {
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for k := r.IntN(30); k >= 0; k-- {
			if r.IntN(4) == 0 {
				b.WriteString(words[r.IntN(len(words))])
				continue
			}
			p := pools[r.IntN(len(pools))]
			for m := 1 + r.IntN(5); m > 0; m-- {
				b.WriteRune(p[r.IntN(len(p))])
			}
		}
		out[i] = b.String()
	}
	return out
}

// codePointTexts puts code points drawn from all of Unicode (assigned or
// not, surrogates excepted) between letters, digits and spaces, where the
// pre-tokenizer's character classes (\s, \p{L}, \p{N}) and the
// normalizers decide the split.
func codePointTexts(r *rand.Rand, n int) []string {
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for k := 0; k < 6; k++ {
			c := rune(r.IntN(0x110000))
			switch r.IntN(3) {
			case 0:
				c = rune(r.IntN(0x3000)) // denser where the scripts and spaces are
			case 1:
				c = rune(r.IntN(0x10000))
			}
			if c >= 0xD800 && c <= 0xDFFF {
				c = 'x'
			}
			b.WriteString([]string{"a", " ", "1", "  ", "'", "\n"}[r.IntN(6)])
			b.WriteRune(c)
			b.WriteRune(c)
		}
		out[i] = b.String()
	}
	return out
}

type refText struct {
	With       []int  `json:"with"`
	Without    []int  `json:"without"`
	Decode     string `json:"decode"`
	DecodeSkip string `json:"decode_skip"`
}

type refIDs struct {
	Decode     string `json:"decode"`
	DecodeSkip string `json:"decode_skip"`
}

// trainReference trains the reference tokenizers once per test binary.
func trainReference(t *testing.T) (py, dir string) {
	t.Helper()
	py = pyenv.Require(t, "tokenizers")
	dir = t.TempDir()
	cmd := exec.Command(py, "testdata/reference.py", "train", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("reference.py train: %v\n%s", err, out)
	}
	return py, dir
}

// TestConformance checks ids and decoded text against `tokenizers` for every
// family, on the fixed cases, hundreds of random strings, and random id
// sequences (decode only).
func TestConformance(t *testing.T) {
	py, dir := trainReference(t)
	for _, fam := range families {
		t.Run(fam, func(t *testing.T) {
			path := filepath.Join(dir, fam+".json")
			tok, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(7, uint64(len(fam))))
			texts := append(slices.Clone(fixedTexts), randomTexts(r, 400)...)
			texts = append(texts, codePointTexts(r, 300)...)
			var idLists [][]int
			for range 200 {
				ids := make([]int, r.IntN(20))
				for i := range ids {
					if r.IntN(3) == 0 {
						ids[i] = 3 + r.IntN(256) // byte tokens in the Metaspace families
					} else {
						ids[i] = r.IntN(tok.VocabSize() + 2)
					}
				}
				idLists = append(idLists, ids)
			}
			in, _ := json.Marshal(map[string]any{"texts": texts, "ids": idLists})
			cmd := exec.Command(py, "testdata/reference.py", "encode", path)
			cmd.Stdin = bytes.NewReader(in)
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("reference.py encode: %v", err)
			}
			var ref struct {
				Texts []refText `json:"texts"`
				IDs   []refIDs  `json:"ids"`
			}
			if err := json.Unmarshal(out, &ref); err != nil {
				t.Fatal(err)
			}
			if len(ref.Texts) != len(texts) || len(ref.IDs) != len(idLists) {
				t.Fatalf("reference answered %d/%d cases", len(ref.Texts), len(ref.IDs))
			}
			bad := 0
			fail := func(format string, a ...any) {
				bad++
				if bad <= 15 {
					t.Errorf(format, a...)
				}
			}
			for i, text := range texts {
				want := ref.Texts[i]
				with, err := tok.Encode(text, true)
				if err != nil {
					t.Fatal(err)
				}
				without, err := tok.Encode(text, false)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(with, want.With) {
					fail("Encode(%q, true)\n got %v\nwant %v", text, with, want.With)
				}
				if !slices.Equal(without, want.Without) {
					fail("Encode(%q, false)\n got %v\nwant %v", text, without, want.Without)
				}
				if d, _ := tok.Decode(want.With, false); d != want.Decode {
					fail("Decode(%v, false) of %q\n got %q\nwant %q", want.With, text, d, want.Decode)
				}
				if d, _ := tok.Decode(want.With, true); d != want.DecodeSkip {
					fail("Decode(%v, true) of %q\n got %q\nwant %q", want.With, text, d, want.DecodeSkip)
				}
			}
			for i, ids := range idLists {
				if d, _ := tok.Decode(ids, false); d != ref.IDs[i].Decode {
					fail("Decode(%v, false)\n got %q\nwant %q", ids, d, ref.IDs[i].Decode)
				}
				if d, _ := tok.Decode(ids, true); d != ref.IDs[i].DecodeSkip {
					fail("Decode(%v, true)\n got %q\nwant %q", ids, d, ref.IDs[i].DecodeSkip)
				}
			}
			if bad > 0 {
				t.Errorf("%d mismatches in %d texts and %d id lists", bad, len(texts), len(idLists))
			}
			t.Logf("%d texts and %d id lists identical to tokenizers", len(texts), len(idLists))
		})
	}
}

// TestNormalizersConform compares the Unicode normalizers with tokenizers'
// on every code point and on composing sequences.
func TestNormalizersConform(t *testing.T) {
	py := pyenv.Require(t, "tokenizers")
	extra := []string{"e\u0301", "a\u0308\u0301", "\u1100\u1161\u11a8", "\U00011935\U00011930",
		"a\u0301\u0316", "ﬁ\u0301", "Å", "\u2126", "①", "ｶﾞ", "x\U0001E038\u0301y", "\u0958"}
	in, _ := json.Marshal(extra)
	cmd := exec.Command(py, "testdata/reference.py", "normalize")
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reference.py normalize: %v", err)
	}
	var ref map[string]struct {
		Changed map[string]string `json:"changed"`
		Extra   []string          `json:"extra"`
	}
	if err := json.Unmarshal(out, &ref); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"NFC", "NFKC", "NFD", "NFKD"} {
		n, err := parseNormalizer(json.RawMessage(`{"type":"`+name+`"}`), "normalizer", &Limits{MaxDepth: 1, MaxTokenBytes: 16, MaxPatternLen: 16}, 0)
		if err != nil {
			t.Fatal(err)
		}
		r := ref[name]
		if len(r.Changed) < 1000 || len(r.Extra) != len(extra) {
			t.Fatalf("%s: reference answered %d code points, %d strings", name, len(r.Changed), len(r.Extra))
		}
		bad := 0
		for c := rune(0); c < 0x110000; c++ {
			if c >= 0xD800 && c <= 0xDFFF {
				continue
			}
			s := string(c)
			want, ok := r.Changed[strconv.Itoa(int(c))]
			if !ok {
				want = s
			}
			if got, _ := n.normalize(s); got != want {
				if bad++; bad <= 10 {
					t.Errorf("%s(U+%04X) = %q, tokenizers %q", name, c, got, want)
				}
			}
		}
		for i, s := range extra {
			if got, _ := n.normalize(s); got != r.Extra[i] {
				t.Errorf("%s(%q) = %q, tokenizers %q", name, s, got, r.Extra[i])
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d code points differ", name, bad)
		}
	}
}

// TestRegexClassesConform checks that the translated patterns give the
// character classes and case folding of the split patterns (\s, \p{L},
// \p{N}, (?i:'s...)) the meaning Oniguruma gives them in tokenizers, over
// every code point (the tables alone: TestOnigClassTables).
func TestRegexClassesConform(t *testing.T) {
	py := pyenv.Require(t, "tokenizers")
	var all, quoted strings.Builder
	for c := rune(0); c < 0x110000; c++ {
		if c >= 0xD800 && c <= 0xDFFF {
			continue
		}
		all.WriteRune(c)
		quoted.WriteString("'")
		quoted.WriteRune(c)
	}
	type tcase struct {
		Pattern  string `json:"pattern"`
		Text     string `json:"text"`
		Behavior string `json:"behavior"`
		Invert   bool   `json:"invert"`
	}
	cases := []tcase{
		{`[^\s\p{L}\p{N}]+`, all.String(), "removed", true},
		{`[^\r\n\p{L}\p{N}]?\p{L}+`, all.String(), "removed", true},
		{`(?i:'s|'t|'re|'ve|'m|'ll|'d)`, quoted.String(), "removed", true},
	}
	in, _ := json.Marshal(cases)
	cmd := exec.Command(py, "testdata/reference.py", "classes")
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reference.py classes: %v", err)
	}
	var ref [][]string
	if err := json.Unmarshal(out, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref) != len(cases) {
		t.Fatalf("reference answered %d cases", len(ref))
	}
	lim := DefaultLimits()
	for i, c := range cases {
		raw, _ := json.Marshal(map[string]any{"type": "Split", "pattern": map[string]string{"Regex": c.Pattern},
			"behavior": map[string]string{"removed": "Removed"}[c.Behavior], "invert": c.Invert})
		p, err := parsePreTokenizer(raw, "pre_tokenizer", &lim, 0)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := p.preTokenize([]piece{{s: c.Text, atStart: true}})
		if err != nil {
			t.Fatal(err)
		}
		got := make([]string, len(ps))
		for j := range ps {
			got[j] = ps[j].s
		}
		if len(ref[i]) < 5 {
			t.Fatalf("%s: reference made only %d pieces", c.Pattern, len(ref[i]))
		}
		if !slices.Equal(got, ref[i]) {
			n := 0
			for j := 0; j < min(len(got), len(ref[i])) && n < 5; j++ {
				if got[j] != ref[i][j] {
					t.Errorf("%s: piece %d = %+q, tokenizers %+q", c.Pattern, j, got[j], ref[i][j])
					n++
				}
			}
			t.Errorf("%s: %d pieces, tokenizers %d", c.Pattern, len(got), len(ref[i]))
		}
	}
}
