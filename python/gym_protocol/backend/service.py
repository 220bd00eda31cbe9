"""The gRPC service of the torch backend (zoo.gym.trainer.v1.TrainerService)."""

from __future__ import annotations

import os
import platform
import threading
import time
from concurrent import futures

import grpc
import torch

from . import BackendError, PreconditionError
from . import objective, traces
from .engine import AdamWConfig, Engine, LoadConfig
from .._proto import trainer_pb2 as pb
from .._proto import trainer_pb2_grpc as pbg

VERSION = "0.1.0"

# A test hook: with GYM_TRAINER_TEST_HOLD_STEP=<path> in its environment,
# the first Step call of any process that finds <path> absent creates it
# with its process id and waits there, inside the call, for up to
# HOLD_SECONDS (the test kills it meanwhile), then goes on normally. Later
# calls, and processes that find the file present, do not wait. Tests use it
# to kill a trainer process in the middle of a step (localcluster
# TestMixedRing); nothing else sets it.
HOLD_ENV = "GYM_TRAINER_TEST_HOLD_STEP"
HOLD_SECONDS = 120.0


def _hold_in_step() -> None:
    path = os.environ.get(HOLD_ENV)
    if not path:
        return
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as f:
        f.write(f"{os.getpid()}\n")
    deadline = time.monotonic() + HOLD_SECONDS
    while time.monotonic() < deadline:
        time.sleep(0.05)


# A test hook: with GYM_TRAINER_TEST_OOM=<call>[,<call>...] (Load, Generate,
# Step) in its environment, those calls raise torch.cuda.OutOfMemoryError as
# a GPU that ran out of memory does, so tests on machines without a GPU check
# what the worker and the job's status make of it (node/backend/torch
# TestOutOfMemoryIsUnservable); nothing else sets it.
OOM_ENV = "GYM_TRAINER_TEST_OOM"


def _inject_oom(call: str) -> None:
    if call in os.environ.get(OOM_ENV, "").split(","):
        raise torch.cuda.OutOfMemoryError(
            f"CUDA out of memory. Tried to allocate 2.00 GiB (injected into {call} by {OOM_ENV})")


def _versions() -> dict[str, str]:
    import peft
    import transformers

    return {"gym_protocol": VERSION, "torch": torch.__version__, "transformers": transformers.__version__,
            "peft": peft.__version__, "python": platform.python_version()}


