"""llm-envs: PettingZoo environments for training language models with multi-agent RL.

Three environment families live here, each a PettingZoo environment whose
observations are chat messages and whose actions are raw text:

* :mod:`llm_envs.debate`: agents answer a question over rounds and vote on each other.
* :mod:`llm_envs.expert_iteration`: search strategies whose sampling context differs
  from the training context.
* :mod:`llm_envs.code_collab`: a helper and a main agent write one program together.

Your own family joins them with :func:`register` (``docs/your_own_environment.md``).

This package is pure Python: it never imports torch or :mod:`baselines`, and an
environment never sees tokens.
"""

__version__ = "0.2.0"

from llm_envs import registration as _registration
from llm_envs.registration import register, unregister

_registration.register_all()

__all__ = ["__version__", "register", "unregister"]
