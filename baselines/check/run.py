"""Run every check on one family: build it from the registry, play its plans, read the checks.

What is played (the family's own plans, with the family's own players):

1. **conformance**: PettingZoo's api and seed tests and this project's
   (:mod:`llm_envs.testing.conformance`) on the environment of the family's
   training plan and on every PettingZoo id it registered.
2. The **evaluation plan** of ``problems`` groups, the measured seats played by
   the reference players, then by the empty answer, then by random text, the
   other seats by the reference players: the ``reference`` check. The
   reference's episodes are then replayed all at once beside CPU burners:
   ``stable_under_load``.
3. The **training plan** of ``groups`` groups, each seat of each episode
   played by one of the family's players (its scripted sets, its teacher),
   the empty answer or random text, drawn with the seed: a stand-in for an
   untrained model that sometimes succeeds: ``reward_variance``.
4. The first two groups of the training plan, seated as in 3 and then among
   the family's own players, twice, with fresh players: ``determinism``.
5. For a judged family (its answers report ``vote_agreement`` or
   ``vote_lower_seat``), ``judge_groups`` groups of the training plan with every
   seat drawn from the family's own players only: ``judge``, read from the
   reference players' answers.
6. With a model, the training plan with the model in every seat:
   ``reward_variance[model]`` and ``judge[model]``.

``reward_range`` reads every return of 2-6; ``step_time`` the environments'
time in 2-5. A check that raises is a FAIL naming the exception: the family
under test may be anyone's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pettingzoo import ParallelEnv

from baselines.check import checks
from baselines.check.checks import CheckResult, skipped
from baselines.check.config import CheckConfig
from baselines.check.play import Play, play, play_loaded
from baselines.check.players import (
    EMPTY,
    RANDOM_TEXT,
    REFERENCE,
    Missing,
    RandomText,
    empty_answer,
    player_sets,
    reference_players,
)
from baselines.env_families import family_of
from baselines.samplers.base import Policy, SamplingParams
from llm_envs.family import Family
from llm_envs.registration import entries
from llm_envs.seeding import derive_seed

__all__ = ["CheckReport", "run_checks"]

_FAILING = (EMPTY, RANDOM_TEXT)
_SALT = 0xC4EC  # the seat draws' own stream, apart from the plans' and the players' seeds


@dataclass
class CheckReport:
    """Every check's result for one family, and what was played.

    Attributes:
        family: the family's name.
        config: the settings, as JSON values.
        results: the checks, in the order they ran.
        seconds: the wall-clock time of the whole check.
        players: the player sets the family has, by name.
    """

    family: str
    config: dict[str, Any]
    results: list[CheckResult] = field(default_factory=list)
    seconds: float = 0.0
    players: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[CheckResult]:
        """The checks that failed."""
        return [r for r in self.results if r.status == "FAIL"]


@contextlib.contextmanager
def _guarded(report: CheckReport, name: str) -> Iterator[None]:
    """Run one check: a missing capability is a SKIP naming it, anything raised a FAIL."""
    try:
        yield
    except Missing as missing:
        report.results.append(skipped(name, f"no {missing.capability}: {missing.reason}"))
    except Exception as exc:  # the family under test may be anyone's: report, go on
        text = f"{type(exc).__name__}: {exc}"
        report.results.append(CheckResult(name, "FAIL", f"raised {text[:400]}"))


def conformance(family: Family, name: str, config: CheckConfig) -> CheckResult:
    """PettingZoo's tests and ours on the family's training env and its registered ids."""
    import functools

    import pettingzoo

    from llm_envs.testing.conformance import check_aec_env, check_parallel_env

    def plan_env() -> Any:
        return family.training([0], config.seed).envs[0]

    kind = "parallel" if isinstance(plan_env(), ParallelEnv) else "aec"
    factories: dict[str, tuple[str, Callable[[], Any]]] = {"training env": (kind, plan_env)}
    for entry in entries():
        if entry.family == name and entry.id:
            factories[f"{entry.env_type} {entry.id}"] = (
                entry.env_type,
                functools.partial(pettingzoo.make, entry.env_type, entry.id),
            )
    failures: dict[str, str] = {}
    for label, (env_type, factory) in factories.items():
        checker = check_parallel_env if env_type == "parallel" else check_aec_env
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # PettingZoo's tests print as they go
                checker(factory, num_cycles=config.conformance_cycles)
        except Exception as exc:
            failures[label] = f"{type(exc).__name__}: {exc}"[:400]
    numbers = {"envs": list(factories), "failures": failures}
    if failures:
        label, why = next(iter(failures.items()))
        summary = f"{len(failures)} of {len(factories)} envs fail; {label}: {why}"
        return CheckResult("conformance", "FAIL", summary, numbers)
    summary = (
        f"{len(factories)} envs pass PettingZoo's and llm-envs' tests ({', '.join(factories)})"
    )
    return CheckResult("conformance", "PASS", summary, numbers)


def _drawn(names: list[str], seed: int) -> Callable[[int, str], str]:
    """A seating that draws each seat's player from ``names``, fixed by seed, episode and seat."""

    def seating(index: int, agent: str) -> str:
        rng = np.random.default_rng([seed & 0xFFFFFFFF, _SALT, index, *agent.encode()])
        return names[int(rng.integers(len(names)))]

    return seating


