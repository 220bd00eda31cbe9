"""The seeds' worker variables, parsed in one place.

The seeds run a worker as a container configured by environment variables
(seed 000, "Worker: gym-trainer"; seed 001, "Docker Deployment")::

    MODEL_NAME=Qwen/Qwen3-2507
    USE_4BIT=true
    IMPORTANCE_SAMPLING_LEVEL=sequence
    GSPO_BETA=0.1
    LORA_RANK=16
    RING_POSITION=${RING_POS}
    ORCHESTRATOR_URL=${ORCH_URL}

and the seeds' ``GSPOConfig`` says what each means: ``importance_sampling_level``
"sequence" (sequence-level importance ratios, "critical for MoE models"),
``beta`` the KL penalty, ``use_4bit`` QLoRA quantization, ``lora_rank`` the
LoRA adapter rank. In Zoo Gym a job fixes its GSPO settings when it is
submitted (docs/job-file.md); a worker's variables say which jobs it takes
(a job with other settings is refused and the node stays idle), exactly as
``gym worker`` reads the same variables. :class:`WorkerConfig` is that
mapping, and ``worker_args()`` the ``gym worker`` command line it means.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping

__all__ = ["WorkerConfig", "ConfigError", "VARIABLES"]

#: Each variable, with what it means (docs/gpu-owners.md repeats this table).
VARIABLES: dict[str, str] = {
    "MODEL_NAME": "the base model this node trains: only jobs of this model are taken (gym worker --model); "
                  "a Hugging Face repo id is recorded for people, the weights come from --model-dir or hanzod",
    "USE_4BIT": "QLoRA: load the base with bitsandbytes NF4 (torch backend on CUDA only; refused otherwise)",
    "IMPORTANCE_SAMPLING_LEVEL": "GSPO's importance ratio: sequence (the seeds' choice, length-normalised "
                                 "sequence ratio) or token; only jobs with this level are taken",
    "GSPO_BETA": "the KL penalty β (k3 estimator against the base with the adapter disabled); only jobs with this β",
    "LORA_RANK": "the LoRA adapter rank r; only jobs with this rank are taken",
    "ORCHESTRATOR_URL": "where hanzod is: HOST[:PORT] (TLS unless loopback), grpc://HOST:PORT or grpcs://HOST:PORT",
    "RING_POSITION": "ignored: hanzod orders the ring by measured bandwidth",
}


class ConfigError(ValueError):
    """A worker variable has a value it cannot have; the message names it."""


def _bool(name: str, v: str) -> bool:
    s = v.strip().lower()
    if s in ("1", "true", "yes"):
        return True
    if s in ("", "0", "false", "no"):
        return False
    raise ConfigError(f"{name}={v!r}: want true or false")


@dataclasses.dataclass(frozen=True)
class WorkerConfig:
    """What a worker's variables say. ``None`` means unset: any job's value is taken."""

    model_name: str | None = None
    use_4bit: bool = False
    importance_sampling_level: str | None = None
    gspo_beta: float | None = None
    lora_rank: int | None = None
    orchestrator_url: str | None = None
    ring_position: int | None = None  # accepted for the seeds' sake, never used

    def __post_init__(self) -> None:
        if self.importance_sampling_level not in (None, "sequence", "token"):
            raise ConfigError(f"IMPORTANCE_SAMPLING_LEVEL={self.importance_sampling_level!r}: want sequence or token")
        if self.gspo_beta is not None and (not math.isfinite(self.gspo_beta) or self.gspo_beta < 0):
            raise ConfigError(f"GSPO_BETA={self.gspo_beta!r}: want a finite number ≥ 0")
        if self.lora_rank is not None and (isinstance(self.lora_rank, bool) or self.lora_rank < 1):
            raise ConfigError(f"LORA_RANK={self.lora_rank!r}: want a positive integer")
        if self.model_name is not None and not self.model_name.strip():
            raise ConfigError("MODEL_NAME is empty")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> WorkerConfig:
        """Reads the variables from ``env`` (default os.environ); keyword arguments win over them."""
        e = os.environ if env is None else env

        def get(name: str) -> str | None:
            v = e.get(name)
            return v if v not in (None, "") else None

        beta = get("GSPO_BETA")
        rank = get("LORA_RANK")
        pos = get("RING_POSITION")
        try:
            beta_v = float(beta) if beta is not None else None
        except ValueError:
            raise ConfigError(f"GSPO_BETA={beta!r}: want a number") from None
        try:
            rank_v = int(rank) if rank is not None else None
        except ValueError:
            raise ConfigError(f"LORA_RANK={rank!r}: want a positive integer") from None
        try:
            pos_v = int(pos) if pos is not None else None
        except ValueError:
            raise ConfigError(f"RING_POSITION={pos!r}: want an integer") from None
        values: dict[str, object] = {
            "model_name": get("MODEL_NAME"),
            "use_4bit": _bool("USE_4BIT", e.get("USE_4BIT", "")),
            "importance_sampling_level": get("IMPORTANCE_SAMPLING_LEVEL"),
            "gspo_beta": beta_v,
            "lora_rank": rank_v,
            "orchestrator_url": get("ORCHESTRATOR_URL"),
            "ring_position": pos_v,
        }
        unknown = set(overrides) - set(values)
        if unknown:
            raise TypeError(f"unknown settings {sorted(unknown)}")
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]

    def worker_args(self) -> list[str]:
        """The ``gym worker`` flags these settings mean (USE_4BIT travels in the environment)."""
        args: list[str] = []
        if self.orchestrator_url:
            args += ["--orchestrator", self.orchestrator_url]
        if self.model_name:
            args += ["--model", self.model_name]
        if self.importance_sampling_level:
            args += ["--importance-sampling-level", self.importance_sampling_level]
        if self.gspo_beta is not None:
            args += ["--gspo-beta", repr(self.gspo_beta)]
        if self.lora_rank is not None:
            args += ["--lora-rank", str(self.lora_rank)]
        return args

    def worker_env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment for ``gym worker``: ``base`` with the seed variables that flags do not carry.

        The flags of :meth:`worker_args` win over the variables in ``base``
        (gym worker reads them only as flag defaults); USE_4BIT is set from
        ``use_4bit`` and RING_POSITION dropped.
        """
        env = dict(os.environ if base is None else base)
        env["USE_4BIT"] = "true" if self.use_4bit else "false"
        env.pop("RING_POSITION", None)
        return env
