# One rank of the gloo baseline of `gym ring bench --baseline gloo`
# (embedded in the gym binary, run with /usr/bin/python3 -c). Adapted from
# the anchor benchmark ../shared/bench/torch_allreduce.py: per size, W
# warm-up and K timed calls, each a dist.barrier() then one timed
# dist.all_reduce(SUM) with the gloo backend over TCP. Inputs are the same
# integer-valued vectors as the Go nodes' (ringbench.input), and the result
# is compared exactly with the expected sum after every call.
#
# argv: RANK WORLD MASTER_ADDR MASTER_PORT IFNAME WARMUP ITERS SIZE[,SIZE...]
# stdout: one JSON line per size, {"bytes", "seconds": [K floats], "correct"}
# (the Go parent takes the maximum over ranks and the median over calls).
import datetime
import json
import os
import sys
import time

rank, world = int(sys.argv[1]), int(sys.argv[2])
addr, port, ifname = sys.argv[3], int(sys.argv[4]), sys.argv[5]
warmup, iters = int(sys.argv[6]), int(sys.argv[7])
sizes = [int(s) for s in sys.argv[8].split(",")]
os.environ["GLOO_SOCKET_IFNAME"] = ifname

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

dist.init_process_group(backend="gloo", init_method="tcp://%s:%d" % (addr, port),
                        rank=rank, world_size=world, timeout=datetime.timedelta(seconds=600))


def inp(r, n):
    j = torch.arange(n, dtype=torch.int64)
    return ((r * 131 + j * 7) % 17 - 8).to(torch.float32)


for nbytes in sizes:
    n = nbytes // 4
    orig = inp(rank, n)
    want = torch.zeros(n, dtype=torch.float32)
    for r in range(world):
        want += inp(r, n)
    t = torch.empty(n, dtype=torch.float32)
    secs, ok = [], True
    for it in range(warmup + iters):
        t.copy_(orig)
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        dt = time.perf_counter() - t0
        if it >= warmup:
            secs.append(dt)
        ok = ok and bool(torch.equal(t, want))
    print(json.dumps({"bytes": nbytes, "seconds": secs, "correct": ok}), flush=True)
    del t, orig, want
dist.barrier()
dist.destroy_process_group()
