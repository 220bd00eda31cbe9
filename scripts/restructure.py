#!/usr/bin/env python3
"""Moves the root's packages into domain folders (issue 36), once each.

Re-runnable: a move already made is skipped. For every move OLD -> NEW it
  - git-moves the directory;
  - rewrites Go import paths github.com/zooai/gym/OLD[/...] everywhere;
  - rewrites relative file references in Go files ("../docs/x.md",
    filepath.Join("..", "python")) that resolve to a file or directory of the
    repository, from the file's old place to its new one, through the moves;
  - rewrites path-like mentions (`OLD/`, ./OLD, OLD/file.go) in the docs,
    README, scripts, CI, deploy files, Python and Go comments.
Run from anywhere: scripts/restructure.py, then go build ./... && go vet ./...
"""

import os
import re
import subprocess
import sys

MODULE = "github.com/zooai/gym/"

MOVES = [
    # the node: what a GPU owner runs
    ("worker", "node/worker"), ("nodeclient", "node/nodeclient"), ("backend", "node/backend"),
    # the artifacts: content addressing, stores, transfer, the node's and
    # hanzod's cache of bases and datasets by CID
    ("basecache", "artifact/basecache"),
    # the protocol: what both sides compute and exchange
    ("jobconf", "protocol/jobconf"), ("jobspec", "protocol/jobspec"), ("delta", "protocol/delta"),
    ("ring", "protocol/ring"), ("merge", "protocol/merge"), ("nodeauth", "protocol/nodeauth"),
    ("trace", "protocol/trace"), ("tracecheck", "protocol/tracecheck"), ("checkpkg", "protocol/checkpkg"),
    ("evalpkg", "protocol/evalpkg"), ("verdict", "protocol/verdict"), ("attack", "protocol/attack"),
    ("hardware", "protocol/hardware"),
    # the model: the engine, training and what it trains on
    ("llama", "model/llama"), ("tokenizer", "model/tokenizer"), ("safetensors", "model/safetensors"),
    ("tensorname", "model/tensorname"), ("peft", "model/peft"), ("basemodel", "model/basemodel"),
    ("trainer", "model/trainer"), ("optim", "model/optim"), ("gspo", "model/gspo"),
    ("rollout", "model/rollout"), ("sft", "model/sft"), ("heldout", "model/heldout"),
    ("task", "model/task"), ("prng", "model/prng"), ("dataset", "model/dataset"),
    ("reward", "model/reward"), ("envserver", "model/envserver"), ("chat", "model/chat"),
    ("toolcall", "model/toolcall"), ("episode", "model/episode"), ("modelprobe", "model/modelprobe"),
    # the chain, keys, the local development network, utilities
    ("contracts", "chain/contracts"),
    ("edkey", "keys/edkey"), ("nodekey", "keys/nodekey"), ("release", "keys/release"),
    ("localcluster", "devnet/localcluster"), ("localchain", "devnet/localchain"),
    ("plot", "internal/plot"),
]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def mapped(rel: str) -> str:
    """The new repository-relative path of old path rel."""
    for old, new in MOVES:
        if rel == old or rel.startswith(old + "/"):
            return new + rel[len(old):]
    return rel


def unmapped(rel: str) -> str:
    """The old repository-relative path of new path rel."""
    for old, new in MOVES:
        if rel == new or rel.startswith(new + "/"):
            return old + rel[len(new):]
    return rel


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def tracked() -> list[str]:
    return [f for f in git("ls-files").splitlines() if os.path.isfile(os.path.join(ROOT, f))]


def move_dirs() -> list[tuple[str, str]]:
    done = []
    for old, new in MOVES:
        src, dst = os.path.join(ROOT, old), os.path.join(ROOT, new)
        if os.path.isdir(src) and not os.path.exists(dst):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            git("mv", old, new)
            done.append((old, new))
    return done


IMPORT = re.compile(r'"' + re.escape(MODULE) + r'([A-Za-z0-9_./-]+)"')


def fix_imports(text: str) -> str:
    return IMPORT.sub(lambda m: '"' + MODULE + mapped(m.group(1)) + '"', text)


REL_LIT = re.compile(r'"((?:\.\./)+[^"\s]*)"')
JOIN = re.compile(r'filepath\.Join\(((?:\s*"[^"]*"\s*,)+\s*"[^"]*"\s*)\)')


