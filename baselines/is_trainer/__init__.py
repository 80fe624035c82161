"""The importance-sampling trainer (the debate recipe's loop, run locally in torch).

* :mod:`baselines.is_trainer.config`: :class:`ISTrainerConfig`, every setting
  documented once (the command line and the docs table are built from it).
* :mod:`baselines.is_trainer.trainer`: :class:`ISTrainer`, :func:`train` and
  :func:`main`.

``python -m baselines.is_trainer --help`` lists the flags.
"""

from __future__ import annotations

from baselines.is_trainer.config import ISTrainerConfig

__all__ = ["ISTrainerConfig"]