def _own(sets: Mapping[str, Any]) -> list[str]:
    """The names of the family's own players (every set but the empty and the random answer)."""
    return [name for name in sets if name not in _FAILING]


def _first_groups(family: Family, groups: list[int], seed: int) -> Play:
    """``groups`` played with every player, then with the family's own (fresh players)."""
    sets = player_sets(family, seed, groups)
    played = play(family.training(groups, seed), sets, _drawn(list(sets), seed))
    own_sets = player_sets(family, seed, groups)
    if _own(own_sets):
        drawn = _drawn(_own(own_sets), derive_seed(seed, 1))
        played = played + play(family.training(groups, seed), own_sets, drawn)
    return played


def _candidate(name: str, seats: Sequence[frozenset[str]]) -> Callable[[int, str], str]:
    """``name`` in each episode's measured (trained) seats, the reference players elsewhere."""
    return lambda index, agent: name if agent in seats[index] else REFERENCE


def run_checks(config: CheckConfig, *, model: Policy | None = None) -> CheckReport:
    """Run every check on ``config.env`` (see the module docstring).

    Args:
        config: the settings.
        model: the loaded ``config.model`` (:func:`load_model`), which also plays
            the training groups; None: the scripted players alone.

    Raises:
        ValueError: the family refuses the settings (before anything is played).
    """
    start = time.perf_counter()
    family = family_of(config)
    name = config.env.rpartition(":")[2]
    report = CheckReport(family.name or name, dataclasses.asdict(config))
    with contextlib.suppress(Exception):  # a family whose players raise: each check says so
        report.players = list(player_sets(family, config.seed, range(config.groups)))
    declared = getattr(family, "reward_range", None)
    with _guarded(report, "conformance"):
        report.results.append(conformance(family, name, config))
    scripted = _reference_checks(report, family, config, declared)
    scripted += _training_checks(report, family, config)
    scripted += _judge_check(report, family, config, scripted)
    model_plays = _model_checks(report, family, config, model, scripted)
    with _guarded(report, "reward_range"):
        report.results.append(checks.reward_range([*scripted, *model_plays], declared))
    with _guarded(report, "step_time"):
        report.results.append(checks.step_time(scripted, config.max_step_seconds))
    report.seconds = time.perf_counter() - start
    return report


def _reference_checks(
    report: CheckReport, family: Family, config: CheckConfig, declared: tuple[float, float] | None
) -> list[Play]:
    """2: the reference against the empty and the random answer, then its episodes under load."""
    plays: dict[str, Play] = {}
    problems = list(range(config.problems))
    with _guarded(report, "reference"):
        sets: dict[str, Any] = {
            REFERENCE: reference_players(family),
            EMPTY: empty_answer,
            RANDOM_TEXT: RandomText(config.seed),
        }
        for candidate in (REFERENCE, *_FAILING):
            plan = family.evaluation(problems, config.seed)
            plays[candidate] = play(plan, sets, _candidate(candidate, plan.trained_agents))
        report.results.append(checks.reference(plays, declared, config.min_margin))
    with _guarded(report, "stable_under_load"):
        if REFERENCE not in plays:
            raise Missing("reference episodes", "the reference check played none (see its line)")
        burners = config.burners or os.cpu_count() or 1
        loaded = play_loaded(
            family.evaluation(problems, config.seed),
            {REFERENCE: reference_players(family)},
            lambda index, agent: REFERENCE,
            burners,
        )
        report.results.append(checks.stable_under_load(plays[REFERENCE], loaded, burners))
    return list(plays.values())


