"""Package attributes imported on first use, so a package's light modules stay light.

``baselines.magrpo`` exports its trainer (torch, transformers) beside its credit
rules (plain Python): with :func:`lazy_attributes`, ``import
baselines.magrpo.credit`` loads neither torch nor transformers, and
``from baselines.magrpo import MAGRPOTrainer`` still works.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(
    package: str, sources: Mapping[str, str], moved: Mapping[str, str] | None = None
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: each name of ``sources`` from its module.

    Args:
        package: the package's ``__name__``.
        sources: ``{attribute: module}``, the module relative to ``package``
            (``".trainer"``) or absolute.
        moved: ``{old attribute: "module:new attribute"}``, names that moved
            elsewhere: still returned, with a :class:`DeprecationWarning`.
    """
    moved = dict(moved or {})

    def __getattr__(name: str) -> Any:
        if name in moved:
            module, new = moved[name].split(":")
            warnings.warn(
                f"{package}.{name} moved to {module}.{new} in llm-envs 0.2",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(importlib.import_module(module), new)
        if name not in sources:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(sources[name], package), name)

    def __dir__() -> list[str]:
        return sorted(set(sources) | set(vars(sys.modules[package])))

    return __getattr__, __dir__
