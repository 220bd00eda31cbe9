"""The example environment server (gym_protocol.env.example) over HTTP."""

from __future__ import annotations

import http.client
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from gym_protocol.env import example


@pytest.fixture()
def url() -> Iterator[str]:
    """Base URL of an example server on a free port, served from a thread."""
    server = example.make_server()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    yield f"http://{host}:{port}"
    server.shutdown()
    server.server_close()


def call(url: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    """Status and JSON answer of one request."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_health(url: str) -> None:
    status, h = call(url, "/health")
    assert status == 200
    assert h == {"protocol": "gym-env/1", "name": "example", "reward_min": 0.0, "reward_max": 1.0, "multi_turn": True}


@pytest.mark.parametrize(
    ("completion", "answer", "ok"),
    [
        ("81", "81", True),
        ("so the total is 1,234.", "1234", True),
        ("first 3 then #### 42 and 7", "42", True),
        ("\\boxed{12} then 5", "12", True),
        ("80", "81", False),
        ("", "81", False),
        ("no number", "#### 5", False),
    ],
)
def test_score(url: str, completion: str, answer: str, ok: bool) -> None:
    status, r = call(url, "/score", {"prompt": "p", "completion": completion, "answer": answer})
    assert status == 200
    assert r == {"reward": 1.0 if ok else 0.0, "correct": ok}


@pytest.mark.parametrize(
    "body",
    [{"prompt": "p", "completion": "1"}, {"prompt": "p", "completion": 1, "answer": "1"}, [1], {"prompt": "p", "completion": "1", "answer": "1", "x": 1}],
)
def test_score_bad_request(url: str, body: Any) -> None:
    status, r = call(url, "/score", body)
    assert status == 400 and r["error"]


def test_guess_the_number(url: str) -> None:
    assert call(url, "/reset", {"session": "s-1", "prompt": "go"})[0] == 200
    lo, hi, steps = 1, 100, 0
    while True:
        guess = (lo + hi) // 2
        status, r = call(url, "/step", {"session": "s-1", "action": str(guess)})
        assert status == 200
        steps += 1
        if r["done"]:
            break
        assert r["reward"] == 0.0
        if r["observation"] == "higher":
            lo = guess + 1
        else:
            assert r["observation"] == "lower"
            hi = guess - 1
    assert r == {"observation": "correct", "reward": 1.0, "done": True}
    assert guess == example.target("s-1", "go") and steps <= 7
    status, r = call(url, "/step", {"session": "s-1", "action": "1"})
    assert status == 400 and "unknown session" in r["error"]


def test_game_ends_after_max_guesses(url: str) -> None:
    call(url, "/reset", {"session": "s-2", "prompt": "go"})
    for i in range(example.MAX_GUESSES):
        status, r = call(url, "/step", {"session": "s-2", "action": "nope"})
        assert status == 200 and r["observation"] == "invalid" and r["reward"] == 0.0
        assert r["done"] == (i == example.MAX_GUESSES - 1)


def test_bad_session_and_path(url: str) -> None:
    assert call(url, "/reset", {"session": "a b", "prompt": "go"})[0] == 400
    assert call(url, "/nothing", {})[0] == 404


def test_body_over_1_mib_refused(url: str) -> None:
    """A Content-Length over 1 MiB is refused before the body is read."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    conn.putrequest("POST", "/score")
    conn.putheader("Content-Length", str(example.MAX_BODY + 1))
    conn.endheaders()
    resp = conn.getresponse()
    assert resp.status == 413 and "at most" in json.loads(resp.read())["error"]
    conn.close()


def test_not_json(url: str) -> None:
    req = urllib.request.Request(url + "/score", data=b"{nope", headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=5)
    assert e.value.code == 400 and b"not JSON" in e.value.read()
