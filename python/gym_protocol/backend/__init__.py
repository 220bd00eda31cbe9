"""The torch training backend of a gym worker.

A ``gym worker --backend torch`` starts ``python -m gym_protocol.backend
--socket PATH --exchange DIR`` and speaks gRPC to it over the Unix socket
(api/trainer/v1/trainer.proto). The process only computes: it loads a
Hugging Face base model with transformers, wraps it with a PEFT LoRA adapter,
samples completions with their log-probabilities, and runs GSPO steps with
AdamW, exactly as the Go engine (packages gspo, trainer and optim) does.
Keys, the ring, delta files and everything said to hanzod stay in the Go
worker.

Tensors cross the seam as safetensors files in the exchange directory, a
private directory the worker owns (docs/backends.md):

* ``traces.py`` reads and writes traces files (prompts, sampled completions,
  their log-probabilities under the sampling policy, rewards);
* ``objective.py`` is the GSPO objective in torch;
* ``engine.py`` is the model, the adapter and the optimiser;
* ``service.py`` is the gRPC service; ``__main__.py`` its command line.
"""

from __future__ import annotations

__all__ = ["BackendError", "PreconditionError"]


class BackendError(ValueError):
    """A request the backend refuses: malformed input, a file that is not what it should be."""


class PreconditionError(RuntimeError):
    """A request this machine cannot serve (e.g. 4-bit quantization without CUDA)."""
