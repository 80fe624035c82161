"""``baselines.policies`` still imports for one release, warning with the new path."""

from __future__ import annotations

import importlib
import sys

import pytest


def test_the_old_package_warns_and_is_the_new_one(monkeypatch):
    for name in [
        m for m in sys.modules if m == "baselines.policies" or m.startswith("baselines.policies.")
    ]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.warns(DeprecationWarning, match="baselines.samplers"):
        old = importlib.import_module("baselines.policies.openai_policy")
    import baselines.samplers.openai_policy as new

    assert old is new
    assert importlib.import_module("baselines.policies").Completion is new.Completion
