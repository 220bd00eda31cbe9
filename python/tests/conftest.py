"""Shared fixtures: the gym binary, built once from this checkout."""

from __future__ import annotations

import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def gym(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """Path of a gym binary built from the repository (go build ./cmd/gym)."""
    out = tmp_path_factory.mktemp("bin") / "gym"
    subprocess.run(["go", "build", "-o", str(out), "./cmd/gym"], cwd=REPO, check=True)
    return out


@pytest.fixture(scope="session")
def node_key(gym: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, str]:
    """A fresh node key file and its public key (hex), made by gym keygen."""
    path = tmp_path_factory.mktemp("key") / "node.key"
    out = subprocess.run([str(gym), "keygen", "--out", str(path)], check=True, capture_output=True, text=True)
    return path, out.stdout.strip().split()[-1]


@pytest.fixture(scope="session")
def hanzod(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """Path of a hanzod binary built from the repository (go build ./cmd/hanzod)."""
    out = tmp_path_factory.mktemp("bin") / "hanzod"
    subprocess.run(["go", "build", "-o", str(out), "./cmd/hanzod"], cwd=REPO, check=True)
    return out


class LocalCluster:
    """hanzod on loopback (port 0, plaintext, embedded store) and gym workers, all processes of this test.

    ``fund(key)`` deposits and bonds the 10,000 GYM that make a node
    eligible (an operator call, allowed from loopback); ``worker(dir)``
    starts ``gym worker --json`` on a funded key. Everything started is
    stopped by ``close()``, by process handle.
    """

    def __init__(self, gym: pathlib.Path, hanzod: pathlib.Path, dir: pathlib.Path) -> None:
        self.gym, self.dir = gym, dir
        self.procs: list[subprocess.Popen[bytes]] = []
        self.addr = ""
        try:
            self._start(hanzod)
        except BaseException:
            self.close()
            raise

    def _start(self, hanzod: pathlib.Path) -> None:
        import json
        import time

        gym, dir = self.gym, self.dir
        # hanzod merges and settles only with its signing key's account
        # staked as an orchestrator's (50,000 GYM, docs/orchestrator.md):
        # make the key here, bond it once hanzod serves.
        hkey = dir / "hanzod-signing.key"
        out = subprocess.run([str(gym), "keygen", "--out", str(hkey)], check=True, capture_output=True,
                             text=True).stdout
        orchestrator = out.strip().split()[-1]
        log = open(dir / "hanzod.log", "w+")
        self.procs.append(subprocess.Popen(
            [str(hanzod), "--data", str(dir / "hanzod"), "--listen", "127.0.0.1:0", "--metrics", "",
             "--artifacts", "127.0.0.1:0", "--epoch-grace", "30s", "--key", str(hkey)], stdout=log, stderr=log))
        self.addr = ""
        deadline = time.monotonic() + 30
        while not self.addr:
            if time.monotonic() > deadline or self.procs[0].poll() is not None:
                raise RuntimeError("hanzod did not start: " + (dir / "hanzod.log").read_text())
            for line in (dir / "hanzod.log").read_text().splitlines():
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("msg") == "serving":
                    self.addr = rec["grpc"]
            time.sleep(0.05)
        self.run("ledger", "deposit", orchestrator, "50000")
        self.run("ledger", "bond", orchestrator, "50000")

    def run(self, *args: str | pathlib.Path) -> str:
        r = subprocess.run([str(self.gym), "--orchestrator", self.addr, *map(str, args)], capture_output=True,
                           text=True)
        assert r.returncode == 0, r
        return r.stdout

    def fund(self, key: pathlib.Path) -> str:
        out = subprocess.run([str(self.gym), "keygen", "--out", str(key)], check=True, capture_output=True,
                             text=True).stdout
        node = out.strip().split()[-1]
        self.run("ledger", "deposit", node, "10000")
        self.run("ledger", "bond", node, "10000")
        return node

    def worker(self, data: pathlib.Path, *args: str) -> subprocess.Popen[bytes]:
        data.mkdir(parents=True, exist_ok=True)
        self.fund(data / "node.key")
        out = open(data / "events.jsonl", "wb")
        p = subprocess.Popen([str(self.gym), "worker", "--orchestrator", self.addr, "--data", str(data), "--json",
                              "--heartbeat", "1s", "--threads", "1", *args], stdout=out, stderr=subprocess.STDOUT)
        self.procs.append(p)
        return p

    def close(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.fixture
def cluster(gym: pathlib.Path, hanzod: pathlib.Path, tmp_path: pathlib.Path):
    """A LocalCluster in tmp_path, stopped after the test."""
    c = LocalCluster(gym, hanzod, tmp_path)
    try:
        yield c
    finally:
        c.close()
