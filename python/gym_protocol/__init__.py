"""Zoo Gym for GPU owners, in Python.

- :mod:`gym_protocol.delta`: the signed delta file format (``DeltaWriter``,
  ``read_delta``), byte-compatible with the Go tools;
- :mod:`gym_protocol.client`: the seeds' client API (``GSPOTrainer``), which
  runs or attaches to a local ``gym worker``, publishes files into its
  artifact store and submits deltas to hanzod;
- :mod:`gym_protocol.config`: the seeds' worker variables (MODEL_NAME,
  USE_4BIT, IMPORTANCE_SAMPLING_LEVEL, GSPO_BETA, LORA_RANK,
  ORCHESTRATOR_URL);
- ``python -m gym_protocol --help``: delta pack / verify / inspect and
  worker start from the command line.

Importing the package needs neither torch nor a gym binary; those load when
used.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["GSPOTrainer", "EpochDelta", "Verdict", "DeltaWriter", "read_delta", "Delta", "DeltaError",
           "WorkerConfig", "SigningKey", "load_key", "generate_key"]

_LAZY = {
    "GSPOTrainer": "gym_protocol.client", "EpochDelta": "gym_protocol.client", "Verdict": "gym_protocol.client",
    "DeltaWriter": "gym_protocol.delta", "read_delta": "gym_protocol.delta", "Delta": "gym_protocol.delta",
    "DeltaError": "gym_protocol.delta", "WorkerConfig": "gym_protocol.config",
    "SigningKey": "gym_protocol.keys", "load_key": "gym_protocol.keys", "generate_key": "gym_protocol.keys",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'gym_protocol' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(mod), name)


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
