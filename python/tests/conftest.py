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
