"""Deprecated: the bridges to other libraries are in :mod:`llm_envs.bridges` (gone next release)."""
