"""The bounds of what a remote client may set (llm_envs.client_settings), and each family's."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_envs.client_settings import (
    ClientSettings,
    Fields,
    Flag,
    Number,
    OneOf,
    SubsetOf,
    Text,
    Whole,
    refusal,
)
from llm_envs.code_collab.config import CodeCollabConfig
from llm_envs.debate.config import DebateConfig
from llm_envs.expert_iteration.config import ExpertIterationConfig
from llm_envs.registration import family_class
from llm_envs.tasks import ArithmeticTask
from llm_envs.textarena.config import TextArenaConfig

CASES = [
    (Whole(2, 8), 2, True),
    (Whole(2, 8), 8, True),
    (Whole(2, 8), 9, False),
    (Whole(2, 8), 1, False),
    (Whole(2, 8), True, False),  # a bool is not a number of agents
    (Whole(2, 8), 3.0, False),
    (Whole(2, 8), "3", False),
    (Number(0, 1), 0.5, True),
    (Number(0, 1), 1, True),
    (Number(0, 1), math.nan, False),
    (Number(0, 1), math.inf, False),
    (Number(0, 1), True, False),
    (Number(0, 1), None, False),
    (Number(0, 1, nullable=True), None, True),
    (OneOf(("a", None)), "a", True),
    (OneOf(("a", None)), None, True),
    (OneOf(("a", None)), "b", False),
    (OneOf((1,)), True, False),  # True == 1, but it is not the value declared
    (Flag(), False, True),
    (Flag(), 0, False),
    (Text(3), "abc", True),
    (Text(3), "abcd", False),
    (Text(3), None, False),
    (Text(3, nullable=True), None, True),
    (SubsetOf(("+", "-")), ["-", "+"], True),
    (SubsetOf(("+", "-")), [], False),
    (SubsetOf(("+", "-")), ["+", "+"], False),
    (SubsetOf(("+", "-")), ["*"], False),
    (SubsetOf(("+", "-")), "+", False),
    (Fields({"a": Whole(0, 1)}), {}, True),
    (Fields({"a": Whole(0, 1)}), {"a": 1}, True),
    (Fields({"a": Whole(0, 1)}), {"a": 2}, False),
    (Fields({"a": Whole(0, 1)}), {"b": 0}, False),
    (Fields({"a": Whole(0, 1)}), [], False),
]


@pytest.mark.parametrize(("bound", "value", "inside"), CASES)
def test_a_bound_takes_its_values_only(bound, value, inside):
    assert (value in bound) is inside


@given(low=st.integers(-100, 100), span=st.integers(0, 100), value=st.integers())
def test_a_whole_bound_is_its_closed_range(low, span, value):
    assert (value in Whole(low, low + span)) == (low <= value <= low + span)


@given(value=st.floats(allow_nan=True, allow_infinity=True))
def test_a_number_bound_takes_finite_numbers_in_range_only(value):
    assert (value in Number(-1, 1)) == (math.isfinite(value) and -1 <= value <= 1)


DECLARED = ClientSettings(env_kwargs={"num_agents": Whole(2, 8)})
REFUSALS = [
    (DECLARED, {"num_agents": 3}, {}, None),
    (
        DECLARED,
        {"num_agents": 100000},
        {},
        "env_kwargs num_agents=100000 is out of bounds for a client of env 'toy': it takes an "
        "int in [2, 8]; send such a value, or start the server with --env toy --env-kwargs "
        """'{"num_agents": ...}' (its own settings are not bounded)""",
    ),
    (
        DECLARED,
        {"timeout": 3600},
        {},
        "env_kwargs 'timeout' is not a setting a client may pass to env 'toy' (a client may set "
        "num_agents (an int in [2, 8])); leave it out, or start the server with --env toy "
        """--env-kwargs '{"timeout": ...}' (its own settings are not bounded)""",
    ),
    (
        DECLARED,
        {},
        {"seed": 1},
        "task_kwargs 'seed' is not a setting a client may pass to env 'toy' (env 'toy' lets a "
        "client set no task_kwargs); leave it out, or start the server with --env toy "
        """--task-kwargs '{"seed": ...}' (its own settings are not bounded)""",
    ),
    (None, {}, {}, None),  # a family that declares nothing takes a request that sets nothing
    (
        None,
        {"num_agents": 3},
        {},
        "env_kwargs 'num_agents' is not a setting a client may pass to env 'toy' (env 'toy' lets "
        "a client set no env_kwargs); leave it out, or start the server with --env toy "
        """--env-kwargs '{"num_agents": ...}' (its own settings are not bounded)""",
    ),
]


@pytest.mark.parametrize(("declared", "env_kwargs", "task_kwargs", "message"), REFUSALS)
def test_a_refusal_names_the_setting_the_bound_and_the_fix(
    declared, env_kwargs, task_kwargs, message
):
    assert refusal(declared, "toy", env_kwargs, task_kwargs) == message


def _fields(config: type) -> set[str]:
    return {f.name for f in dataclasses.fields(config)}


# Each family's declared settings are its env's arguments (no typo opens nothing) and
# never a resource or a data source: those are the server's alone.
ARGUMENTS = {
    "debate": (_fields(DebateConfig) | {"reward", "shaping"}, _fields(ArithmeticTask)),
    "code_collab": (_fields(CodeCollabConfig), {"num_problems"}),
    "expert_iteration": (_fields(ExpertIterationConfig), _fields(ArithmeticTask)),
    "textarena": (_fields(TextArenaConfig), set()),
}
SERVERS_ALONE = {
    "timeout",
    "code_timeout",
    "code_runner",
    "problems",
    "questions",
    "sandbox",
    "expert",
    "game_kwargs",
}


@pytest.mark.parametrize("env", sorted(ARGUMENTS))
def test_a_family_declares_its_own_arguments_and_no_resource(env):
    declared = family_class(env).client_settings
    env_arguments, task_arguments = ARGUMENTS[env]
    assert set(declared.env_kwargs) <= env_arguments
    assert set(declared.task_kwargs) <= task_arguments
    assert not (set(declared.env_kwargs) | set(declared.task_kwargs)) & SERVERS_ALONE


@pytest.mark.parametrize(
    ("env", "name", "bound"),
    [
        ("debate", "num_agents", Whole(2, 8)),
        ("debate", "max_rounds", Whole(1, 5)),
        ("code_collab", "num_turns", Whole(1, 4)),
        ("textarena", "max_turns", Whole(1, 400)),
    ],
)
def test_the_sizes_a_client_may_ask_for(env, name, bound):
    assert family_class(env).client_settings.env_kwargs[name] == bound
