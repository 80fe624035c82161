"""Adapters that make llm-envs environments those of other RL libraries.

Each module needs its library installed and is imported on its own
(``llm_envs.adapters.verifiers_env``: verifiers 0.4); importing
:mod:`llm_envs` imports none of them, and this package imports nothing.
"""
