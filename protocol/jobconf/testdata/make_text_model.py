# Writes a tiny random Qwen2ForCausalLM with transformers and a byte-level
# BPE tokenizer trained here with tokenizers on English arithmetic text
# ("Question: Tom has 12 apples ...") into the directory argv[1]: a base
# model with a real text tokenizer, as a user would bring one.
import sys

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import Qwen2Config, Qwen2ForCausalLM

out = sys.argv[1]
corpus = []
names = ["Tom", "Ana", "Lee", "Sam", "Mia"]
things = ["apples", "pencils", "books", "coins"]
for i in range(400):
    a, b = (7 * i) % 50, (13 * i) % 50
    n, t = names[i % 5], things[i % 4]
    corpus.append(f"Question: {n} has {a} {t} and gets {b} more. How many {t} does {n} have?\nAnswer: {a + b}")
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
                                                    initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
eos = tok.token_to_id("<|endoftext|>")
tok.save(out + "/tokenizer.json")

torch.manual_seed(0)
cfg = Qwen2Config(vocab_size=tok.get_vocab_size(), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                  initializer_range=0.2, tie_word_embeddings=False, eos_token_id=eos,
                  bos_token_id=None, pad_token_id=None)
Qwen2ForCausalLM(cfg).eval().save_pretrained(out, safe_serialization=True)
print(tok.get_vocab_size(), eos)
