"""The module-level factories: what raw_env, env and parallel_env build, and how they read."""

from __future__ import annotations

import importlib
import pickle

import pytest
from pettingzoo.utils.wrappers import BaseWrapper, OrderEnforcingWrapper

from llm_envs.debate import WinMinusLossReward, WinRateReward
from llm_envs.factories import wrap_aec
from tests.code_collab.cases import F_PROBLEM

# The env modules (each package's attribute `env` is the factory, not the module).
debate = importlib.import_module("llm_envs.debate.env")
expert_iteration = importlib.import_module("llm_envs.expert_iteration.env")
code_collab = importlib.import_module("llm_envs.code_collab.env")
CODE = {"problems": [F_PROBLEM]}


@pytest.mark.parametrize(
    ("factory", "kwargs", "built"),
    [
        (debate.raw_env, {}, debate.DebateEnv),
        (expert_iteration.raw_env, {}, expert_iteration.ExpertIterationEnv),
        (code_collab.raw_env, CODE, code_collab.CodeCollabAECEnv),
        (code_collab.parallel_env, CODE, code_collab.CodeCollabEnv),
    ],
)
def test_raw_factories_build_the_bare_environment(factory, kwargs, built):
    assert type(factory(**kwargs)) is built


@pytest.mark.parametrize(
    ("factory", "kwargs", "unwrapped"),
    [
        (debate.env, {}, debate.DebateEnv),
        (expert_iteration.env, {}, expert_iteration.ExpertIterationEnv),
        (code_collab.env, CODE, code_collab.CodeCollabAECEnv),
    ],
)
def test_env_factories_add_the_order_checks(factory, kwargs, unwrapped):
    game = factory(**kwargs)
    assert isinstance(game, OrderEnforcingWrapper)
    assert type(game.unwrapped) is unwrapped
    with pytest.raises(Exception, match="reset"):
        game.step("text before reset")


@pytest.mark.parametrize(
    ("reward", "inner"),
    [("win_rate", WinRateReward), ("win_minus_loss", WinMinusLossReward), (None, debate.DebateEnv)],
)
def test_debate_env_puts_its_reward_wrapper_inside_the_order_checks(reward, inner):
    game = debate.env(reward=reward)
    assert isinstance(game, OrderEnforcingWrapper)
    assert type(game.env) is inner


def test_debate_env_names_a_bad_reward():
    with pytest.raises(ValueError, match=r"reward must be one of \['win_minus_loss', 'win_rate'\]"):
        debate.env(reward="borda")


def test_factories_pass_a_config_through():
    config = debate.DebateConfig(num_agents=4)
    assert debate.raw_env(config).config is config
    assert debate.env(config, max_rounds=2).unwrapped.config.max_rounds == 2


@pytest.mark.parametrize(
    ("module", "names"),
    [
        (debate, ["raw_env"]),
        (expert_iteration, ["raw_env", "env"]),
        (code_collab, ["parallel_env", "raw_env", "env"]),
    ],
)
def test_generated_factories_read_as_functions_of_the_env_module(module, names):
    for name in names:
        factory = getattr(module, name)
        assert (factory.__module__, factory.__name__, factory.__qualname__) == (
            module.__name__,
            name,
            name,
        )
        assert factory.__doc__
        assert pickle.loads(pickle.dumps(factory)) is factory


class _Passthrough(BaseWrapper):
    """A wrapper that changes nothing, to see where wrap_aec puts it."""


def test_wrap_aec_applies_inner_wrappers_innermost_first():
    game = wrap_aec(debate.DebateEnv(), WinRateReward, _Passthrough)
    assert type(game) is OrderEnforcingWrapper
    assert type(game.env) is _Passthrough
    assert type(game.env.env) is WinRateReward
