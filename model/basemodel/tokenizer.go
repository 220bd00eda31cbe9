package basemodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/zooai/gym/model/task"
)

// EOS is the built-in tokenizer's end-of-text token, a special added token
// with the id after the task characters'.
const EOS = "<|endoftext|>"

// EOSID is EOS's id.
const EOSID = task.VocabSize

// byteLevelChar is the character the ByteLevel pre-tokenizer of the
// tokenizers library (GPT-2's bytes_to_unicode) maps byte b to.
func byteLevelChar(b byte) rune {
	if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE {
		return rune(b)
	}
	n := 0
	for c := 0; c < int(b); c++ {
		cb := byte(c)
		if !((cb >= '!' && cb <= '~') || (cb >= 0xA1 && cb <= 0xAC) || cb >= 0xAE) {
			n++
		}
	}
	return rune(256 + n)
}

// TokenizerJSON returns the built-in tokenizer.json: a byte-level BPE (the
// layout of GPT-2, Llama 3 and Qwen tokenizers) whose vocabulary is the
// task characters, task.Vocab, each with its task id ('^' = 0 … ':' = 13),
// with no merges, so every character is one token and the ids of task text
// are task.Encode's; plus EOS as a special added token. Characters outside
// the vocabulary have no token and are dropped, as the tokenizers library
// drops them for a BPE without unk_token.
func TokenizerJSON() []byte {
	var vocab bytes.Buffer
	vocab.WriteString("{")
	for i := range len(task.Vocab) {
		tok, _ := json.Marshal(string(byteLevelChar(task.Vocab[i])))
		fmt.Fprintf(&vocab, "\n      %s: %d,", tok, i)
	}
	eos, _ := json.Marshal(EOS)
	fmt.Fprintf(&vocab, "\n      %s: %d\n    }", eos, EOSID)
	byteLevel := json.RawMessage(`{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}`)
	type added struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	type bpe struct {
		Type                    string          `json:"type"`
		Dropout                 *float64        `json:"dropout"`
		UnkToken                *string         `json:"unk_token"`
		ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
		FuseUnk                 bool            `json:"fuse_unk"`
		ByteFallback            bool            `json:"byte_fallback"`
		IgnoreMerges            bool            `json:"ignore_merges"`
		Vocab                   json.RawMessage `json:"vocab"`
		Merges                  []string        `json:"merges"`
	}
	doc := struct {
		Version       string          `json:"version"`
		Truncation    any             `json:"truncation"`
		Padding       any             `json:"padding"`
		AddedTokens   []added         `json:"added_tokens"`
		Normalizer    any             `json:"normalizer"`
		PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
		PostProcessor json.RawMessage `json:"post_processor"`
		Decoder       json.RawMessage `json:"decoder"`
		Model         bpe             `json:"model"`
	}{
		Version:       "1.0",
		AddedTokens:   []added{{ID: EOSID, Content: EOS, Special: true}},
		PreTokenizer:  byteLevel,
		PostProcessor: json.RawMessage(`{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true}`),
		Decoder:       byteLevel,
		Model:         bpe{Type: "BPE", Vocab: vocab.Bytes(), Merges: []string{}},
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		panic(err) // fixed values: cannot fail
	}
	return b.Bytes()
}

// TokenizerConfigJSON returns the built-in tokenizer_config.json, what
// transformers' AutoTokenizer needs besides tokenizer.json: the fast
// tokenizer class, the end-of-text token, and the context length.
func TokenizerConfigJSON(maxPositions int) []byte {
	return []byte(`{
  "add_bos_token": false,
  "add_eos_token": false,
  "clean_up_tokenization_spaces": false,
  "eos_token": ` + strconv.Quote(EOS) + `,
  "model_max_length": ` + strconv.Itoa(maxPositions) + `,
  "tokenizer_class": "PreTrainedTokenizerFast"
}
`)
}
