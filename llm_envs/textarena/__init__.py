"""Any TextArena game as a PettingZoo environment: language models play text games.

Importing this package does not import :mod:`textarena` (slow, and it pulls
``openai`` and ``nltk``); building an environment does.

>>> from llm_envs.textarena import env
>>> game = env(game="KuhnPoker-v0")
"""

from llm_envs.textarena.config import DEFAULT_GAME, TextArenaConfig
from llm_envs.textarena.env import INVALID_MOVE, METRICS, TextArenaEnv, env, outcomes, raw_env
from llm_envs.textarena.game import known_games

__all__ = [
    "DEFAULT_GAME",
    "INVALID_MOVE",
    "METRICS",
    "TextArenaConfig",
    "TextArenaEnv",
    "env",
    "known_games",
    "outcomes",
    "raw_env",
]
