"""The module paths of 0.1, before ``baselines`` was put in folders: importable, deprecated.

``import baselines.magrpo_credit`` still works and returns
:mod:`baselines.magrpo.credit` itself (the same module object, so patching one
patches the other), with a :class:`DeprecationWarning` naming the new path. The
table below is the whole deprecation path; the changelog lists it too.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

__all__ = ["MOVED_MODULES", "install"]

MOVED_MODULES: dict[str, str] = {
    "baselines.advantages": "baselines.data.advantages",
    "baselines.env_metrics": "baselines.data.episode_metrics",
    "baselines.forward": "baselines.training.forward",
    "baselines.losses": "baselines.training.losses",
    "baselines.checkpoints": "baselines.training.checkpoints",
    "baselines.is_config": "baselines.is_trainer.config",
    "baselines.magrpo_config": "baselines.magrpo.config",
    "baselines.magrpo_credit": "baselines.magrpo.credit",
    "baselines.magrpo_tree": "baselines.magrpo.tree",
    "baselines.grpo_adapters": "baselines.grpo.adapters",
    "baselines.grpo_assembly": "baselines.grpo.assembly",
    "baselines.trainer_samplers": "baselines.policies.build",
}
"""``{old module: new module}`` for every module that moved in 0.2."""


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old module path and loads the module at its new path."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED_MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED_MODULES[spec.name]
        warnings.warn(
            f"{spec.name} moved to {new} in llm-envs 0.2; import {new} instead",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module at the new path is already loaded."""


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder())
