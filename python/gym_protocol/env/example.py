"""An example environment server for gym (protocol gym-env/1, docs/environments.md).

Standard library only. ``POST /score`` rewards a completion whose final number
(after the last ``####``, inside the last ``\\boxed{}``, or the last number)
equals the answer's, as gym's built-in ``numeric`` verifier does; ``POST
/reset`` and ``POST /step`` play "guess the number" (1 to 100, answers
``higher``/``lower``/``correct``, reward 1 on a hit, at most 10 guesses).

Run it with ``python -m gym_protocol.env.example --port 8090`` (``--port 0``
picks a free port); the first line on standard output is ``listening on
http://HOST:PORT``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from . import MAX_BODY, PROTOCOL

MAX_GUESSES = 10
MAX_SESSIONS = 10_000
_SESSION = re.compile(r"[A-Za-z0-9._-]{1,128}")
_NUMBER = re.compile(r"-?[0-9]+(?:,[0-9]{3})*(?:\.[0-9]+)?")
_HASHES = re.compile(r"####\s*([^\n]*)")
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


class BadRequest(Exception):
    """A request the server refuses with 400 and its message."""


def extract_number(text: str) -> str | None:
    """The final answer's number in text, as gym's reward.ExtractNumber finds it."""
    for pattern in (_HASHES, _BOXED):
        found = pattern.findall(text)
        if found:
            m = _NUMBER.search(found[-1])
            if m:
                return m.group(0)
    numbers = _NUMBER.findall(text)
    return numbers[-1] if numbers else None


def numbers_match(completion: str, answer: str, tolerance: float = 0.0) -> bool:
    """Whether completion's final number is within tolerance of answer's."""
    a, c = extract_number(answer), extract_number(completion)
    if a is None or c is None:
        return False
    try:
        av, cv = float(a.replace(",", "")), float(c.replace(",", ""))
    except ValueError:
        return False
    return abs(av - cv) <= tolerance


def score(prompt: str, completion: str, answer: str) -> dict[str, Any]:
    """The /score answer: reward 1 and correct when the numbers match, else 0."""
    ok = numbers_match(completion, answer)
    return {"reward": 1.0 if ok else 0.0, "correct": ok}


def target(session: str, prompt: str) -> int:
    """The hidden number of a session: 1 to 100, from SHA-256 of session and prompt."""
    digest = hashlib.sha256(f"{session}\x00{prompt}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 100 + 1


@dataclass
class Game:
    """One "guess the number" session."""

    target: int
    guesses: int = 0
    done: bool = False

    def step(self, action: str) -> dict[str, Any]:
        """Play one guess; the /step answer."""
        self.guesses += 1
        try:
            guess = int(action.strip())
        except ValueError:
            obs = "invalid"
        else:
            obs = "correct" if guess == self.target else ("higher" if guess < self.target else "lower")
        hit = obs == "correct"
        self.done = hit or self.guesses >= MAX_GUESSES
        return {"observation": obs, "reward": 1.0 if hit else 0.0, "done": self.done}


class Environment:
    """The server's state: the sessions of the multi-turn game."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._games: dict[str, Game] = {}

    def health(self) -> dict[str, Any]:
        """The /health answer."""
        return {"protocol": PROTOCOL, "name": "example", "reward_min": 0.0, "reward_max": 1.0, "multi_turn": True}

    def reset(self, session: str, prompt: str) -> dict[str, Any]:
        """Start or restart a session."""
        with self._lock:
            if session not in self._games and len(self._games) >= MAX_SESSIONS:
                self._games = {k: g for k, g in self._games.items() if not g.done}
                if len(self._games) >= MAX_SESSIONS:
                    raise BadRequest("too many open sessions")
            self._games[session] = Game(target(session, prompt))
        return {"observation": f"Guess a whole number from 1 to 100 in at most {MAX_GUESSES} guesses."}

    def step(self, session: str, action: str) -> dict[str, Any]:
        """One guess of a session."""
        with self._lock:
            game = self._games.get(session)
            if game is None:
                raise BadRequest(f"unknown session {session!r} (POST /reset first)")
            if game.done:
                raise BadRequest(f"session {session!r} is over")
            out = game.step(action)
            if game.done:
                del self._games[session]
            return out


def _fields(body: Any, names: tuple[str, ...]) -> list[str]:
    """The string fields names of a request object, exactly those."""
    if not isinstance(body, dict):
        raise BadRequest("want a JSON object")
    if set(body) != set(names):
        raise BadRequest(f"want exactly the fields {', '.join(names)}")
    values = [body[n] for n in names]
    if not all(isinstance(v, str) for v in values):
        raise BadRequest(f"fields {', '.join(names)} must be strings")
    return values


class Handler(BaseHTTPRequestHandler):
    """HTTP handler of the protocol's endpoints."""

    env: Environment
    protocol_version = "HTTP/1.1"
    # Headers and body are two writes: without TCP_NODELAY, Nagle's
    # algorithm and the client's delayed ACK hold the body back ~40 ms.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        """Quiet: no line per request."""

    def _send(self, status: int, obj: dict[str, Any]) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        """GET /health."""
        if self.path == "/health":
            self._send(200, self.env.health())
        else:
            self._send(404, {"error": f"no GET {self.path}"})

    def do_POST(self) -> None:
        """POST /score, /reset, /step."""
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._send(411, {"error": "a Content-Length is required"})
            return
        if length < 0 or length > MAX_BODY:
            self.close_connection = True
            self._send(413, {"error": f"body of {length} bytes, at most {MAX_BODY}"})
            return
        raw = self.rfile.read(length)
        try:
            try:
                body = json.loads(raw)
            except (ValueError, UnicodeDecodeError) as e:
                raise BadRequest(f"not JSON: {e}") from None
            if self.path == "/score":
                out = score(*_fields(body, ("prompt", "completion", "answer")))
            elif self.path == "/reset":
                session, prompt = _fields(body, ("session", "prompt"))
                if not _SESSION.fullmatch(session):
                    raise BadRequest("session: want 1 to 128 bytes of [A-Za-z0-9._-]")
                out = self.env.reset(session, prompt)
            elif self.path == "/step":
                out = self.env.step(*_fields(body, ("session", "action")))
            else:
                self._send(404, {"error": f"no POST {self.path}"})
                return
        except BadRequest as e:
            self._send(400, {"error": str(e)})
            return
        self._send(200, out)


def make_server(host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """A server bound to host:port (0: a free port), not yet serving."""
    handler = type("ExampleHandler", (Handler,), {"env": Environment()})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server


def main(argv: list[str] | None = None) -> int:
    """Serve until interrupted."""
    ap = argparse.ArgumentParser(prog="python -m gym_protocol.env.example", description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8090)
    args = ap.parse_args(argv)
    server = make_server(args.host, args.port)
    host, port = server.server_address[:2]
    print(f"listening on http://{host}:{port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
