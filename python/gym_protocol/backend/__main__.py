"""python -m gym_protocol.backend --socket PATH --exchange DIR: the torch trainer process."""

from __future__ import annotations

import argparse
import os
import stat
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m gym_protocol.backend",
        description="The torch training backend of a gym worker: serves zoo.gym.trainer.v1.TrainerService "
                    "(gRPC) on a Unix socket. A gym worker started with --backend torch runs this itself.")
    ap.add_argument("--socket", required=True, help="path of the Unix socket to listen on")
    ap.add_argument("--exchange", required=True,
                    help="the private directory (mode 0700, owned by this user) where tensors cross as safetensors files")
    ap.add_argument("--parent", type=int, default=0, help="exit when this process is no longer the parent")
    a = ap.parse_args(argv)
    try:
        st = os.stat(a.exchange)
    except OSError as e:
        print(f"gym_protocol.backend: exchange directory: {e}", file=sys.stderr)
        return 2
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        print(f"gym_protocol.backend: exchange directory {a.exchange} must be a directory owned by this user "
              "with mode 0700", file=sys.stderr)
        return 2
    from .service import serve  # imports torch: after the cheap checks

    serve(a.socket, a.exchange, a.parent)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
