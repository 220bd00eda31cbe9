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
