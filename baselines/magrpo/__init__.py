"""MAGRPO: multi-agent GRPO on the code-collaboration env (seed 004).

* :mod:`baselines.magrpo.config`: :class:`MAGRPOConfig`.
* :mod:`baselines.magrpo.tree`: growing the trees of joint actions (no torch).
* :mod:`baselines.magrpo.credit`: returns and advantages on a tree (plain Python).
* :mod:`baselines.magrpo.trainer`: :class:`MAGRPOTrainer`, :func:`train`, :func:`main`.

``python -m baselines.magrpo --help`` lists the flags.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baselines._lazy import lazy_attributes

if TYPE_CHECKING:
    from baselines.magrpo.config import MAGRPOConfig
    from baselines.magrpo.trainer import MAGRPOTrainer, main, train

__all__ = ["MAGRPOConfig", "MAGRPOTrainer", "main", "train"]

__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "MAGRPOConfig": ".config",
        "MAGRPOTrainer": ".trainer",
        "main": ".trainer",
        "train": ".trainer",
    },
    moved={
        "policy_gradient_loss": "baselines.training.losses:reinforce_loss",
        "shared_prompt_logprobs": "baselines.training.forward:shared_prompt_logprobs",
    },
)
