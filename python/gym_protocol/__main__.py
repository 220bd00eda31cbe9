"""``python -m gym_protocol``: delta files in pure Python, and a worker from the seeds' variables."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from gym_protocol import __version__
from gym_protocol import delta as gd


def _pack(a: argparse.Namespace) -> int:
    from safetensors import safe_open

    flags = gd.FLAG_LORA if a.kind == "lora" else gd.FLAG_FULL
    w = gd.DeltaWriter(a.out, a.key, compression=a.compression, flags=flags)
    with safe_open(a.input, framework="pt") as f:
        for name in f.keys():
            w.add_tensor(name, f.get_tensor(name))
    meta = json.loads(a.meta) if a.meta else None
    if meta is not None and not isinstance(meta, dict):
        raise gd.MetadataError("--meta must be a JSON object")
    info = w.write_delta(meta)
    print(f"{info.path}: {info.size} bytes, {len(w.tensors)} tensors, signer {info.pubkey}, digest {info.digest}")
    return 0


def _limits(a: argparse.Namespace) -> gd.Limits:
    return gd.Limits(max_tensor_bytes=a.max_tensor_bytes, max_total_bytes=a.max_total_bytes,
                     max_window_bytes=a.max_window_bytes)


def _verify(a: argparse.Namespace) -> int:
    bad = 0
    for path in a.files:
        try:
            gd.read_delta(path, pubkey=a.pubkey, limits=_limits(a))
        except (gd.DeltaError, OSError) as e:
            bad += 1
            print(f"{path}: {e}")
    return 1 if bad else 0


def _inspect(a: argparse.Namespace) -> int:
    try:
        d = gd.read_delta(a.file, limits=_limits(a))
    except gd.DeltaError as e:
        if a.json:
            print(json.dumps({"file": a.file, "valid": False, "error": str(e), "sentinel": e.sentinel}))
        else:
            print(f"{a.file}: {e}")
        return 1
    tensors = [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape), "bytes": len(t.data)} for t in d.tensors]
    if a.json:
        print(json.dumps({"file": a.file, "valid": True, "compression": d.compression, "flags": d.flags,
                          "pubkey": d.pubkey_hex, "digest": d.digest.hex(), "size": d.size,
                          "metadata": d.metadata, "tensors": tensors}))
        return 0
    print(f"file         {a.file}\nvalid        yes\ncompression  {d.compression}\nflags        {d.flags:#04x}\n"
          f"signer       {d.pubkey_hex}\ndigest       {d.digest.hex()}\n"
          f"metadata     {json.dumps(d.metadata, sort_keys=True) if d.metadata is not None else '-'}\n"
          f"tensors      {len(tensors)}")
    for t in tensors:
        print(f"  {t['name']:<40} {t['dtype']:<5} {str(t['shape']):<18} {t['bytes']}")
    return 0


def _worker_start(a: argparse.Namespace) -> int:
    from gym_protocol.client import default_data_dir, find_gym
    from gym_protocol.config import WorkerConfig

    cfg = WorkerConfig.from_env()
    gym = find_gym(a.gym)
    cmd = [str(gym), "worker", "--data", str(a.data or default_data_dir()), *cfg.worker_args()]
    if a.model_dir:
        cmd += ["--model-dir", a.model_dir]
    extra = list(a.args)
    if extra and extra[0] == "--":
        extra = extra[1:]
    cmd += extra
    if a.dry_run:
        print(" ".join(cmd))
        return 0
    sys.stdout.flush()
    os.execve(cmd[0], cmd, cfg.worker_env())
    return 1  # not reached


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m gym_protocol", description=(
        "Zoo Gym for GPU owners. 'delta' packs, verifies and inspects signed delta files in pure Python "
        "(docs/delta-format.md); 'worker start' runs gym worker configured by the seeds' variables "
        "(MODEL_NAME, USE_4BIT, IMPORTANCE_SAMPLING_LEVEL, GSPO_BETA, LORA_RANK, ORCHESTRATOR_URL)."))
    p.add_argument("--version", action="version", version=f"gym_protocol {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("delta", help="pack, verify and inspect delta files")
    dsub = d.add_subparsers(dest="delta_command", required=True)
    lim = argparse.ArgumentParser(add_help=False)
    dl = gd.Limits()
    lim.add_argument("--max-tensor-bytes", type=int, default=dl.max_tensor_bytes, help="refuse a larger tensor")
    lim.add_argument("--max-total-bytes", type=int, default=dl.max_total_bytes, help="refuse larger files")
    lim.add_argument("--max-window-bytes", type=int, default=dl.max_window_bytes,
                     help="refuse a Zstandard frame with a larger window")

    pk = dsub.add_parser("pack", help="make a signed delta from a safetensors file")
    pk.add_argument("--key", required=True, help="node key file (gym keygen)")
    pk.add_argument("--compression", choices=["none", "lz4", "zstd"], default="lz4")
    pk.add_argument("--kind", choices=["lora", "full"], default="lora")
    pk.add_argument("--meta", help="metadata, a JSON object (job, epoch, step, node, …)")
    pk.add_argument("input", help="IN.safetensors")
    pk.add_argument("out", help="OUT.delta")
    pk.set_defaults(func=_pack)

    vf = dsub.add_parser("verify", parents=[lim], help="check delta files completely; exit 1 if any is bad")
    vf.add_argument("--pubkey", help="require this signer (64 hex characters)")
    vf.add_argument("files", nargs="+")
    vf.set_defaults(func=_verify)

    ins = dsub.add_parser("inspect", parents=[lim], help="show a delta's header, metadata and tensors")
    ins.add_argument("--json", action="store_true", help="one JSON object")
    ins.add_argument("file")
    ins.set_defaults(func=_inspect)

    w = sub.add_parser("worker", help="run a gym worker")
    wsub = w.add_subparsers(dest="worker_command", required=True)
    ws = wsub.add_parser("start", help="run gym worker in the foreground, configured by the seeds' variables",
                         description="Runs 'gym worker --data DIR' with the flags MODEL_NAME, IMPORTANCE_SAMPLING_LEVEL, "
                                     "GSPO_BETA, LORA_RANK and ORCHESTRATOR_URL mean, and USE_4BIT in its environment. "
                                     "Arguments after -- go to gym worker as they are.")
    ws.add_argument("--data", help="the worker's directory (default $GYM_DATA, else ~/.local/share/gym-worker)")
    ws.add_argument("--model-dir", help="the base model, a Hugging Face directory (default: gym's built-in one)")
    ws.add_argument("--gym", help="the gym binary (default $GYM_BIN, else gym on PATH)")
    ws.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    ws.add_argument("args", nargs=argparse.REMAINDER, help="-- then more gym worker flags")
    ws.set_defaults(func=_worker_start)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    a = parser().parse_args(argv)
    try:
        return int(a.func(a))
    except BrokenPipeError:  # the reader of our output went away (| head)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (gd.DeltaError, OSError, ValueError) as e:
        print(f"gym_protocol: {e}", file=sys.stderr)
        return 1
    except RuntimeError as e:
        # client.GymError (no gym binary, a gym command that failed) and
        # config errors: a sentence saying what to do, not a traceback.
        from gym_protocol.client import GymError

        if not isinstance(e, GymError):
            raise
        print(f"gym_protocol: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
