"""Environment servers: gym's HTTP + JSON protocol gym-env/1 (docs/environments.md).

``gym_protocol.env.example`` is an example server: a numeric-answer reward at
``/score`` and a multi-turn "guess the number" game at ``/reset`` and ``/step``.
"""

PROTOCOL = "gym-env/1"
MAX_BODY = 1 << 20
