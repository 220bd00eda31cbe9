"""Reference side of the chat template parity test (parity_test.go).

  python reference.py build DIR
      writes one model directory per family under DIR: a byte-level BPE
      tokenizer.json trained here with the `tokenizers` library (with the
      family's special tokens), a tokenizer_config.json, and the family's
      published chat template from testdata/templates (in
      tokenizer_config.json as a string, as a named list, or as
      chat_template.jinja, so every way transformers loads one is used).
  python reference.py render < cases.json > out.json
      cases.json: {"date": "YYYY-MM-DD", "models": [MODEL_DIR, ...],
      "cases": [{"messages": [...], "tools": [...] or null,
      "add_generation_prompt": bool, "kwargs": {...}}]}. For each model and
      case transformers' apply_chat_template with tokenize=False (the text)
      and tokenize=True (the ids), or the error it raised; and each
      tokenizer's special_tokens_map. strftime_now answers the given date.

Nothing is downloaded: the tokenizers are trained here from a fixed seed.
"""

import datetime as _dt
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
          r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

QWEN_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
QWEN_ADDED = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]
LLAMA_SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                 "<|eot_id|>", "<|eom_id|>", "<|python_tag|>"]
MISTRAL_SPECIAL = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
                   "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]"]

# name: (template file, how it is stored, special tokens, added non-special, config tokens)
FAMILIES = {
    "qwen2.5": ("Qwen-Qwen2.5-7B-Instruct.jinja", "config", QWEN_SPECIAL, QWEN_ADDED,
                {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}),
    "qwen3": ("Qwen-Qwen3-0.6B.jinja", "file", QWEN_SPECIAL, QWEN_ADDED,
              {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}),
    "llama3.1": ("meta-llama-Llama-3.1-8B-Instruct.jinja", "config", LLAMA_SPECIAL, [],
                 {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}),
    "llama3.2": ("meta-llama-Llama-3.2-3B-Instruct.jinja", "list", LLAMA_SPECIAL, [],
                 {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}),
    "mistral-nemo": ("mistralai-Mistral-Nemo-Instruct-2407.jinja", "config", MISTRAL_SPECIAL, [],
                     {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}),
    "mistral-small-3.2": ("Mistral-Small-3.2-24B-Instruct-2506.jinja", "file", MISTRAL_SPECIAL, [],
                          {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}),
}

WORDS = ("the of and to in is a you what weather city calculate expression result call tool "
         "function name arguments hello world paris tokyo sum number answer think step "
         "system user assistant json value true false null").split()


def corpus(seed=1, n=3000):
    r = random.Random(seed)
    out = []
    for _ in range(n):
        parts = []
        for _ in range(r.randint(3, 20)):
            x = r.random()
            if x < 0.6:
                parts.append(r.choice(WORDS))
            elif x < 0.75:
                parts.append(str(r.randint(0, 100000)))
            elif x < 0.9:
                parts.append(r.choice(['{"', '":', '", "', '"}', "[", "]", "\n\n", "\n", "<", ">", "|", "#"]))
            else:
                parts.append(r.choice(["café", "日本語", "😀", "Привет", "ñ", "€"]))
        out.append(" ".join(parts))
    return out


def build(root):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    for name, (tfile, how, special, added, toks) in FAMILIES.items():
        d = os.path.join(root, name)
        os.makedirs(d, exist_ok=True)
        tok = Tokenizer(models.BPE(ignore_merges=True))
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=1200, special_tokens=special,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
        tok.train_from_iterator(corpus(seed=len(name)), trainer)
        tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in added])
        tok.save(os.path.join(d, "tokenizer.json"))
        with open(os.path.join(HERE, "templates", tfile), encoding="utf-8") as f:
            template = f.read()
        cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 131072}
        cfg.update(toks)
        if how == "config":
            cfg["chat_template"] = template
        elif how == "list":
            cfg["chat_template"] = [{"name": "default", "template": template},
                                    {"name": "tool_use", "template": template}]
        else:
            with open(os.path.join(d, "chat_template.jinja"), "w", encoding="utf-8") as f:
                f.write(template)
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg, f, ensure_ascii=False, indent=2)


def render():
    import transformers
    from transformers.utils import chat_template_utils

    req = json.load(sys.stdin)
    fixed = _dt.datetime.strptime(req["date"], "%Y-%m-%d")

    class FixedDate(_dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return fixed

    chat_template_utils.datetime = FixedDate  # strftime_now reads the module's datetime when called
    models = []
    for model_dir in req["models"]:
        tok = transformers.AutoTokenizer.from_pretrained(model_dir)
        stm = {k: v for k, v in tok.special_tokens_map.items() if isinstance(v, str)}
        models.append({"results": render_cases(tok, req["cases"]), "special_tokens_map": stm})
    json.dump(models, sys.stdout, ensure_ascii=False)


def render_cases(tok, cases):
    out = []
    for c in cases:
        kw = dict(c.get("kwargs") or {})
        args = dict(tools=c.get("tools"), add_generation_prompt=c["add_generation_prompt"], **kw)
        try:
            text = tok.apply_chat_template(c["messages"], tokenize=False, **args)
            ids = tok.apply_chat_template(c["messages"], tokenize=True, return_dict=False, **args)
            out.append({"text": text, "ids": list(ids)})
        except Exception as e:  # the template's raise_exception, a missing attribute, ...
            out.append({"error": f"{type(e).__name__}: {e}"})
    return out


if __name__ == "__main__":
    if sys.argv[1] == "build":
        build(sys.argv[2])
    elif sys.argv[1] == "render":
        render()
    else:
        sys.exit("usage: reference.py build DIR | render < cases.json")
