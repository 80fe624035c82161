"""The bridges' old import paths still work for one release, warning with the new path."""

from __future__ import annotations

import importlib
import sys

import pytest


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("llm_envs.serve.openenv_view", "llm_envs.bridges.openenv"),
        ("baselines.grpo.environment", "llm_envs.bridges.trl"),
        ("baselines.grpo.remote", "llm_envs.bridges.trl"),
        ("baselines.grpo.family_rollout", "baselines.grpo.rollout_func"),
    ],
)
def test_an_old_path_warns_and_is_the_new_module(monkeypatch, old, new):
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated: import {new} instead"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)


def test_the_old_adapters_module_warns_and_keeps_its_names(monkeypatch):
    monkeypatch.delitem(sys.modules, "baselines.grpo.adapters", raising=False)
    with pytest.warns(DeprecationWarning, match="import baselines.grpo.rollout_func"):
        old = importlib.import_module("baselines.grpo.adapters")
    from baselines.grpo.reward import env_reward
    from baselines.grpo.rollout_func import EnvRollout

    assert (old.EnvRollout, old.env_reward) == (EnvRollout, env_reward)
