"""Deprecated alias of :mod:`llm_envs.bridges.openenv` for one release: import that instead."""

from llm_envs.moved import moved_module

moved_module(__name__, "llm_envs.bridges.openenv")
