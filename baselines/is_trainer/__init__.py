"""The importance-sampling trainer (seed 001"s loop, run locally in torch).

* :mod:`baselines.is_trainer.config`: :class:`ISTrainerConfig`, every setting
  documented once (the command line and the docs table are built from it).
* :mod:`baselines.is_trainer.trainer`: :class:`ISTrainer`, :func:`train` and
  :func:`main`.

``python -m baselines.is_trainer --help`` lists the flags.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baselines._lazy import lazy_attributes

if TYPE_CHECKING:
    from baselines.is_trainer.config import ISTrainerConfig
    from baselines.is_trainer.trainer import ISTrainer, main, train

__all__ = ["ISTrainer", "ISTrainerConfig", "main", "train"]

__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "ISTrainer": ".trainer",
        "ISTrainerConfig": ".config",
        "main": ".trainer",
        "train": ".trainer",
    },
)
