"""An OpenEnv session idle past the seat timeout is ended: idle clients cannot hold every one.

Attack round 4: with ``--max-sessions 4`` and ``--seat-timeout 10``, four
clients that reset once and then only answered pings held every session for
as long as they stayed (75 s and counting); every other OpenEnv client got
"Server at capacity".
"""

from __future__ import annotations

import time

from openenv.core import GenericEnvClient

from llm_envs.serve.app import ServeSettings, serving
from llm_envs.serve.families import Defaults

TICTACTOE = Defaults("textarena", {"game": "TicTacToe-v0"})


def _served(url: str) -> bool:
    try:
        with GenericEnvClient(base_url=f"{url}/openenv").sync() as env:
            return env.reset(seed=1).done is False
    except Exception:  # OpenEnv's capacity error, or its socket closed
        return False


def test_an_idle_session_is_ended_and_its_place_taken():
    # The idle client's socket stays open after its session ends, and counts against its
    # address's sockets (test_client_shares.py): room for a second one from this address.
    settings = ServeSettings(
        defaults=TICTACTOE, max_sessions=1, max_sessions_per_client=2, seat_timeout=1.0
    )
    with serving(settings) as url, GenericEnvClient(base_url=f"{url}/openenv").sync() as idle:
        idle.reset(seed=0)  # and then nothing: the client answers pings only
        assert not _served(url)  # the one session is taken
        deadline = time.monotonic() + 30  # OpenEnv's reaper looks every 5 s at least
        while not _served(url):
            assert time.monotonic() < deadline, "the idle session still holds the only place"
            time.sleep(1)
