"""GSPOTrainer's reading of a worker's events, without a cluster.

A worker's data directory and events file are made here (the node key, its
signed sync deltas, the JSON events `gym worker --json` prints) and a
trainer attaches to them: train_epoch sums exactly the accepted sync deltas
of the epoch, refuses a delta signed by another key or missing from the
directory, says why when hanzod rejected the whole epoch, and ends with
JobFinished.
"""

from __future__ import annotations

import json
import pathlib
import threading
import time

import numpy as np
import pytest

from gym_protocol import client, delta as gd
from gym_protocol.keys import SigningKey

JOB = "job-00000007"
NAMES = ["base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight",
         "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"]


def sync_delta(data: pathlib.Path, key: SigningKey, epoch: int, sync: int, seq: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    ts = {NAMES[0]: rng.standard_normal((4, 16)).astype(np.float32),
          NAMES[1]: rng.standard_normal((16, 4)).astype(np.float32)}
    w = gd.DeltaWriter(data / "deltas" / f"{JOB}-e{epoch}-s{sync}-{seq}.delta", key, compression="zstd")
    for n, t in ts.items():
        w.add_tensor(n, t)
    w.write_delta({"job": JOB, "epoch": epoch, "sync": sync, "step": 2 * sync, "node": key.public_hex,
                   "sequence": seq, "samples": 16, "claimed_loss": 0.25 * sync})
    return ts


def ev(kind: str, node: str, **kw: object) -> str:
    return json.dumps({"time": "2026-12-02T00:00:00Z", "kind": kind, "node": node, "job": JOB, **kw}) + "\n"


@pytest.fixture
def worker_dir(tmp_path: pathlib.Path, gym: pathlib.Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GYM_BIN", str(gym))
    for k in ("MODEL_NAME", "USE_4BIT", "LORA_RANK", "GSPO_BETA", "IMPORTANCE_SAMPLING_LEVEL", "ORCHESTRATOR_URL"):
        monkeypatch.delenv(k, raising=False)
    data = tmp_path / "w"
    (data / "deltas").mkdir(parents=True)
    key = SigningKey.from_seed(bytes(range(1, 33)))
    key.save(data / "node.key")
    (data / "events.jsonl").write_text(ev("registered", key.public_hex))  # before attaching: not replayed
    return data, key


def append_later(path: pathlib.Path, lines: list[str]) -> threading.Thread:
    def run() -> None:
        time.sleep(0.3)
        with open(path, "a") as f:
            for line in lines:  # each line in two writes: a reader may see half a line
                f.write(line[:10])
                f.flush()
                time.sleep(0.01)
                f.write(line[10:])
                f.flush()
    t = threading.Thread(target=run)
    t.start()
    return t


def test_attach_sums_accepted_syncs(worker_dir) -> None:
    data, key = worker_dir
    node = key.public_hex
    a = sync_delta(data, key, 1, 1, 11, 1)
    b = sync_delta(data, key, 1, 2, 12, 2)
    sync_delta(data, key, 1, 3, 13, 3)  # rejected by hanzod: not part of the epoch's update
    lines = [ev("epoch_started", node, epoch=1)]
    lines += [ev("step", node, epoch=1, sync=1, step=s, reward=r, loss=0.1) for s, r in ((1, 0.5), (2, 1.0))]
    lines += [ev("delta_submitted", node, epoch=1, sync=1, step=2, sequence=11, verdict="accepted"),
              ev("delta_submitted", node, epoch=1, sync=2, step=4, sequence=12, verdict="duplicate"),
              ev("delta_rejected", node, epoch=1, sync=3, step=6, sequence=13, verdict="rejected", reason="late"),
              ev("epoch_done", node, epoch=1),
              ev("job_done", node, state="published", epoch=1)]
    t = append_later(data / "events.jsonl", lines)
    tr = client.GSPOTrainer(data_dir=data, attach=data / "events.jsonl", start_timeout=5)
    try:
        assert tr.node == node
        e = tr.train_epoch(timeout=20)
        assert (e.job, e.epoch, e.node) == (JOB, 1, node)
        assert [p.name for p in e.files] == [f"{JOB}-e1-s1-11.delta", f"{JOB}-e1-s2-12.delta"]
        for n in NAMES:
            np.testing.assert_array_equal(e.tensors[n], (a[n].astype(np.float64) + b[n]).astype(np.float32))
        assert e.rewards == [0.5, 1.0] and e.quality_score() == 0.75 and e.samples == 32
        assert e.verdicts == ["accepted", "duplicate", "rejected"] and e.claimed_loss == 0.375
        # the epoch record: signed by the node, naming its syncs
        w = gd.DeltaWriter(data / "epoch1.delta")
        info = w.write_delta(e)
        d = gd.read_delta(info.path, pubkey=node)
        assert d.metadata["syncs"] == [gd.read_delta(p).digest.hex() for p in e.files]
        assert tr._sync_files(d.metadata) == [str(p) for p in e.files]
        with pytest.raises(client.JobFinished):
            tr.train_epoch(timeout=5)
    finally:
        t.join()
        tr.close()


def test_attach_refuses(worker_dir) -> None:
    data, key = worker_dir
    node = key.public_hex
    other = SigningKey.from_seed(bytes(32))
    sync_delta(data, other, 1, 1, 21, 1)  # a file in the directory signed by another key
    lines = [ev("delta_submitted", node, epoch=1, sync=1, step=2, sequence=21, verdict="accepted"),
             ev("epoch_done", node, epoch=1),
             ev("delta_submitted", node, epoch=2, sync=1, step=2, sequence=31, verdict="accepted"),  # no such file
             ev("epoch_done", node, epoch=2),
             ev("delta_rejected", node, epoch=3, sync=1, sequence=41, verdict="rejected", reason="metadata",
                detail="the job trains model x"),
             ev("epoch_done", node, epoch=3)]
    t = append_later(data / "events.jsonl", lines)
    tr = client.GSPOTrainer(data_dir=data, attach=data / "events.jsonl", start_timeout=5)
    try:
        with pytest.raises(gd.SignerError):
            tr.train_epoch(timeout=20)
        with pytest.raises(client.GymError, match="not in"):
            tr.train_epoch(timeout=20)
        with pytest.raises(client.GymError, match="rejected every delta.*metadata: the job trains model x"):
            tr.train_epoch(timeout=20)
        with pytest.raises(TimeoutError):
            tr.train_epoch(timeout=0.5)
    finally:
        t.join()
        tr.close()
