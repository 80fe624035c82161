"""Conformance tests users can run on their own envs (:mod:`llm_envs.testing.conformance`).

A family's own strategies and invariant checks live in its folder: the pairwise
(vote-based) reward strategies and checks are :mod:`llm_envs.debate.testing`.
"""

__all__: list[str] = []
