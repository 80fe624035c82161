"""Deprecated: :mod:`llm_envs.sandbox.service.scripts` (this name goes in the next release)."""

from llm_envs.moved import moved_module

moved_module(__name__, "llm_envs.sandbox.service.scripts")
