package tinyllama

import (
	"slices"
	"testing"
)

func TestTokenizerIsCharacterLevel(t *testing.T) {
	tok := Tokenizer()
	ids, err := tok.Encode("^23+58=180", true)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 3, 4, 11, 6, 9, 12, 2, 9, 1}; !slices.Equal(ids, want) {
		t.Fatalf("ids %v, want %v", ids, want)
	}
	s, err := tok.Decode(append(ids, EOS), true)
	if err != nil || s != "^23+58=180" {
		t.Fatalf("decode %q %v", s, err)
	}
	if tok.VocabSize() != Config().Vocab {
		t.Fatalf("vocabulary %d, config %d", tok.VocabSize(), Config().Vocab)
	}
	if _, err := Weights(Config(), 1, 0.5); err != nil {
		t.Fatal(err)
	}
}
