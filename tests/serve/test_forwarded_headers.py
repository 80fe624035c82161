"""A client is its socket's peer, never a header (attack round 9).

uvicorn trusts ``X-Forwarded-For`` from 127.0.0.1 by default: a local client
(or every remote one behind a forwarder on loopback) could name any key, take
another client's share from it (framing) or take a share under each of many
names (sybil). Both servers run without proxy headers.
"""

from __future__ import annotations

import httpx

from llm_envs.serve.app import ServeSettings, serving
from llm_envs.serve.families import Defaults

DEBATE = Defaults("debate", {"num_agents": 3, "max_rounds": 2}, "arithmetic")


def test_a_forwarded_for_header_neither_frames_nor_multiplies_a_client():
    settings = ServeSettings(defaults=DEBATE, max_episodes=8, max_episodes_per_client=1)
    with serving(settings) as url:
        local = httpx.Client(base_url=url, timeout=30)
        other = httpx.Client(
            base_url=url, timeout=30, transport=httpx.HTTPTransport(local_address="127.0.0.2")
        )
        with local, other:
            named = {"X-Forwarded-For": "127.0.0.2"}
            assert local.post("/episodes", json={"problem": 0}, headers=named).status_code == 201
            # The header named 127.0.0.2, but the episode is 127.0.0.1's: 127.0.0.2 keeps its share.
            assert other.post("/episodes", json={"problem": 1}).status_code == 201
            for key in ("10.0.0.1", "10.0.0.2"):  # other names are not other clients
                refused = local.post(
                    "/episodes", json={"problem": 2}, headers={"X-Forwarded-For": key}
                )
                assert refused.status_code == 503
                assert "client 127.0.0.1 runs 1 episodes" in refused.json()["detail"]
