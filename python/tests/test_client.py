"""The seeds' client against a local cluster: hanzod, two gym workers and the trainer's own worker.

examples/python_client.py runs end to end on a model directory (gym's
built-in base, exported by the test): two epochs of a job it submits; each
epoch's delta is written, verified by gym, published into the worker's
store by CID and submitted to hanzod, which answers duplicate for every
sync delta the worker already delivered.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np

from gym_protocol import config, delta as gd

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_python_client_example(gym: pathlib.Path, cluster, tmp_path: pathlib.Path) -> None:
    # gym's built-in base, exported as a Hugging Face directory; named
    # builtin because a standalone hanzod judges deltas against its own
    # built-in base (bases named by CID come with the base-model-by-CID work)
    model = tmp_path / "models" / "builtin"
    subprocess.run([gym, "base", "export", model], check=True, capture_output=True)
    for i in range(2):
        cluster.worker(tmp_path / f"w{i}", "--model-dir", str(model))
    data = tmp_path / "me"
    data.mkdir()
    node = cluster.fund(data / "node.key")
    env = dict(os.environ, GYM_BIN=str(gym), ORCHESTRATOR_URL=cluster.addr)
    for k in ("MODEL_NAME", "USE_4BIT", "LORA_RANK", "GSPO_BETA", "IMPORTANCE_SAMPLING_LEVEL", "GYM_DATA"):
        env.pop(k, None)
    r = subprocess.run([sys.executable, REPO / "examples" / "python_client.py", "--model-dir", model, "--data", data,
                        "--out", tmp_path / "out", "--epochs", "2"], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr + (data / "worker.log").read_text(errors="replace")[-3000:]
    epochs = [json.loads(line) for line in r.stdout.splitlines()]
    assert [e["epoch"] for e in epochs] == [1, 2]
    for e in epochs:
        assert e["node"] == node and e["job"].startswith("job-")
        assert e["syncs"] == 2 and e["steps"] == 4 and 0 <= e["quality_score"] <= 1
        assert e["tensors"] > 0 and e["tensors"] % 2 == 0  # lora_A and lora_B of each target module
        assert e["cid"].startswith("bafk")
        # hanzod had every sync delta already: the worker delivered them
        assert [v["accepted"] and v["duplicate"] for v in e["verdicts"]] == [True, True]
        # the epoch record verifies with gym under the node's key
        subprocess.run([gym, "delta", "verify", "--pubkey", node, e["file"]], check=True)
        d = gd.read_delta(e["file"], pubkey=node)
        assert d.metadata["kind"] == "epoch" and d.metadata["epoch"] == e["epoch"]
        assert len(d.metadata["syncs"]) == 2 and d.metadata["samples"] > 0
        # and is the sum of the sync deltas it names
        syncs = sorted((data / "deltas").glob(f"{e['job']}-e{e['epoch']}-s*.delta"))
        assert [gd.read_delta(p).digest.hex() for p in syncs] == d.metadata["syncs"]
        for t in d.tensors:
            want = sum(gd.read_delta(p).tensor(t.name).numpy().astype(np.float64) for p in syncs)
            np.testing.assert_allclose(t.numpy(), want.astype(np.float32), rtol=0, atol=0)
        assert np.abs(d.tensors[0].numpy()).max() > 0
    # the node's account, through the client: staked as the fixture staked it
    from gym_protocol.client import GSPOTrainer

    tr = GSPOTrainer(data_dir=data, attach=data / "events.jsonl", orchestrator_url=cluster.addr, gym=gym)
    acct = tr.balance()
    tr.close()
    assert acct["account"] == node and acct["bonded"] >= 10000 * 10**6 and not acct["banned"], acct
    # the CID names the file in the worker's store: gym submits it by CID
    out = subprocess.run([gym, "--orchestrator", cluster.addr, "delta", "submit", "--key", data / "node.key", "--json",
                          "--store", data / "artifacts", epochs[0]["cid"]], capture_output=True, text=True)
    assert out.stdout.startswith("{"), out.stderr
    v = json.loads(out.stdout)
    # an epoch record is not a sync contribution: hanzod refuses it (the client sends its syncs instead)
    assert out.returncode == 1 and not v["accepted"] and v["reason"], out
    # the job ends its last epoch once every member delivered its last sync: the other workers may
    # still be finishing theirs when this client's worker is done (the last sync has no ring to
    # line them up), so wait for it, bounded
    deadline = time.monotonic() + 300
    while True:
        status = json.loads(cluster.run("job", "status", "--json", epochs[0]["job"]))
        if status["state"] != "running" or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert status["epoch"] == 2 and status["state"] in ("aggregating", "published"), status


def test_worker_config_from_env() -> None:
    c = config.WorkerConfig.from_env({"MODEL_NAME": "Qwen/Qwen3-2507", "USE_4BIT": "true",
                                      "IMPORTANCE_SAMPLING_LEVEL": "sequence", "GSPO_BETA": "0.1", "LORA_RANK": "16",
                                      "RING_POSITION": "3", "ORCHESTRATOR_URL": "grpcs://orch:9550"})
    assert c == config.WorkerConfig("Qwen/Qwen3-2507", True, "sequence", 0.1, 16, "grpcs://orch:9550", 3)
    assert c.worker_args() == ["--orchestrator", "grpcs://orch:9550", "--model", "Qwen/Qwen3-2507",
                               "--importance-sampling-level", "sequence", "--gspo-beta", "0.1", "--lora-rank", "16"]
    env = c.worker_env({"RING_POSITION": "3", "PATH": "/bin"})
    assert env == {"USE_4BIT": "true", "PATH": "/bin"}
    assert config.WorkerConfig.from_env({}, lora_rank=8).lora_rank == 8
    for bad in ({"USE_4BIT": "maybe"}, {"GSPO_BETA": "x"}, {"GSPO_BETA": "-1"}, {"GSPO_BETA": "nan"},
                {"LORA_RANK": "0"}, {"LORA_RANK": "1.5"}, {"IMPORTANCE_SAMPLING_LEVEL": "batch"}):
        try:
            config.WorkerConfig.from_env(bad)
        except config.ConfigError as e:
            assert next(iter(bad)) in str(e)
        else:
            raise AssertionError(f"{bad} accepted")


def test_cli(gym: pathlib.Path, node_key: tuple[pathlib.Path, str], tmp_path: pathlib.Path) -> None:
    py = [sys.executable, "-m", "gym_protocol"]
    assert "delta" in subprocess.run(py + ["--help"], check=True, capture_output=True, text=True).stdout
    from safetensors.torch import save_file
    import torch

    key, pub = node_key
    save_file({"a": torch.arange(6.0).reshape(2, 3), "b": torch.ones(4, dtype=torch.bfloat16)}, str(tmp_path / "a.st"))
    subprocess.run(py + ["delta", "pack", "--key", str(key), "--compression", "zstd", "--meta", '{"job":"j"}',
                         str(tmp_path / "a.st"), str(tmp_path / "a.delta")], check=True, capture_output=True)
    subprocess.run([gym, "delta", "verify", "--pubkey", pub, tmp_path / "a.delta"], check=True)
    assert subprocess.run(py + ["delta", "verify", "--pubkey", pub, str(tmp_path / "a.delta")]).returncode == 0
    info = json.loads(subprocess.run(py + ["delta", "inspect", "--json", str(tmp_path / "a.delta")], check=True,
                                     capture_output=True, text=True).stdout)
    assert info["pubkey"] == pub and info["metadata"] == {"job": "j"} and len(info["tensors"]) == 2
    (tmp_path / "bad.delta").write_bytes(b"DELTA\x02" + bytes(200))
    r = subprocess.run(py + ["delta", "verify", str(tmp_path / "bad.delta")], capture_output=True, text=True)
    assert r.returncode == 1 and "unsupported version" in r.stdout
    r = subprocess.run(py + ["worker", "start", "--dry-run", "--data", str(tmp_path / "w"), "--gym", str(gym), "--",
                             "--threads", "1"], capture_output=True, text=True,
                       env=dict(os.environ, MODEL_NAME="m", LORA_RANK="4"))
    assert r.returncode == 0 and r.stdout.split()[1:] == ["worker", "--data", str(tmp_path / "w"), "--model", "m",
                                                          "--lora-rank", "4", "--threads", "1"], r
    # No gym on PATH and none given: a sentence saying how to get one, exit 1, no traceback.
    env = {k: v for k, v in os.environ.items() if k != "GYM_BIN"}
    env["PATH"] = str(tmp_path / "empty")
    r = subprocess.run(py + ["worker", "start", "--dry-run", "--data", str(tmp_path / "w")], capture_output=True, text=True, env=env)
    assert r.returncode == 1 and "no gym binary" in r.stderr and "Traceback" not in r.stderr, r
