"""Old import paths kept for one release: the old module is the new one, with a warning."""

from __future__ import annotations

import importlib
import sys
import warnings

__all__ = ["moved_module"]


def moved_module(old: str, new: str) -> None:
    """Make the module being imported as ``old`` the module ``new``, warning with the new path.

    Called at the top level of the old module, ``moved_module(__name__, "pkg.new")``:
    ``import old`` gives ``pkg.new`` itself, and a DeprecationWarning naming it
    at the importer's line.
    """
    warnings.warn(f"{old} is deprecated: import {new} instead", DeprecationWarning, stacklevel=3)
    sys.modules[old] = importlib.import_module(new)
