"""The episode server: llm-envs environments over HTTP and WebSocket, one client per seat.

``python -m llm_envs.serve --env debate --task arithmetic --port 8000 --records DIR``
serves any registered environment: many concurrent episodes, each seat its
own client session, the environment's own turn order and rewards
(:mod:`llm_envs.serve.hub`), and single seats against a family's reference
players in OpenEnv's protocol (:mod:`llm_envs.bridges.openenv`).
``docs/serve.md`` describes the protocol.

``import llm_envs`` never imports this package; it is the only part of
llm-envs that imports fastapi, uvicorn and openenv (the ``serve`` extra).
This module itself imports none of them.
"""
