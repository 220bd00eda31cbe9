# Writes a tiny random Qwen2ForCausalLM with a chat template into the
# directory argv[1]: a byte-level BPE tokenizer trained here with tokenizers
# (with Qwen's special tokens <|endoftext|>, <|im_start|>, <|im_end|>), and a
# tokenizer_config.json holding Qwen2.5-Instruct's published chat template
# (argv[2], from chat/testdata/templates), as an instruct model comes.
#
#   python make_chat_model.py DIR TEMPLATE            build the model
#   python make_chat_model.py --ids DIR < rows.json   each conversation's
#       apply_chat_template(messages, add_generation_prompt=True) ids
import json
import sys

if sys.argv[1] == "--ids":
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(sys.argv[2])
    out = [list(tok.apply_chat_template(m, add_generation_prompt=True, tokenize=True, return_dict=False))
           for m in json.load(sys.stdin)]
    json.dump(out, sys.stdout)
    sys.exit(0)

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import Qwen2Config, Qwen2ForCausalLM

out, template = sys.argv[1], open(sys.argv[2], encoding="utf-8").read()
corpus = []
for i in range(400):
    a, b = (7 * i) % 50, (13 * i) % 50
    corpus.append(f"<|im_start|>system\nYou are a careful calculator.<|im_end|>\n<|im_start|>user\n"
                  f"What is {a} plus {b}?<|im_end|>\n<|im_start|>assistant\n{a + b}<|im_end|>\n")
tok = Tokenizer(models.BPE())
# Qwen2's own pre-tokenizer (transformers builds a Qwen2 model's tokenizer
# with it whatever tokenizer.json says).
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
         r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2), behavior="isolated"),
                                             pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
tok.decoder = decoders.ByteLevel()
tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                                    initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
eos = tok.token_to_id("<|im_end|>")
tok.save(out + "/tokenizer.json")
with open(out + "/tokenizer_config.json", "w", encoding="utf-8") as f:
    json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": None, "eos_token": "<|im_end|>",
               "pad_token": "<|endoftext|>", "chat_template": template}, f, ensure_ascii=False, indent=2)

torch.manual_seed(0)
cfg = Qwen2Config(vocab_size=tok.get_vocab_size(), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                  initializer_range=0.2, tie_word_embeddings=False, eos_token_id=eos,
                  bos_token_id=None, pad_token_id=None)
Qwen2ForCausalLM(cfg).eval().save_pretrained(out, safe_serialization=True)
print(tok.get_vocab_size(), eos)
