"""The family core and its capabilities (llm_envs.capabilities).

A family that writes only the core is served and trained; each feature that
needs a capability refuses it by name; the built-in families keep what they declare.
"""

from __future__ import annotations

import asyncio
import importlib
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from llm_envs.capabilities import (
    CAPABILITIES,
    EvaluationDetails,
    MissingCapability,
    Teacher,
    TeamReward,
    members,
    provided,
    provides,
    require,
)
from llm_envs.debate import env as debate_env
from llm_envs.debate.agents import scripted_debaters
from llm_envs.family import EpisodePlan, Family, FamilyBase
from llm_envs.registration import make_family, register, unregister
from llm_envs.seeding import derive_seed
from tests.baselines.conftest import tiny_model_dir  # noqa: F401 (a fixture)

DOCS = Path(__file__).resolve().parents[1] / "docs"
SEATS = 3  # a debate of three: every agent has two others' answers to vote on


class CoreOnly(FamilyBase):
    """A family that writes the core and nothing else: debates of the built-in questions."""

    name: ClassVar[str] = "core_only"

    def __init__(
        self,
        env_kwargs: Mapping[str, Any],
        *,
        task: str = "default",
        seed: int = 0,
        task_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self.env_kwargs = {"num_agents": SEATS, "max_rounds": 1, **env_kwargs}
        self.agents = tuple(f"agent_{i}" for i in range(SEATS))

    def training(self, group_indices: Sequence[int], seed: int) -> EpisodePlan:
        keys = [int(g) for g in group_indices]
        return EpisodePlan(
            envs=[debate_env(**self.env_kwargs) for _ in keys],
            seeds=[derive_seed(seed, g) for g in keys],
            options=[{} for _ in keys],
            group_keys=list(range(len(keys))),
            trained_agents=[frozenset(self.agents)] * len(keys),
        )

    def evaluation(self, group_indices: Sequence[int], seed: int) -> EpisodePlan:
        return self.training(group_indices, seed)

    def eval_episode(self, problem: int, seed: int) -> tuple[Any, int, dict[str, Any]]:
        return debate_env(**self.env_kwargs), seed, {}


@pytest.fixture
def core_only() -> Iterator[str]:
    register("core_only", CoreOnly)
    try:
        yield "core_only"
    finally:
        unregister("core_only")


def test_the_core_is_six_members_and_three_run_settings():
    own = [n for n in Family.__annotations__] + [
        n for n, v in vars(Family).items() if callable(v) and not n.startswith("_")
    ]
    core = ["name", "agents", "max_agent_turns", "training", "evaluation", "eval_episode"]
    assert sorted(own) == sorted([*core, "tasks", "run_options", "num_eval_problems"])
    assert {m for c in CAPABILITIES for m in members(c)} & set(own) == set()
    assert provided(CoreOnly) == () and provided(CoreOnly({})) == ()


def test_members_and_what_counts_as_providing_them():
    assert members(Teacher) == ("teacher_options", "demonstrations")
    assert members(EvaluationDetails) == (
        "fixed_opponent",
        "headline_metrics",
        "metric_titles",
        "default_seating",
        "eval_extras",
    )

    class Flagged(CoreOnly):
        team_reward: ClassVar[bool] = False  # False declares nothing
        teacher_options: ClassVar[tuple[str, ...] | None] = ("mistake_rate",)  # half a teacher

    assert not provides(Flagged, TeamReward) and not provides(Flagged, Teacher)
    flagged = Flagged({})
    flagged.reward_range = (0.0, 1.0)  # set on the instance, as a family's __init__ does
    assert provided(flagged) == ("RewardRange",) and provided(Flagged) == ()

    class Referenced(CoreOnly):
        def reference_players(self) -> dict[str, Any]:
            return dict(scripted_debaters(SEATS))

    # FamilyBase offers reference players as the scripted set "reference".
    assert provided(Referenced) == ("ReferencePlayers", "ScriptedPlayers")
    assert sorted(Referenced({}).scripted_players(0)) == ["reference"]


def test_a_refusal_names_the_feature_the_family_the_capability_and_the_fix():
    with pytest.raises(MissingCapability) as refused:
        require(CoreOnly({}), Teacher, by="a warm start", otherwise="use --warm-start-steps 0")
    assert str(refused.value) == (
        "a warm start, and --env core_only has none: its family does not provide Teacher (an "
        "environment author writes teacher_options, demonstrations; "
        "docs/your_own_environment.md); use --warm-start-steps 0"
    )
    assert (refused.value.capability, refused.value.family) == (Teacher, "core_only")
    assert isinstance(refused.value, ValueError)  # callers that catch ValueError still do
    family = make_family("debate", {})
    assert require(family, Teacher, by="a warm start") is family


def _warm_start(name: str) -> None:
    from baselines.is_trainer.config import ISTrainerConfig

    ISTrainerConfig(env=name, warm_start_steps=1)


def _eval_scripted(name: str) -> None:
    from baselines.is_trainer.config import ISTrainerConfig

    ISTrainerConfig(env=name, eval_scripted=True)


def _magrpo(name: str) -> None:
    from baselines.magrpo.config import MAGRPOConfig

    MAGRPOConfig(env=name)


def _magrpo_family(name: str) -> None:
    from baselines.magrpo.roots import check_team_family

    check_team_family(make_family(name, {}), num_turns=1)


def _reference_entrant(name: str) -> None:
    from baselines.eval.arenas import Arena

    Arena(make_family(name, {})).reference()


def _scripted_entrant(name: str) -> None:
    from baselines.eval.arenas import Arena

    Arena(make_family(name, {})).scripted("scripted:random")


def _league_anchor(name: str) -> None:
    from baselines.is_trainer.config import LeagueSettings
    from baselines.is_trainer.league import new_league

    new_league(LeagueSettings(anchors=("scripted:random",)), make_family(name, {}))


def _other_seats(name: str) -> None:
    from llm_envs.seats import family_seat

    family_seat(make_family(name, {}), "agent_0")


def _served_other_seats(name: str) -> None:
    from llm_envs.serve.errors import Invalid
    from llm_envs.serve.families import EpisodeSpec, Families

    try:
        Families().reference_players(EpisodeSpec(name, {}, "default", {}, 0, 0))
    except Invalid as refused:  # the server's 422: its message is the family's refusal
        raise ValueError(str(refused)) from refused


@pytest.mark.parametrize(
    ("feature", "capability"),
    [
        (_warm_start, "Teacher"),
        (_eval_scripted, "ScriptedPlayers"),
        (_magrpo, "TeamReward"),
        (_magrpo_family, "TeamReward"),
        (_reference_entrant, "ReferencePlayers"),
        (_scripted_entrant, "ScriptedPlayers"),
        (_league_anchor, "ScriptedPlayers"),
        (_other_seats, "ReferencePlayers"),
        (_served_other_seats, "ReferencePlayers"),
    ],
    ids=lambda v: getattr(v, "__name__", v),
)
def test_each_feature_refuses_a_core_only_family_naming_the_capability(
    core_only, feature, capability
):
    with pytest.raises(ValueError, match=rf"--env core_only has none: .* provide {capability} "):
        feature(core_only)


@pytest.mark.parametrize(
    ("name", "env_kwargs", "expected"),
    [
        (
            "debate",
            {},
            "Teacher ReferencePlayers ScriptedPlayers EvaluationDetails IndependentAnswers "
            "ServedSettings RewardRange RewardAccounting",
        ),
        (
            "expert_iteration",
            {},
            "ReferencePlayers ScriptedPlayers EvaluationDetails ServedSettings RewardRange "
            "RewardAccounting",
        ),
        (
            "code_collab",
            {},
            "ReferencePlayers ScriptedPlayers TeamReward HeldOutProblems EvaluationDetails "
            "ServedSettings RewardRange RewardAccounting",
        ),
        (
            "textarena",
            {"game": "KuhnPoker-v0"},
            "Teacher ReferencePlayers ScriptedPlayers EvaluationDetails Meter ServedSettings "
            "RewardRange",
        ),
    ],
)
def test_the_built_in_families_declare_what_they_declared(name, env_kwargs, expected):
    assert " ".join(provided(make_family(name, env_kwargs))) == expected
    assert {c.__name__ for c in CAPABILITIES} >= set(expected.split())


@pytest.mark.parametrize("page", ["your_own_environment.md", "architecture.md"])
def test_the_docs_tables_list_every_capability_with_its_members(page):
    rows = (DOCS / page).read_text().splitlines()
    for capability in CAPABILITIES:
        row = next(r for r in rows if r.startswith(f"| `{capability.__name__}` |"))
        assert row.split(" | ")[1] == ", ".join(f"`{m}`" for m in members(capability)), row


def test_the_old_helper_names_warn_and_name_the_new_module():
    family = importlib.import_module("llm_envs.family")
    for name, home in [
        ("derive_seed", "llm_envs.seeding"),
        ("ordered", "llm_envs.seeding"),
        ("fmt", "llm_envs.formatting"),
        ("finite", "llm_envs.formatting"),
    ]:
        with pytest.warns(DeprecationWarning, match=rf"moved to {home}\.{name}"):
            old = getattr(family, name)
        assert old is getattr(importlib.import_module(home), name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from llm_envs.family import EpisodePlan as Kept  # noqa: F401 (no warning)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        family.nope  # noqa: B018


def test_a_core_only_family_is_served(core_only):
    from llm_envs.serve.app import ServeSettings, serving
    from llm_envs.serve.families import Defaults
    from tests.serve.conftest import create, play_seat_ws

    agents = scripted_debaters(SEATS, seed=1)
    settings = ServeSettings(defaults=Defaults(core_only, {}, "default", {}))
    with serving(settings) as url, httpx.Client(base_url=url) as client:
        episode = create(client, problem=2, seed=7)
        assert list(episode["seats"]) == list(CoreOnly({}).agents)

        async def everyone() -> list[list[dict[str, Any]]]:
            seats = [play_seat_ws(url, episode["id"], s, agents[s]) for s in agents]
            return list(await asyncio.gather(*seats))

        received = asyncio.run(everyone())
        finished = client.get(f"/episodes/{episode['id']}").json()
    assert [messages[-1]["type"] for messages in received] == ["end"] * SEATS
    assert finished["status"] == "finished"


@pytest.mark.slow
@pytest.mark.training
def test_a_core_only_family_trains_in_the_is_trainer(core_only, tmp_path, tiny_model_dir):  # noqa: F811
    import json

    from baselines.is_trainer.config import ISTrainerConfig
    from baselines.is_trainer.trainer import train

    config = ISTrainerConfig(
        model=str(tiny_model_dir),
        env=core_only,
        groups_per_batch=2,
        num_iterations=1,
        max_tokens=8,
        sampler="transformers",
        eval_every=1,
        eval_groups=1,
        output_dir=str(tmp_path / "run"),
        progress=False,
    )
    rows = [json.loads(line) for line in train(config).read_text().splitlines()]
    assert [row["iteration"] for row in rows] == [0, 1]
    assert rows[0]["data/num_groups"] == 2
    assert rows[0]["eval/num_episodes"] == SEATS  # one debate, counted once per trained seat