class Service(pbg.TrainerServiceServicer):
    """Serves one Engine; calls that touch the model run one at a time."""

    def __init__(self, exchange: str):
        self.exchange = exchange
        self.engine: Engine | None = None
        self.lock = threading.Lock()

    def _path(self, name: str) -> str:
        return traces.confined(self.exchange, name)

    def _call(self, context, fn):
        try:
            with self.lock:
                return fn()
        except BackendError as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        except PreconditionError as e:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(e))
        except torch.cuda.OutOfMemoryError as e:
            if torch.cuda.is_available():
                torch.cuda.empty_cache()  # give the cached blocks back before the next job
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"CUDA out of memory: {e}")
        except FileNotFoundError as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"no such file in the exchange directory: {e.filename}")

    def _need(self) -> Engine:
        if self.engine is None:
            raise PreconditionError("no model loaded: call Load first")
        return self.engine

    def Health(self, request, context):
        e = self.engine
        return pb.HealthResponse(pid=os.getpid(), loaded=e is not None,
                                 device=str(e.device) if e else "", dtype=e.c.dtype if e else "",
                                 versions=_versions(), cuda_available=torch.cuda.is_available())

    def Load(self, r, context):
        def run():
            _inject_oom("Load")
            g = r.gspo
            c = LoadConfig(
                base_dir=r.base_dir, rank=r.lora_rank, alpha=r.lora_alpha, targets=list(r.lora_target_modules),
                dtype=r.dtype or "float32", device=r.device or "cpu", use_4bit=r.use_4bit, seed=r.seed,
                gspo=objective.Config(level=g.importance_sampling_level or "sequence", beta=g.beta,
                                      eps_low=g.epsilon_low, eps_high=g.epsilon_high, adv_eps=g.advantage_epsilon),
                temperature=g.temperature or 1.0, num_iterations=g.num_iterations or 1,
                grad_accum=g.gradient_accumulation_steps or 1,
                adamw=AdamWConfig(lr=r.adamw.learning_rate, beta1=r.adamw.beta1, beta2=r.adamw.beta2,
                                  eps=r.adamw.eps, weight_decay=r.adamw.weight_decay, warmup=r.adamw.warmup_updates,
                                  total=r.adamw.total_updates, min_lr=r.adamw.min_learning_rate,
                                  sgd=r.adamw.sgd),
                threads=r.threads)
            self.engine = None
            e = Engine(c)
            if r.adapter:
                e.set_adapter(self._path(r.adapter), reset_optimizer=True)
            out = "loaded.safetensors"
            e.write_adapter(self._path(out))
            self.engine = e
            return pb.LoadResponse(base_parameters=e.base_parameters, adapter_parameters=e.adapter_parameters,
                                   adapter=out, device=str(e.device), dtype=c.dtype)
        return self._call(context, run)

    def Generate(self, r, context):
        def run():
            e = self._need()
            _inject_oom("Generate")
            out = self._path(r.out)
            t0 = time.perf_counter()
            t = e.generate([list(p.ids) for p in r.prompts], r.group_size, r.max_new_tokens, r.temperature or 1.0,
                           r.top_k, r.seed)
            secs = time.perf_counter() - t0
            traces.write(out, t)
            return pb.GenerateResponse(traces=r.out, tokens=sum(len(c) for c in t.completions), seconds=secs)
        return self._call(context, run)

    def Step(self, r, context):
        def run():
            e = self._need()
            t = traces.read(self._path(r.traces), e.vocab, want_rewards=True)
            if not r.dry_run:
                self._path(r.out)
            _hold_in_step()
            _inject_oom("Step")
            gpath = self._path(r.gradient) if r.gradient else None
            stats, grad, secs = e.step(t, r.group_size, dry_run=r.dry_run, want_grad=gpath is not None)
            if gpath:
                traces.atomic_save(grad, gpath, {"format": "pt"})
            if not r.dry_run:
                e.write_adapter(self._path(r.out))
            return pb.StepResponse(stats=pb.StepStats(**stats), adapter="" if r.dry_run else r.out,
                                   gradient=r.gradient, seconds=secs)
        return self._call(context, run)

    def SetAdapter(self, r, context):
        def run():
            self._need().set_adapter(self._path(r.adapter), r.reset_optimizer)
            return pb.SetAdapterResponse()
        return self._call(context, run)

    def Evaluate(self, r, context):
        def run():
            comps = self._need().evaluate([list(p.ids) for p in r.prompts], r.max_new_tokens)
            return pb.EvaluateResponse(completions=[pb.Completion(ids=c) for c in comps])
        return self._call(context, run)


MAX_MESSAGE = 64 << 20


def serve(socket_path: str, exchange: str, parent: int = 0) -> None:
    """Serves on the Unix socket until the process is told to stop or its parent goes away."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4),
                         options=[("grpc.max_receive_message_length", MAX_MESSAGE),
                                  ("grpc.max_send_message_length", MAX_MESSAGE)])
    pbg.add_TrainerServiceServicer_to_server(Service(exchange), server)
    if server.add_insecure_port("unix:" + socket_path) == 0:
        raise SystemExit(f"gym_protocol.backend: cannot listen on unix:{socket_path}")
    server.start()
    stop = threading.Event()
    if parent:
        def watch() -> None:
            while not stop.wait(1.0):
                if os.getppid() != parent:
                    server.stop(0)
                    return
        threading.Thread(target=watch, daemon=True).start()
    server.wait_for_termination()
    stop.set()
