"""The seeds' client API: ``GSPOTrainer``, on top of a local ``gym worker``.

The seeds' Python client (seed 000, "Python Training Client")::

    trainer = GSPOTrainer(model_name="Qwen/Qwen3-2507", use_4bit=True, lora_rank=16,
                          ring_position=0, orchestrator_url="https://orch.gym.zoo.ngo")
    for epoch in range(10):
        delta = trainer.train_epoch(dataset)
        writer = DeltaWriter(f"delta_epoch{epoch}.bin")
        writer.write_delta(delta)
        cid = writer.upload_ipfs()
        trainer.submit_delta(cid, delta.quality_score())

In Zoo Gym the node's identity, the ring, the signed per-sync deltas and
everything said to hanzod belong to the Go worker, so ``GSPOTrainer`` runs
one (``gym worker --json``, or attaches to the event stream of one already
running) and speaks for it:

- ``train_epoch(dataset)`` submits ``dataset`` as a job when it is a job file
  (or a job dict), then waits for the worker to finish its next epoch and
  returns an :class:`EpochDelta`: the node's own update over the epoch (the
  sum of the sync deltas hanzod accepted from it, read back from its data
  directory and verified), with its steps' rewards and losses.
- ``DeltaWriter(path).write_delta(delta)`` writes that update as a signed
  delta file (the node's key; metadata says which sync deltas it sums), and
  ``upload_ipfs()`` publishes the file into the worker's artifact store
  (``gym artifact publish --kind delta``) and returns its CID, the one
  ``ipfs add --cid-version=1`` gives.
- ``submit_delta(cid)`` hands deltas to hanzod through ``gym delta submit``
  and returns hanzod's verdicts. hanzod takes one delta per node and sync; an
  epoch record stands for the sync deltas it lists, so those are what is
  sent (hanzod answers ``duplicate`` for each the worker already delivered,
  and accepts one a failed connection kept from it).

Everything shells out to the ``gym`` binary (``$GYM_BIN``, else ``gym`` on
PATH): the Go tools stay the one implementation of the protocol.
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gym_protocol import delta as gd
from gym_protocol.config import WorkerConfig

__all__ = ["GSPOTrainer", "EpochDelta", "Verdict", "GymError", "JobFinished", "find_gym", "publish_artifact",
           "submit_deltas", "default_data_dir"]


class GymError(RuntimeError):
    """A gym command failed; the message has its output."""


class JobFinished(GymError):
    """The worker's job ended: there is no next epoch to train."""


def find_gym(gym: str | os.PathLike[str] | None = None) -> Path:
    """The gym binary: ``gym``, else ``$GYM_BIN``, else ``gym`` on PATH."""
    cand = gym or os.environ.get("GYM_BIN") or shutil.which("gym")
    if not cand or not Path(cand).is_file():
        raise GymError("no gym binary: build one (go build ./cmd/gym in the Zoo Gym repository) and put it on PATH, "
                       "or set GYM_BIN")
    return Path(cand)


def default_data_dir() -> Path:
    """``$GYM_DATA``, else ``~/.local/share/gym-worker``: the worker's key, deltas and artifact store."""
    d = os.environ.get("GYM_DATA")
    return Path(d) if d else Path.home() / ".local" / "share" / "gym-worker"


def _run(args: Sequence[str | os.PathLike[str]], what: str, ok: Sequence[int] = (0,),
         timeout: float | None = 300) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout)
    if r.returncode not in ok:
        raise GymError(f"{what}: {' '.join(map(str, args[:3]))} … exited {r.returncode}: "
                       f"{(r.stderr or r.stdout).strip()}")
    return r


_ARTIFACT_NAME = re.compile(r"[^A-Za-z0-9._-]")
# CIDs published by this process, with the file each names (submit_delta
# reads the metadata of an epoch record it published).
_published: dict[str, Path] = {}


def publish_artifact(path: str | os.PathLike[str], store: str | os.PathLike[str] | None = None,
                     key: str | os.PathLike[str] | None = None, gym: str | os.PathLike[str] | None = None,
                     kind: str = "delta", name: str | None = None) -> str:
    """Publishes a file into an artifact store with ``gym artifact publish``; returns the root CID.

    ``store`` defaults to the worker's (``default_data_dir()/artifacts``),
    ``key`` (which signs the manifest) to its node key.
    """
    data = default_data_dir()
    store = Path(store) if store is not None else data / "artifacts"
    key = Path(key) if key is not None else Path(os.environ.get("GYM_KEY") or data / "node.key")
    p = Path(path)
    name = name or (_ARTIFACT_NAME.sub("-", p.name).lstrip("._-") or "delta")[:128]
    r = _run([find_gym(gym), "artifact", "publish", "--store", store, "--key", key, "--kind", kind,
              "--name", name, p], "publishing " + str(p))
    cid = r.stdout.strip().splitlines()[-1]
    _published[cid] = p.resolve()
    return cid