def _training_checks(report: CheckReport, family: Family, config: CheckConfig) -> list[Play]:
    """3 and 4: the training groups of a drawn mix of players; the first two, twice."""
    played: list[Play] = []
    groups = list(range(config.groups))
    with _guarded(report, "reward_variance"):
        sets = player_sets(family, config.seed, groups)
        if not _own(sets):
            raise Missing(
                "scripted players",
                "the family has no reference players, scripted sets or teacher, and the empty "
                "and the random answer alone show nothing (give --model)",
            )
        mixed = play(family.training(groups, config.seed), sets, _drawn(list(sets), config.seed))
        played.append(mixed)
        who = f"seats drawn from {', '.join(sets)}"
        report.results.append(
            checks.reward_variance("reward_variance", mixed, config.min_varied_share, who)
        )
    with _guarded(report, "determinism"):
        two = [_first_groups(family, groups[:2], config.seed) for _ in range(2)]
        played += two
        report.results.append(checks.determinism(*two))
    return played


def _judge_check(
    report: CheckReport, family: Family, config: CheckConfig, scripted: list[Play]
) -> list[Play]:
    """5: a judged family's reference judges, among the family's own players."""
    with _guarded(report, "judge"):
        if not checks.is_judged(scripted):
            raise Missing(
                "judging infos",
                "no answer reported vote_agreement or vote_lower_seat (not a judged family)",
            )
        groups = list(range(config.judge_groups))
        sets = player_sets(family, config.seed, groups)
        own = _own(sets)
        if REFERENCE not in own:
            raise Missing("reference_players", "no scripted set named 'reference' to judge with")
        judged = play(
            family.training(groups, config.seed), sets, _drawn(own, derive_seed(config.seed, 1))
        )
        report.results.append(
            checks.judge(
                "judge",
                judged,
                {REFERENCE},
                f"reference judges among {', '.join(own)}",
                min_agreement=config.min_judge_agreement,
                max_bias=config.max_position_bias,
                min_votes=config.min_votes,
            )
        )
        return [judged]
    return []


def _model_checks(
    report: CheckReport,
    family: Family,
    config: CheckConfig,
    model: Policy | None,
    scripted: list[Play],
) -> list[Play]:
    """6: the model in every seat of the training groups."""
    if model is None:
        for check in ("reward_variance[model]", "judge[model]"):
            report.results.append(skipped(check, "no --model given"))
        return []
    played: list[Play] = []
    who = config.model or "the model"
    with _guarded(report, "reward_variance[model]"):
        params = SamplingParams(
            max_tokens=config.max_tokens, temperature=config.temperature, seed=config.seed
        )
        plan = family.training(list(range(config.groups)), config.seed)
        played.append(play(plan, {"model": model}, lambda index, agent: "model", params))
        turns, seconds = played[0].steps, played[0].policy_seconds
        per_turn = f"{seconds / turns:.2g} s of sampling per turn" if turns else "no turn"
        result = checks.reward_variance(
            "reward_variance[model]",
            played[0],
            config.min_varied_share,
            f"{who} in every seat; {per_turn}",
        )
        result.numbers.update(turns=turns, sampling_seconds=seconds)
        report.results.append(result)
    with _guarded(report, "judge[model]"):
        if not played:
            raise Missing("model play", "the model did not play (see reward_variance[model])")
        if not checks.is_judged([*scripted, *played]):
            raise Missing("judging infos", "no answer reported vote_agreement or vote_lower_seat")
        report.results.append(
            checks.judge(
                "judge[model]",
                played[0],
                None,
                f"{who} judging",
                min_agreement=config.min_judge_agreement,
                max_bias=config.max_position_bias,
                min_votes=config.min_votes,
            )
        )
    return played


def load_model(spec: str) -> Policy:
    """The sampler of a model spec (``tiny``, a folder, a Hugging Face id, a server), on CPU.

    Raises:
        FileNotFoundError: a folder that is not a model (the message says what to pass).
    """
    from baselines.eval.entrants import build_policies, parse_entrant

    entrant = parse_entrant(spec)
    return build_policies([entrant], device="cpu")[entrant.name]
