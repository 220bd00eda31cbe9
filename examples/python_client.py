"""The seeds' Python training client (seed 000, "Python Training Client"), on a local model directory.

The seed's listing, line for line, with what a local run needs around it::

    trainer = GSPOTrainer(model_name=..., use_4bit=..., lora_rank=..., ring_position=0, orchestrator_url=...)
    for epoch in range(epochs):
        delta = trainer.train_epoch(dataset)
        writer = DeltaWriter(f"delta_epoch{epoch}.bin")
        writer.write_delta(delta)
        cid = writer.upload_ipfs()
        trainer.submit_delta(cid, delta.quality_score())

The base model is a Hugging Face directory (``gym base export DIR`` writes
gym's built-in one; any Llama-family directory gym loads works), the job's
``model`` is that directory's name (hanzod must know the base too: a
standalone hanzod validates deltas against its built-in base, so there the
directory is the exported built-in base, named ``builtin``), and ``dataset`` is a job for it
(docs/job-file.md) that the trainer submits to hanzod. hanzod must be
running at ``--orchestrator`` (or ORCHESTRATOR_URL), the node's key in
``--data`` (``gym keygen --out DATA/node.key``) funded and bonded, and two
more workers on the same model directory (a ring needs three). Run::

    python examples/python_client.py --model-dir DIR --data DATA --out OUT

It prints one JSON object per epoch: job, epoch, tensors, mean reward,
quality score, the delta file, its CID and hanzod's verdicts.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from gym_protocol import DeltaWriter, GSPOTrainer


def job_for(model_name: str, epochs: int) -> dict[str, object]:
    """A small job on the model directory: the built-in addition task, the built-in training profile.

    An epoch trains 4 steps × 4 prompts × 8 completions = 128 samples per worker: hanzod's default
    minimum (docs/job-file.md, "The smallest epoch")."""
    return {
        "model": model_name, "dataset": "addition", "epochs": epochs, "min_nodes": 3, "max_nodes": 3,
        "steps_per_epoch": 4, "prompts_per_step": 4, "seed": 1, "spot_check_bp": 0,
        "gspo": {"importance_sampling_level": "sequence", "beta": 0.1, "group_size": 8, "aggregate_interval": 2,
                 "use_4bit": False, "lora_rank": 4, "lora_alpha": 8, "max_seq_len": 12,
                 "gradient_accumulation_steps": 1, "learning_rate": 2e-3, "warmup_steps": 0, "weight_decay": 0},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-dir", required=True, help="the base model: a Hugging Face directory")
    ap.add_argument("--data", required=True, help="the worker's directory (node.key, deltas, artifact store)")
    ap.add_argument("--out", default=".", help="where the delta files go")
    ap.add_argument("--orchestrator", default=os.environ.get("ORCHESTRATOR_URL"), help="hanzod [ORCHESTRATOR_URL]")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--model", help="the job's model (default: the directory's name; a base-model CID where hanzod "
                                    "fetches bases by CID)")
    ap.add_argument("--gym", help="the gym binary [GYM_BIN]")
    a = ap.parse_args()

    model_dir = Path(a.model_dir).resolve()
    trainer = GSPOTrainer(
        model_name=a.model or model_dir.name,
        use_4bit=False,  # QLoRA needs the torch backend on CUDA
        lora_rank=4,
        ring_position=0,  # accepted, ignored: hanzod orders the ring by bandwidth
        orchestrator_url=a.orchestrator,
        data_dir=a.data,
        model_dir=model_dir,
        gym=a.gym,
        worker_args=["--heartbeat", "1s", "--threads", "1"],
    )
    dataset = job_for(a.model or model_dir.name, a.epochs)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        for epoch in range(a.epochs):
            delta = trainer.train_epoch(dataset)
            writer = DeltaWriter(out / f"delta_epoch{epoch}.bin")
            info = writer.write_delta(delta)
            cid = writer.upload_ipfs()
            verdicts = trainer.submit_delta(cid, delta.quality_score())
            print(json.dumps({
                "job": delta.job, "epoch": delta.epoch, "node": delta.node, "tensors": len(delta.tensors),
                "syncs": len(delta.files), "steps": len(delta.rewards), "quality_score": delta.quality_score(),
                "file": str(info.path), "digest": info.digest, "cid": cid,
                "verdicts": [v.__dict__ for v in verdicts],
            }), flush=True)
    finally:
        trainer.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