@dataclasses.dataclass(frozen=True)
class Verdict:
    """hanzod's answer to one submitted delta."""

    source: str
    digest: str
    accepted: bool
    duplicate: bool = False
    reason: str = ""
    detail: str = ""


def submit_deltas(sources: Sequence[str | os.PathLike[str]], key: str | os.PathLike[str],
                  orchestrator: str | None = None, store: str | os.PathLike[str] | None = None,
                  pubkey: str | None = None, gym: str | os.PathLike[str] | None = None,
                  timeout: float = 30) -> list[Verdict]:
    """``gym delta submit --key KEY --json``: delta files or CIDs (in ``store``) to hanzod; its verdicts, in order.

    ``key`` is the node key that signed the files: hanzod takes an upload
    only when its signer announces it (docs/orchestrator.md, "Delta
    upload"). A file that does not verify (or is signed by another key)
    raises GymError before anything is sent.
    """
    args: list[str | os.PathLike[str]] = [find_gym(gym)]
    if orchestrator:
        args += ["--orchestrator", orchestrator]
    args += ["delta", "submit", "--key", key, "--json", "--timeout", f"{timeout}s"]
    if store is not None:
        args += ["--store", store]
    if pubkey:
        args += ["--pubkey", pubkey]
    r = _run(args + [str(s) for s in sources], "submitting deltas", ok=(0, 1), timeout=timeout * len(sources) + 60)
    out = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    if len(out) != len(sources):
        raise GymError(f"gym delta submit answered {len(out)} of {len(sources)}: {(r.stderr or r.stdout).strip()}")
    return [Verdict(o["source"], o["digest"], o["accepted"], o.get("duplicate", False), o.get("reason", ""),
                    o.get("detail", "")) for o in out]


@dataclasses.dataclass
class EpochDelta:
    """One epoch of a node's training, as its worker did it.

    ``tensors`` is the node's own update over the epoch: the sum of the sync
    deltas hanzod accepted from it (``files``, each verified against the
    node's key), in PEFT's names and order, float32.
    """

    job: str
    epoch: int
    node: str
    key_path: Path  # the node key (DeltaWriter signs with it when given none)
    store_dir: Path  # the worker's artifact store (upload_ipfs publishes there)
    files: list[Path]
    digests: list[str]
    tensors: dict[str, np.ndarray]
    rewards: list[float]
    losses: list[float]
    verdicts: list[str]
    samples: int
    claimed_loss: float

    def quality_score(self) -> float:
        """The node's own view of the epoch: the mean sample reward of its steps, in [0, 1] for the built-in tasks.

        hanzod scores deltas itself (held-out loss, norms, agreement with the
        ring) and does not take a node's word for it; this number is what the
        seeds' client passes along, for the node's own bookkeeping.
        """
        return float(np.mean(self.rewards)) if self.rewards else 0.0

    def delta_tensors(self) -> list[tuple[str, np.ndarray]]:
        """Name and value of every tensor, in file order (DeltaWriter reads this)."""
        return list(self.tensors.items())

    def delta_metadata(self) -> dict[str, Any]:
        """The metadata DeltaWriter writes: job, epoch, node, samples, loss, time, and the sync deltas summed."""
        return {"kind": "epoch", "job": self.job, "epoch": self.epoch, "node": self.node, "samples": self.samples,
                "claimed_loss": self.claimed_loss, "time": gd.rfc3339(), "syncs": self.digests}