def exists_old(rel: str) -> bool:
    """Whether old repository path rel (perhaps a glob) names something."""
    rel = rel.split("*")[0].rstrip("/")
    return os.path.exists(os.path.join(ROOT, mapped(rel))) or os.path.exists(os.path.join(ROOT, rel))


def rewrite_rel(path_rel: str, old_dir: str, new_dir: str) -> str | None:
    target = os.path.normpath(os.path.join(old_dir, path_rel))
    if target.startswith(".."):
        return None
    if not exists_old(target):
        return None
    new_target = mapped(target)
    out = os.path.relpath(new_target, new_dir)
    if path_rel.endswith("/") and not out.endswith("/"):
        out += "/"
    return out


def fix_relative(text: str, new_file: str) -> str:
    new_dir = os.path.dirname(new_file)
    old_dir = os.path.dirname(unmapped(new_file))  # the same for a file that did not move

    def lit(m: re.Match) -> str:
        r = rewrite_rel(m.group(1), old_dir, new_dir)
        return m.group(0) if r is None or r == m.group(1) else '"' + r + '"'

    def join(m: re.Match) -> str:
        parts = re.findall(r'"([^"]*)"', m.group(1))
        k = 0
        while k < len(parts) and parts[k] == "..":
            k += 1
        if k == 0:
            return m.group(0)
        r = rewrite_rel("/".join(parts), old_dir, new_dir)
        if r is None:
            return m.group(0)
        new_parts = r.split("/")
        if new_parts == parts:
            return m.group(0)
        return "filepath.Join(" + ", ".join('"' + p + '"' for p in new_parts) + ")"

    text = JOIN.sub(join, text)
    return REL_LIT.sub(lit, text)


def mention_pattern() -> re.Pattern:
    olds = sorted((o for o, _ in MOVES), key=len, reverse=True)
    # a path-like mention: OLD/ or ./OLD at a boundary (not after a letter,
    # digit, '/', '-', '_' or '.': URLs, longer names and nested paths stay);
    # fix_mentions keeps only those followed by '/' or after './'
    return re.compile(r'(?<![A-Za-z0-9_./-])(\./)?(' + "|".join(map(re.escape, olds)) + r')\b')


TOKEN = re.compile(r'[A-Za-z0-9_./*-]*')


def fix_mentions(text: str, pat: re.Pattern) -> str:
    def sub(m: re.Match) -> str:
        dot, old = m.group(1) or "", m.group(2)
        if text[m.end():m.end() + 1] != "/" and not dot:
            return m.group(0)  # a bare word: a package name, not a path
        # only a mention of something that moved: the path, followed to
        # where it now is, must exist (api/'s `trainer/v1` is not trainer/)
        rest = TOKEN.match(text, m.end()).group(0).split("...")[0].split("*")[0].rstrip("./")
        if not os.path.exists(os.path.join(ROOT, mapped(old + rest))):
            return m.group(0)
        return dot + mapped(old)
    return pat.sub(sub, text)


def main() -> int:
    moved = move_dirs()
    for old, new in moved:
        print(f"moved {old} -> {new}")
    pat = mention_pattern()
    changed = 0
    for f in tracked():
        full = os.path.join(ROOT, f)
        if f.startswith("scripts/restructure.py") or "/testdata/" in f or f.startswith("python/gym_protocol/_proto/"):
            continue
        try:
            text = open(full, encoding="utf-8").read()
        except (UnicodeDecodeError, OSError):
            continue
        new = text
        if f.endswith(".go") or f == "go.mod":
            new = fix_imports(new)
            new = fix_relative(new, f)
            # comments and strings naming files: `worker/worker.go` and the like
            new = "\n".join(fix_mentions(line, pat) if line.lstrip().startswith("//") else line for line in new.split("\n"))
        elif f.endswith((".md", ".sh", ".py", ".yml", ".yaml", ".txt", ".toml")) or "/" not in f or f.startswith((".ci/", "deploy/", "scripts/")):
            new = fix_mentions(new, pat)
        if new != text:
            open(full, "w", encoding="utf-8").write(new)
            changed += 1
    print(f"{changed} files rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
