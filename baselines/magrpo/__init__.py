"""MAGRPO: multi-agent GRPO on the code-collaboration env (the MAGRPO paper).

* :mod:`baselines.magrpo.config`: :class:`MAGRPOConfig`.
* :mod:`baselines.magrpo.tree`: growing the trees of joint actions (no torch).
* :mod:`baselines.magrpo.credit`: returns and advantages on a tree (plain Python).
* :mod:`baselines.magrpo.trainer`: :class:`MAGRPOTrainer`, :func:`train`, :func:`main`.

``python -m baselines.magrpo --help`` lists the flags.
"""

from __future__ import annotations

from baselines.magrpo.config import MAGRPOConfig

__all__ = ["MAGRPOConfig"]