class _Events:
    """The worker's JSON events, from its stdout or a file it appends to, as a queue."""

    def __init__(self, stream: Any, tee: Path | None, follow_file: bool) -> None:
        self.q: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._read, args=(stream, tee, follow_file), daemon=True)
        self._t.start()

    def _read(self, stream: Any, tee: Path | None, follow_file: bool) -> None:
        out = open(tee, "a", encoding="utf-8") if tee else None
        partial = ""
        try:
            while not self._stop.is_set():
                line = stream.readline()
                if follow_file:
                    if not line:
                        time.sleep(0.05)
                        continue
                    if not line.endswith("\n"):
                        partial += line  # the writer is mid-line: wait for the rest
                        continue
                    line, partial = partial + line, ""
                elif not line:
                    break
                if out:
                    out.write(line)
                    out.flush()
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                if isinstance(ev, dict):
                    self.q.put(ev)
        finally:
            self.q.put(None)
            if out:
                out.close()

    def next(self, deadline: float) -> dict[str, Any] | None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        try:
            return self.q.get(timeout=left)
        except queue.Empty:
            raise TimeoutError from None

    def stop(self) -> None:
        self._stop.set()


def _die_with_parent() -> None:
    """In the worker's process before exec: SIGTERM when the trainer's process dies (Linux), so no worker outlives it."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class GSPOTrainer:
    """A node that trains with GSPO: a local ``gym worker`` it starts or attaches to.

    Arguments left ``None`` come from the seeds' variables (MODEL_NAME,
    USE_4BIT, IMPORTANCE_SAMPLING_LEVEL, GSPO_BETA, LORA_RANK,
    ORCHESTRATOR_URL; :mod:`gym_protocol.config`); they restrict the jobs the
    worker takes. ``data_dir`` holds the node key (made if missing), the
    accepted deltas and the artifact store; ``model_dir`` is the Hugging Face
    directory of the base model (default: gym's built-in one).

    With ``attach`` (the events file of a running ``gym worker --json --data
    DIR``, e.g. ``DIR/events.jsonl`` that a trainer started before tees its
    events into), nothing is started and ``data_dir`` must be that DIR.
    """

    def __init__(self, model_name: str | None = None, use_4bit: bool | None = None, lora_rank: int | None = None,
                 ring_position: int | None = None, orchestrator_url: str | None = None,
                 importance_sampling_level: str | None = None, beta: float | None = None,
                 data_dir: str | os.PathLike[str] | None = None, model_dir: str | os.PathLike[str] | None = None,
                 gym: str | os.PathLike[str] | None = None, attach: str | os.PathLike[str] | None = None,
                 worker_args: Sequence[str] = (), start_timeout: float = 60) -> None:
        self.config = WorkerConfig.from_env(
            model_name=model_name, use_4bit=use_4bit, lora_rank=lora_rank, ring_position=ring_position,
            orchestrator_url=orchestrator_url, importance_sampling_level=importance_sampling_level, gspo_beta=beta)
        self.gym = find_gym(gym)
        self.data_dir = Path(data_dir) if data_dir is not None else default_data_dir()
        self.key_path = self.data_dir / "node.key"
        self.store_dir = self.data_dir / "artifacts"
        self.proc: subprocess.Popen[str] | None = None
        self.node: str = ""
        self.job: str | None = None
        self._epochs_seen: set[tuple[str, int]] = set()
        self._done: dict[str, Any] | None = None
        if attach is not None:
            # Only what happens from now on: the node is the data directory's key.
            from gym_protocol.keys import load_key

            self.node = load_key(self.key_path).public_hex
            f = open(attach, encoding="utf-8")
            f.seek(0, os.SEEK_END)
            self._events = _Events(f, None, follow_file=True)
        else:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            cmd = [str(self.gym), "worker", "--data", str(self.data_dir), "--json", *self.config.worker_args()]
            if model_dir is not None:
                cmd += ["--model-dir", str(model_dir)]
            cmd += list(worker_args)
            self._log = open(self.data_dir / "worker.log", "ab")
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._log, text=True,
                                         env=self.config.worker_env(), preexec_fn=_die_with_parent)
            self._events = _Events(self.proc.stdout, self.data_dir / "events.jsonl", follow_file=False)
        deadline = time.monotonic() + start_timeout
        while not self.node:
            ev = self._next(deadline, "the worker to register with hanzod")
            if ev.get("kind") == "registered" or ev.get("node"):
                self.node = ev.get("node", "")

    # -- events

    def _next(self, deadline: float, what: str) -> dict[str, Any]:
        try:
            ev = self._events.next(deadline)
        except TimeoutError:
            raise TimeoutError(f"waited in vain for {what}; the worker's log: {self.data_dir / 'worker.log'}") from None
        if ev is None:
            code = self.proc.poll() if self.proc else None
            raise GymError(f"the worker stopped (exit status {code}) while waiting for {what}: "
                           f"{self._log_tail()}")
        return ev

    def _log_tail(self) -> str:
        try:
            return (self.data_dir / "worker.log").read_text(errors="replace")[-2000:].strip()
        except OSError:
            return ""

    def events(self, timeout: float = 60) -> Iterator[dict[str, Any]]:
        """The worker's events as they come (one dict per JSON line; see ``gym worker --help``)."""
        deadline = time.monotonic() + timeout
        while True:
            yield self._next(deadline, "the next event")

    # -- the seeds' API

    def submit_job(self, job: str | os.PathLike[str] | Mapping[str, Any], key: str | os.PathLike[str] | None = None
                   ) -> str:
        """Submits a job (a job file, docs/job-file.md, or a dict of its keys) to hanzod; returns its id.

        Without ``key`` the submission is unsigned, which hanzod accepts from
        its operator only (loopback, or the admin token); with ``key`` (a node
        key file with a funded ledger account) it is signed by that key.
        """
        tmp = None
        if isinstance(job, Mapping):
            fd, tmp = tempfile.mkstemp(suffix=".yaml")
            with os.fdopen(fd, "w") as f:
                json.dump(dict(job), f)  # JSON is YAML
            path = tmp
        else:
            path = str(job)
        try:
            args = [self.gym, *self._orch(), "job", "submit", path]
            if key is not None:
                args += ["--key", str(key)]
            r = _run(args, "submitting " + path)
        finally:
            if tmp:
                os.unlink(tmp)
        self.job = r.stdout.strip().splitlines()[-1]
        return self.job

    def _orch(self) -> list[str]:
        return ["--orchestrator", self.config.orchestrator_url] if self.config.orchestrator_url else []

    def train_epoch(self, dataset: str | os.PathLike[str] | Mapping[str, Any] | None = None,
                    timeout: float = 900) -> EpochDelta:
        """Waits for the worker to finish its next epoch and returns it as an :class:`EpochDelta`.

        ``dataset``: in Zoo Gym the data is part of a job, so a job file (or
        dict) given here is submitted to hanzod the first time
        (:meth:`submit_job`); later calls, and ``None``, train whatever job
        hanzod assigned to this node. Raises :class:`JobFinished` when the
        job ends without another epoch, TimeoutError after ``timeout`` s.
        """
        if dataset is not None and self.job is None:
            self.submit_job(dataset)
        deadline = time.monotonic() + timeout
        steps: list[dict[str, Any]] = []
        subs: list[dict[str, Any]] = []
        while True:
            if self._done is not None:
                raise JobFinished(f"job {self._done.get('job')} ended ({self._done.get('state')}): no next epoch")
            ev = self._next(deadline, "the end of an epoch")
            kind, job = ev.get("kind"), ev.get("job")
            if self.job is not None and job and job != self.job:
                continue
            if kind == "step":
                steps.append(ev)
            elif kind in ("delta_submitted", "delta_rejected"):
                subs.append(ev)
            elif kind == "epoch_started":
                steps = [s for s in steps if s.get("epoch") == ev.get("epoch")]
                subs = [s for s in subs if s.get("epoch") == ev.get("epoch")]
            elif kind == "epoch_done" and (job, ev.get("epoch")) not in self._epochs_seen:
                self._epochs_seen.add((job, ev["epoch"]))
                self.job = self.job or job
                e = ev["epoch"]
                return self._epoch(job, e, [s for s in steps if s.get("epoch") == e],
                                   [s for s in subs if s.get("epoch") == e])
            elif kind == "job_done":
                self._done = ev
                raise JobFinished(f"job {job} ended ({ev.get('state')}): no next epoch")

    def _epoch(self, job: str, epoch: int, steps: list[dict[str, Any]], subs: list[dict[str, Any]]) -> EpochDelta:
        accepted = [s for s in subs if s.get("verdict") in ("accepted", "duplicate")]
        rejected = [s for s in subs if s.get("verdict") == "rejected"]
        if rejected and not accepted:
            r = rejected[0]
            raise GymError(f"hanzod rejected every delta this node submitted in epoch {epoch} of {job} "
                           f"({r.get('reason')}: {r.get('detail')})")
        files: list[Path] = []
        for s in sorted(accepted, key=lambda s: s.get("sync", 0)):
            p = self.data_dir / "deltas" / f"{job}-e{epoch}-s{s.get('sync', 0)}-{s.get('sequence', 0)}.delta"
            if not p.exists():
                raise GymError(f"the worker reported delta {p.name} accepted but it is not in {p.parent}")
            files.append(p)
        tensors: dict[str, np.ndarray] = {}
        digests: list[str] = []
        samples, losses = 0, []
        for p in files:
            d = gd.read_delta(p, pubkey=self.node)
            meta = d.metadata or {}
            if meta.get("job") != job or meta.get("epoch") != epoch:
                raise GymError(f"{p.name}: metadata says job {meta.get('job')} epoch {meta.get('epoch')}")
            digests.append(d.digest.hex())
            samples += int(meta.get("samples", 0))
            if "claimed_loss" in meta:
                losses.append(float(meta["claimed_loss"]))
            for t in d.tensors:
                v = t.numpy().astype(np.float64)
                if t.name in tensors:
                    if tensors[t.name].shape != v.shape:
                        raise GymError(f"{p.name}: {t.name} changes shape within the epoch")
                    tensors[t.name] = tensors[t.name] + v
                else:
                    tensors[t.name] = v
        return EpochDelta(
            job=job, epoch=epoch, node=self.node, key_path=self.key_path, store_dir=self.store_dir, files=files,
            digests=digests,
            tensors={k: v.astype(np.float32) for k, v in tensors.items()},
            rewards=[float(s.get("reward", 0.0)) for s in steps], losses=[float(s.get("loss", 0.0)) for s in steps],
            verdicts=[s.get("verdict", "") for s in subs], samples=samples,
            claimed_loss=float(np.mean(losses)) if losses else 0.0)

    def submit_delta(self, delta: str | os.PathLike[str] | gd.DeltaInfo | EpochDelta,
                     quality_score: float | None = None) -> list[Verdict]:
        """Hands deltas to hanzod (``gym delta submit``) and returns its verdicts.

        ``delta`` is a CID (of this worker's store), a delta file, what
        ``write_delta`` returned, or an :class:`EpochDelta`. A sync delta
        goes as it is. An epoch (or an epoch record that ``write_delta``
        wrote from one) stands for its sync deltas, which are sent instead:
        hanzod takes one delta per node and sync, answers ``duplicate`` for
        those the worker already delivered and accepts any it missed.

        ``quality_score`` is the seeds' argument; hanzod computes its own
        score and has no field for a node's claim, so it is only checked to
        be a finite number.
        """
        if quality_score is not None and not np.isfinite(quality_score):
            raise ValueError(f"quality_score {quality_score!r} is not finite")
        if isinstance(delta, EpochDelta):
            sources: list[str] = [str(p) for p in delta.files]
        else:
            path: Path | None = None
            if isinstance(delta, gd.DeltaInfo):
                path = delta.path
            elif isinstance(delta, str) and delta in _published:
                path = _published[delta]
            elif Path(delta).exists():
                path = Path(delta)
            sources = [str(delta)]
            if path is not None:
                meta = gd.read_delta(path, pubkey=self.node).metadata or {}
                sources = [str(path)]
                if meta.get("kind") == "epoch":
                    sources = self._sync_files(meta)
        if not sources:
            return []
        return submit_deltas(sources, self.key_path, orchestrator=self.config.orchestrator_url,
                             store=self.store_dir, pubkey=self.node, gym=self.gym)

    def _sync_files(self, meta: Mapping[str, Any]) -> list[str]:
        want = list(meta.get("syncs") or [])
        found: dict[str, str] = {}
        pattern = f"{meta.get('job')}-e{meta.get('epoch')}-s*.delta"
        for p in sorted((self.data_dir / "deltas").glob(pattern)):
            found[gd.read_delta(p, pubkey=self.node).digest.hex()] = str(p)
        missing = [d for d in want if d not in found]
        if missing:
            raise GymError(f"the epoch record lists sync deltas this worker does not hold: {missing}")
        return [found[d] for d in want]

    def balance(self) -> dict[str, Any]:
        """The node's ledger account at hanzod (``gym ledger balance --json``): free, bonded, unbonding
        (micro-GYM), banned, slashes.

        Rewards need no claim here (the seeds' ``claim_rewards``): hanzod pays
        each epoch's into the accounts of the nodes that earned them.
        """
        r = _run([self.gym, *self._orch(), "ledger", "balance", "--json", self.node], "reading the balance")
        return json.loads(r.stdout)

    # -- lifetime

    def close(self, timeout: float = 10) -> None:
        """Stops the worker this trainer started (SIGTERM, then SIGKILL after ``timeout`` s)."""
        self._events.stop()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None:
            self._log.close()

    def __enter__(self) -> GSPOTrainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
