// Package tokenizer loads a Hugging Face tokenizer.json and encodes text to
// token ids and decodes ids to text exactly as the Rust `tokenizers` library
// does, for the BPE families the project trains:
//
//   - byte-level BPE (GPT-2, Llama 3, Qwen2, SmolLM): a ByteLevel
//     pre-tokenizer, alone or after a Split with the model's regular
//     expression, Digits, and the ByteLevel decoder;
//   - Metaspace BPE with byte fallback (Llama 2, Mistral): the normalizers
//     Prepend and Replace or a Metaspace pre-tokenizer, <0xNN> byte tokens,
//     and the decoders Replace, ByteFallback, Fuse, Strip and Metaspace.
//
// Added and special tokens are matched before the model (with their
// single_word, lstrip, rstrip and normalized options), NFC/NFKC/NFD/NFKD
// normalizers are applied, and the TemplateProcessing and ByteLevel
// post-processors add BOS-style tokens when asked to.
//
// The file is untrusted input: its size, vocabulary, merges and added tokens
// are bounded ([Limits]) before anything proportional is allocated, and
// anything it uses that this package does not implement is refused at load
// with an error naming the JSON path, e.g.
//
//	tokenizer.json: model.type "Unigram" not supported
//
// rather than being silently mis-tokenized. docs/tokenizer.md lists what is
// supported and how conformance with `tokenizers` is tested.
package tokenizer
