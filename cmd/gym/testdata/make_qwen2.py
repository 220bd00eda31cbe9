# Writes a tiny random Qwen2ForCausalLM with transformers, and a
# character-level byte-level BPE tokenizer over the built-in tasks'
# characters ("^0123456789+=:", ids 0..13, "<|endoftext|>" 14) built with
# tokenizers, into the directory argv[1]: a base model as a user would
# bring one (config.json, model.safetensors, tokenizer.json).
import sys

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import Qwen2Config, Qwen2ForCausalLM

out = sys.argv[1]
chars = "^0123456789+=:"
tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(chars)}, merges=[]))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
tok.decoder = decoders.ByteLevel()
tok.add_special_tokens(["<|endoftext|>"])
assert tok.token_to_id("<|endoftext|>") == len(chars)
assert tok.encode("^23+58=").ids == [0, 3, 4, 11, 6, 9, 12]
tok.save(out + "/tokenizer.json")

torch.manual_seed(0)
cfg = Qwen2Config(vocab_size=len(chars) + 1, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                  initializer_range=0.2, tie_word_embeddings=False, eos_token_id=len(chars),
                  bos_token_id=None, pad_token_id=None)
model = Qwen2ForCausalLM(cfg).eval()
model.save_pretrained(out, safe_serialization=True)
