"""Package attributes imported on first use, so a package's light modules stay light.

``baselines.magrpo`` exports its trainer (torch, transformers) beside its credit
rules (plain Python): with :func:`lazy_attributes`, ``import
baselines.magrpo.credit`` loads neither torch nor transformers, and
``from baselines.magrpo import MAGRPOTrainer`` still works.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(
    package: str, sources: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: each name of ``sources`` from its module.

    Args:
        package: the package's ``__name__``.
        sources: ``{attribute: module}``, the module relative to ``package``
            (``".trainer"``) or absolute.
    """

    def __getattr__(name: str) -> Any:
        if name not in sources:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(sources[name], package), name)

    def __dir__() -> list[str]:
        return sorted(set(sources) | set(globals()))

    return __getattr__, __dir__
