"""Reference side of the tokenizer conformance test (tokenizer_test.go).

  python reference.py train DIR
      trains, with the Hugging Face `tokenizers` library, one tokenizer of each
      family the Go package supports on a generated corpus and writes
      DIR/<name>.json.
  python reference.py classes < cases.json > out.json
      the pieces a Split pre-tokenizer makes of each case's text.
  python reference.py tables < classes.json > out.json
      the code point ranges of each named regex class.
  python reference.py normalize < strings.json > out.json
      NFC, NFKC, NFD and NFKD of every code point, and of the given strings.
  python reference.py encode TOKENIZER.json < cases.json > out.json
      cases.json: {"texts": [...], "ids": [[...], ...]}. For each text, the
      ids with and without special tokens and their decodings; for each id
      list, its decoding with and without skip_special_tokens.

Nothing is downloaded: the corpus is made here from a fixed seed.
"""

import json
import random
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
          r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
         r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

WORDS = ("the of and to in is was for on that with as by at from it this be are "
         "hello world model token train gradient value number answer question "
         "don't it's we're they've I'm you'll she'd THE Hello World Don'T").split()
UNI = ["café", "naïve", "über", "Straße", "résumé", "señor", "Ωmega", "Привет", "мир",
       "日本語", "中文字符", "한국어", "नमस्ते", "مرحبا", "שלום", "ελληνικά", "😀", "🚀🚀",
       "👍🏽", "👨‍👩‍👧", "ﬁ", "①②", "Ⅻ", "ｆｕｌｌ", "e\u0301", "Å"]
PUNCT = [".", ",", "!", "?", "...", "--", "(", ")", "{", "}", "[x]", "#", "$", "%", "&&", "->",
         "::", "'", "\"", "`", "~", "@", "*", "/", "\\", "|", "<", ">", "=="]


def corpus(n=4000, seed=1):
    r = random.Random(seed)
    out = []
    for _ in range(n):
        parts = []
        for _ in range(r.randint(3, 25)):
            x = r.random()
            if x < 0.55:
                parts.append(r.choice(WORDS))
            elif x < 0.7:
                parts.append(r.choice(UNI))
            elif x < 0.85:
                parts.append(str(r.randint(0, 10 ** r.randint(1, 9))))
            else:
                parts.append(r.choice(PUNCT))
        sep = r.choice([" ", " ", " ", "  ", "\n", "\t", " \n"])
        out.append(sep.join(parts))
    return out


def alphabet_bytelevel():
    return pre_tokenizers.ByteLevel.alphabet()


def train_bytelevel(name, pre, normalizer=None, post=None, ignore_merges=False, vocab=3000,
                    specials=("<|begin_of_text|>", "<|end_of_text|>")):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=vocab, min_frequency=1, show_progress=False,
                             initial_alphabet=alphabet_bytelevel(), special_tokens=list(specials))
    tok.train_from_iterator(corpus(), tr)
    if post is not None:
        tok.post_processor = post(tok)
    return tok


def llama3():
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])

    def post(tok):
        bos = tok.token_to_id("<|begin_of_text|>")
        return processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single="<|begin_of_text|> $A",
                pair="<|begin_of_text|> $A <|begin_of_text|>:1 $B:1",
                special_tokens=[("<|begin_of_text|>", bos)]),
        ])
    tok = train_bytelevel("llama3", pre, post=post, ignore_merges=True)
    tok.add_special_tokens(["<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>"])
    # Added tokens that are not special, with the options the families use.
    tok.add_tokens([AddedToken("<tool_call>", special=False, normalized=False),
                    AddedToken("<|start", special=False, normalized=False),
                    AddedToken("<lstrip>", special=False, normalized=False, lstrip=True),
                    AddedToken("<rstrip>", special=False, normalized=False, rstrip=True),
                    AddedToken("word", special=False, normalized=False, single_word=True)])
    return tok


def qwen2():
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok = train_bytelevel("qwen2", pre, normalizer=normalizers.NFC(),
                          post=lambda tok: processors.ByteLevel(trim_offsets=False),
                          specials=("<|endoftext|>",))
    tok.add_special_tokens(["<|im_start|>", "<|im_end|>"])
    tok.add_tokens([AddedToken("<think>", special=False, normalized=True)])
    return tok


def gpt2():
    pre = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    return train_bytelevel("gpt2", pre, post=lambda tok: processors.ByteLevel(trim_offsets=True),
                           specials=("<|endoftext|>",))


def smollm():
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    return train_bytelevel("smollm", pre, specials=("<|endoftext|>", "<|im_start|>", "<|im_end|>"))


