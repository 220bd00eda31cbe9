package tokenizer

import (
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zooai/gym/internal/pyenv"
)

// BenchmarkEncode measures encoding throughput (bytes/s) of mixed text with
// the tokenizers trained by testdata/reference.py (the word cache warm
// after the first iteration, as in use).
func BenchmarkEncode(b *testing.B) {
	py := pyenv.Require(b, "tokenizers")
	dir := b.TempDir()
	if out, err := exec.Command(py, "testdata/reference.py", "train", dir).CombinedOutput(); err != nil {
		b.Fatalf("%v\n%s", err, out)
	}
	text := strings.Join(randomTexts(rand.New(rand.NewPCG(1, 2)), 2000), "\n")
	for _, fam := range []string{"llama3", "llama2"} {
		tok, err := Load(filepath.Join(dir, fam+".json"))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fam, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				if _, err := tok.Encode(text, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParseLarge parses a byte-level tokenizer.json of Llama-3 size
// (128,000 tokens, 127,744 merges) made here.
func BenchmarkParseLarge(b *testing.B) {
	m := byteLevelJSON()
	model := m["model"].(map[string]any)
	vocab := model["vocab"].(map[string]any)
	toks := make([]string, 0, len(vocab))
	for k := range vocab {
		toks = append(toks, k)
	}
	r := rand.New(rand.NewPCG(3, 4))
	var merges []any
	for len(vocab) < 128000 {
		a, c := toks[r.IntN(len(toks))], toks[r.IntN(len(toks))]
		if len(a)+len(c) > 24 {
			continue
		}
		if _, ok := vocab[a+c]; ok {
			continue
		}
		vocab[a+c] = len(vocab)
		toks = append(toks, a+c)
		merges = append(merges, []any{a, c})
	}
	model["merges"] = merges
	added := m["added_tokens"].([]any)
	added[0].(map[string]any)["id"] = len(vocab)
	added[1].(map[string]any)["id"] = len(vocab) + 1
	pp := m["post_processor"].(map[string]any)["processors"].([]any)[1].(map[string]any)
	pp["special_tokens"].(map[string]any)["<|begin_of_text|>"].(map[string]any)["ids"] = []any{len(vocab)}
	data := mustJSON(b, m)
	b.SetBytes(int64(len(data)))
	b.ReportMetric(float64(len(data))/1e6, "file-MB")
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}