def metaspace_model(prepend_scheme):
    """A Llama-2 layout BPE: <unk> <s> </s>, then the 256 <0xNN> byte tokens, then the merges'
    tokens, trained with a Metaspace pre-tokenizer."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme=prepend_scheme)
    tr = trainers.BpeTrainer(vocab_size=1500, min_frequency=1, show_progress=False,
                             special_tokens=["<unk>", "<s>", "</s>"])
    tok.train_from_iterator(corpus(), tr)
    d = json.loads(tok.to_str())
    old = sorted(d["model"]["vocab"].items(), key=lambda kv: kv[1])
    vocab = {}
    for tokstr, i in old[:3]:
        vocab[tokstr] = i
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for tokstr, _ in old[3:]:
        if tokstr not in vocab:
            vocab[tokstr] = len(vocab)
    d["model"]["vocab"] = vocab
    return d


def llama2():
    d = metaspace_model("first")
    d["pre_tokenizer"] = None
    d["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
    d["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    d["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                   {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                 {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "<s>", "type_id": 1}},
                 {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
    # merges as "a b" strings, the older form
    d["model"]["merges"] = [" ".join(m) for m in d["model"]["merges"]]
    tok = Tokenizer.from_str(json.dumps(d))
    tok.add_tokens([AddedToken("<tool>", special=False, normalized=True)])
    return tok


def mistral():
    d = metaspace_model("first")
    d["normalizer"] = {"type": "NFKC"}
    d["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first",
                          "split": False}
    d["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "ByteFallback"},
        {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False},
        {"type": "Fuse"}]}
    tok = Tokenizer.from_str(json.dumps(d))
    tok.add_special_tokens(["[INST]", "[/INST]"])
    return tok


def metaspace_split():
    d = metaspace_model("always")
    d["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always",
                          "split": True}
    d["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
        {"type": "ByteFallback"}, {"type": "Fuse"}]}
    return Tokenizer.from_str(json.dumps(d))


def misc_bytelevel():
    """Not a published family: the remaining normalizer and split options."""
    norm = normalizers.Sequence([
        normalizers.NFD(), normalizers.Replace(Regex(r"\p{Mn}"), ""), normalizers.Replace("\t", "  "),
        normalizers.NFC()])
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split("-", behavior="merged_with_previous"),
        pre_tokenizers.Split(Regex(r"[,;]"), behavior="removed"),
        pre_tokenizers.Split(Regex(r"\p{Lu}\p{Ll}*"), behavior="merged_with_next"),
        pre_tokenizers.Split(Regex(r"\s+"), behavior="contiguous", invert=True),
        pre_tokenizers.Digits(individual_digits=False),
        pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=False),
    ])
    tok = train_bytelevel("misc", pre, normalizer=norm, specials=("<bos>",))
    tok.add_tokens([AddedToken("Élan", special=False, normalized=True)])
    return tok


def misc_metaspace():
    d = metaspace_model("never")
    d["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "\\p{P}"}, "behavior": "Isolated", "invert": True},
        {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": True}]}
    # Strip panics in tokenizers on an empty token when stop > 0 and when
    # start and stop overlap, so the one with stop runs first (model tokens
    # are never empty) and each strips one side only.
    d["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "ByteFallback"},
        {"type": "Strip", "content": "e", "start": 0, "stop": 1},
        {"type": "Strip", "content": "x", "start": 2, "stop": 0},
        {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": True}]}
    d["model"]["fuse_unk"] = False
    d["model"]["byte_fallback"] = False
    return Tokenizer.from_str(json.dumps(d))


FAMILIES = {"llama3": llama3, "qwen2": qwen2, "gpt2": gpt2, "smollm": smollm,
            "llama2": llama2, "mistral": mistral, "metaspace_split": metaspace_split,
            "misc_bytelevel": misc_bytelevel, "misc_metaspace": misc_metaspace}


def main():
    if sys.argv[1] == "train":
        out = sys.argv[2]
        for name, make in FAMILIES.items():
            make().save("%s/%s.json" % (out, name))
    elif sys.argv[1] == "encode":
        tok = Tokenizer.from_file(sys.argv[2])
        cases = json.load(sys.stdin)
        res = {"texts": [], "ids": []}
        for t in cases["texts"]:
            with_sp = tok.encode(t, add_special_tokens=True).ids
            without = tok.encode(t, add_special_tokens=False).ids
            res["texts"].append({
                "with": with_sp, "without": without,
                "decode": tok.decode(with_sp, skip_special_tokens=False),
                "decode_skip": tok.decode(with_sp, skip_special_tokens=True)})
        for ids in cases["ids"]:
            res["ids"].append({"decode": tok.decode(ids, skip_special_tokens=False),
                               "decode_skip": tok.decode(ids, skip_special_tokens=True)})
        json.dump(res, sys.stdout, ensure_ascii=True)
    elif sys.argv[1] == "classes":
        # [{"pattern": P, "text": T, "behavior": B, "invert": I}]: the pieces
        # of a Split pre-tokenizer over T.
        res = []
        for c in json.load(sys.stdin):
            pre = pre_tokenizers.Split(Regex(c["pattern"]), behavior=c["behavior"], invert=c["invert"])
            res.append([p for p, _ in pre.pre_tokenize_str(c["text"])])
        json.dump(res, sys.stdout, ensure_ascii=True)
    elif sys.argv[1] == "tables":
        # The code point ranges Oniguruma (as tokenizers runs it) puts in
        # each class that pre-tokenizer patterns use.
        text = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
        res = {}
        for name, cls in json.load(sys.stdin).items():
            pre = pre_tokenizers.Split(Regex("[^%s]+" % cls), behavior="removed", invert=False)
            ranges = []
            for _, (a, b) in pre.pre_tokenize_str(text):
                lo, hi = ord(text[a]), ord(text[b - 1])
                if ranges and ranges[-1][1] + 1 == lo:
                    ranges[-1][1] = hi
                else:
                    ranges.append([lo, hi])
            res[name] = ranges
        json.dump(res, sys.stdout)
    elif sys.argv[1] == "normalize":
        # Every code point (surrogates excepted) that a normalizer changes,
        # then the given extra strings.
        extra = json.load(sys.stdin)
        res = {}
        for name, n in (("NFC", normalizers.NFC()), ("NFKC", normalizers.NFKC()),
                        ("NFD", normalizers.NFD()), ("NFKD", normalizers.NFKD())):
            changed = {}
            for c in range(0x110000):
                if 0xD800 <= c <= 0xDFFF:
                    continue
                s = chr(c)
                r = n.normalize_str(s)
                if r != s:
                    changed[str(c)] = r
            res[name] = {"changed": changed, "extra": [n.normalize_str(s) for s in extra]}
        json.dump(res, sys.stdout, ensure_ascii=True)
    else:
        raise SystemExit("usage: reference.py train DIR | encode TOKENIZER.json")


if __name__ == "__main__":
    main()
