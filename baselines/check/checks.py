"""The checks of ``llm-envs check``: each a pure reading of played episodes, with its threshold.

Every check returns a :class:`CheckResult`: PASS, FAIL or SKIP, the number it
measured in words, and the numbers for ``check.json``. The formulas:

* **reference**: the mean return of the measured seats (an evaluation
  episode's trained seats, the reference players in the others) with the
  reference player, the empty answer and random text in them; the margin is
  the reference's mean minus the better of the other two, and must reach
  ``min_margin`` times the width of the declared reward range (times 1
  without one).
* **reward_variance**: the share of training groups (episodes with one group
  key) whose measured returns are not all equal (they differ by more than
  :data:`TIE`); it must reach ``min_varied_share``.
* **reward_range**: every return seen is finite and inside the family's
  ``reward_range`` (up to :data:`TIE`).
* **determinism**: two plays of the same seeded episodes with fresh players
  give identical turns (actions, rewards, infos), final rewards and records.
* **judge**: the mean of the answers' ``vote_agreement`` must reach
  ``min_judge_agreement``; the mean of their ``vote_lower_seat`` must be
  within ``max_position_bias`` of one half beyond its 95% margin of error
  (1.96 standard errors of the mean), once ``min_votes`` answers cast strict
  votes (the infos of :func:`llm_envs.debate.shaping.judging_info`).
* **stable_under_load**: the reference episodes' returns alone equal their
  returns replayed all at once beside CPU-burning processes.
* **step_time**: the environments' seconds in ``reset``/``step`` per step.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from baselines.check.play import Episode, Play
from llm_envs.formatting import fmt

__all__ = [
    "TIE",
    "CheckResult",
    "Status",
    "determinism",
    "judge",
    "reference",
    "reward_range",
    "reward_variance",
    "skipped",
    "stable_under_load",
    "step_time",
]

Status = Literal["PASS", "FAIL", "SKIP"]
"""A check's outcome; only FAIL makes the command's exit status non-zero."""

TIE: Final = 1e-9
"""Returns closer than this are equal (sums of float rewards carry rounding)."""

JUDGE_KEYS: Final = ("vote_agreement", "vote_lower_seat")
"""The per-answer infos of a judged family: the judge's agreement with the reference
answer and its share of strict votes for the lower seat (``llm_envs.debate``)."""


@dataclass(frozen=True)
class CheckResult:
    """One check's outcome.

    Attributes:
        name: the check (``reference``, ``reward_variance[model]``...).
        status: PASS, FAIL or SKIP.
        summary: what it measured, in words with the numbers (a SKIP: the
            capability the family lacks, or the flag not given).
        numbers: the measurements, for ``check.json``.
    """

    name: str
    status: Status
    summary: str
    numbers: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        """The one-line summary the command prints.

        Example:
            >>> CheckResult("determinism", "PASS", "2 plays identical").line()
            'PASS  determinism             2 plays identical'
        """
        return f"{self.status:<4}  {self.name:<23} {self.summary}"


def skipped(name: str, why: str) -> CheckResult:
    """A check that could not run, saying why (the missing capability or flag)."""
    return CheckResult(name, "SKIP", why)


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    return math.fsum(values) / len(values) if values else math.nan


def measured_returns(episodes: Iterable[Episode]) -> list[float]:
    """The returns of every episode's measured seats."""
    return [e.returns[a] for e in episodes for a in e.measured if a in e.returns]


def _width(declared: tuple[float, float] | None) -> float:
    if declared is None or not declared[1] > declared[0]:
        return 1.0
    return declared[1] - declared[0]


def reference(
    plays: dict[str, Play], declared: tuple[float, float] | None, min_margin: float
) -> CheckResult:
    """The reference player scores, and an empty or random answer does not (module docstring).

    Args:
        plays: the evaluation plan played with ``reference``, ``empty`` and
            ``random_text`` in the measured seats.
        declared: the family's reward range, or None.
        min_margin: the least margin, as a share of the range's width.

    Example:
        >>> def ep(r): return Episode({"a": r}, ("a",), {}, 0, {}, {})
        >>> plays = {"reference": Play([ep(1.0)]), "empty": Play([ep(-1.0)]),
        ...          "random_text": Play([ep(0.0)])}
        >>> reference(plays, (-1.0, 1.0), 0.1).summary
        'reference 1 vs empty -1, random text 0: margin 1 (needs >= 0.2)'
    """
    means = {name: _mean(measured_returns(p.episodes)) for name, p in plays.items()}
    best_failing = max(means["empty"], means["random_text"])
    margin = means["reference"] - best_failing
    need = min_margin * _width(declared)
    status: Status = "PASS" if margin >= need else "FAIL"
    summary = (
        f"reference {fmt(means['reference'])} vs empty {fmt(means['empty'])}, random text "
        f"{fmt(means['random_text'])}: margin {fmt(margin)} (needs >= {fmt(need)})"
    )
    return CheckResult(
        "reference", status, summary, {"mean_return": means, "margin": margin, "needed": need}
    )


def varied_groups(episodes: Sequence[Episode]) -> tuple[int, int]:
    """``(groups whose measured returns vary, groups)``.

    Example:
        >>> def ep(group, r): return Episode({"a": r}, ("a",), {}, group, {}, {})
        >>> varied_groups([ep(0, 1.0), ep(0, 1.0), ep(1, 0.0), ep(1, 1.0)])
        (1, 2)
    """
    by_group: dict[Hashable, list[float]] = defaultdict(list)
    for episode in episodes:
        by_group[episode.group] += [episode.returns[a] for a in episode.measured]
    varied = sum(1 for r in by_group.values() if r and max(r) - min(r) > TIE)
    return varied, len(by_group)


def reward_variance(name: str, play: Play, min_share: float, who: str) -> CheckResult:
    """The share of training groups whose rewards vary must reach ``min_share``."""
    varied, groups = varied_groups(play.episodes)
    share = varied / groups if groups else 0.0
    status: Status = "PASS" if groups and share >= min_share else "FAIL"
    summary = (
        f"{varied}/{groups} training groups ({share:.0%}) have unequal rewards "
        f"(needs >= {min_share:.0%}; {who})"
    )
    return CheckResult(name, status, summary, {"varied": varied, "groups": groups, "share": share})


def reward_range(plays: Iterable[Play], declared: tuple[float, float] | None) -> CheckResult:
    """Every return seen is finite and inside the declared range.

    Example:
        >>> def ep(r): return Episode({"a": r, "b": -r}, ("a",), {}, 0, {}, {})
        >>> reward_range([Play([ep(0.5), ep(1.0)])], (-1.0, 1.0)).summary
        'every return of 4 in [-1, 1] (seen -1 .. 1)'
        >>> reward_range([Play([ep(2.0)])], (-1.0, 1.0)).status
        'FAIL'
    """
    returns = [r for p in plays for e in p.episodes for r in e.returns.values()]
    broken = [r for r in returns if not math.isfinite(r)]
    finite = [r for r in returns if math.isfinite(r)]
    numbers: dict[str, Any] = {
        "returns": len(returns),
        "declared": list(declared) if declared else None,
        "seen": [min(finite), max(finite)] if finite else None,
        "not_finite": len(broken),
    }
    seen = f"seen {fmt(min(finite))} .. {fmt(max(finite))}" if finite else "none seen"
    if broken:
        return CheckResult(
            "reward_range",
            "FAIL",
            f"{len(broken)} of {len(returns)} returns are not finite",
            numbers,
        )
    if declared is None:
        return CheckResult(
            "reward_range",
            "SKIP",
            f"the family declares no reward_range (FamilyBase.reward_range); {seen}",
            numbers,
        )
    low, high = declared
    outside = [r for r in finite if r < low - TIE or r > high + TIE]
    numbers["outside"] = len(outside)
    if outside:
        summary = (
            f"{len(outside)} of {len(returns)} returns outside [{fmt(low)}, {fmt(high)}] ({seen})"
        )
        return CheckResult("reward_range", "FAIL", summary, numbers)
    summary = f"every return of {len(returns)} in [{fmt(low)}, {fmt(high)}] ({seen})"
    return CheckResult("reward_range", "PASS", summary, numbers)


def first_difference(a: Any, b: Any, where: str = "") -> str | None:
    """Where two JSON-like values first differ, in words; None when equal.

    Example:
        >>> first_difference({"x": [1, 2]}, {"x": [1, 3]})
        "['x'][1]: 2 != 3"
    """
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=repr):
            if key not in a or key not in b:
                return (
                    f"{where}[{key!r}] only in {'the second' if key not in a else 'the first'} play"
                )
            found = first_difference(a[key], b[key], f"{where}[{key!r}]")
            if found:
                return found
        return None
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        if len(a) != len(b):
            return f"{where}: {len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = first_difference(x, y, f"{where}[{i}]")
            if found:
                return found
        return None
    same = a == b or (
        isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    )
    return None if same else f"{where}: {a!r:.80} != {b!r:.80}"


def determinism(first: Play, second: Play) -> CheckResult:
    """Two plays of the same seeded episodes with the same players must be identical."""
    turns = sum(len(t) for e in first.episodes for t in e.turns.values())
    numbers: dict[str, Any] = {"episodes": len(first.episodes), "turns": turns}
    difference = first_difference(
        [e.fingerprint() for e in first.episodes], [e.fingerprint() for e in second.episodes]
    )
    if difference:
        numbers["difference"] = difference
        return CheckResult(
            "determinism",
            "FAIL",
            f"two plays of the same seeded episodes differ: episode{difference}",
            numbers,
        )
    summary = f"two plays identical ({len(first.episodes)} seeded episodes, {turns} turns)"
    return CheckResult("determinism", "PASS", summary, numbers)


def judge_infos(
    episodes: Iterable[Episode], players: set[str] | None = None
) -> dict[str, list[float]]:
    """Every answer's judging infos (:data:`JUDGE_KEYS`), by key; of ``players``' seats if given."""
    found: dict[str, list[float]] = {key: [] for key in JUDGE_KEYS}
    for episode in episodes:
        for agent, turns in episode.turns.items():
            if players is not None and episode.players.get(agent) not in players:
                continue
            for _, _, info in turns:
                for key in JUDGE_KEYS:
                    value = info.get(key)
                    if isinstance(value, int | float) and not isinstance(value, bool):
                        found[key].append(float(value))
    return found


def is_judged(plays: Iterable[Play]) -> bool:
    """Whether any answer reported a judging info (the family judges answers)."""
    return any(
        key in info
        for play in plays
        for e in play.episodes
        for turns in e.turns.values()
        for _, _, info in turns
        for key in (*JUDGE_KEYS, "voted")
    )


def judge(
    name: str,
    play: Play,
    players: set[str] | None,
    who: str,
    *,
    min_agreement: float,
    max_bias: float,
    min_votes: int,
) -> CheckResult:
    """The judge agrees with the reference and favours no seat (module docstring).

    Example:
        >>> info = {"vote_agreement": 1.0, "vote_lower_seat": 0.5}
        >>> e = Episode({}, (), {"a": "reference"}, 0, {"a": [((), 0.0, info)] * 12}, {})
        >>> result = judge("judge", Play([e]), {"reference"}, "reference judges",
        ...                min_agreement=0.6, max_bias=0.15, min_votes=10)
        >>> result.status, result.numbers["agreement"], result.numbers["lower_seat_answers"]
        ('PASS', 1.0, 12)
    """
    infos = judge_infos(play.episodes, players)
    agreement, lower = infos["vote_agreement"], infos["vote_lower_seat"]
    numbers = {
        "agreement": _mean(agreement) if agreement else None,
        "agreement_answers": len(agreement),
        "lower_seat": _mean(lower) if lower else None,
        "lower_seat_answers": len(lower),
    }
    parts, failed = [], False
    if agreement:
        mean = _mean(agreement)
        failed |= mean < min_agreement
        parts.append(
            f"agreement {fmt(mean)} (needs >= {fmt(min_agreement)}; {len(agreement)} answers)"
        )
    else:
        parts.append("no agreement (no answer compared others against a reference answer)")
    if len(lower) >= min_votes:
        share, error = _mean(lower), margin_of_error(lower)
        numbers["lower_seat_error"] = error
        failed |= abs(share - 0.5) - error > max_bias
        parts.append(
            f"lower seat {share:.2f} ± {error:.2f} (allowed 0.5 ± {fmt(max_bias)}; "
            f"{len(lower)} answers)"
        )
    else:
        parts.append(
            f"position bias not judged: {len(lower)} answers with strict votes, needs {min_votes}"
        )
    summary = "; ".join([*parts, who])
    if failed:
        return CheckResult(name, "FAIL", summary, numbers)
    if not agreement and len(lower) < min_votes:
        return CheckResult(name, "SKIP", summary, numbers)
    return CheckResult(name, "PASS", summary, numbers)


def margin_of_error(values: Sequence[float]) -> float:
    """The 95% margin of error of the mean of ``values``: 1.96 standard errors.

    Example:
        >>> round(margin_of_error([0.0, 1.0] * 50), 3)
        0.098
    """
    if len(values) < 2:
        return math.inf
    mean = _mean(values)
    variance = math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return 1.96 * math.sqrt(variance / len(values))


def stable_under_load(alone: Play, loaded: Play, burners: int) -> CheckResult:
    """The reference episodes pay the same alone and replayed at once beside busy cores."""
    changed = [
        i
        for i, (a, b) in enumerate(zip(alone.episodes, loaded.episodes, strict=True))
        if first_difference(a.returns, b.returns) is not None
    ]
    numbers = {"episodes": len(alone.episodes), "changed": changed, "burners": burners}
    done = (
        f"{len(alone.episodes)} reference episodes alone, then all at once beside "
        f"{burners} CPU burners"
    )
    if changed:
        i = changed[0]
        summary = (
            f"{len(changed)} of {len(alone.episodes)} verdicts changed under load (episode {i}: "
            f"{alone.episodes[i].returns} alone, {loaded.episodes[i].returns} loaded); {done}"
        )
        return CheckResult("stable_under_load", "FAIL", summary, numbers)
    return CheckResult("stable_under_load", "PASS", f"same returns: {done}", numbers)


def step_time(plays: Sequence[Play], max_seconds: float) -> CheckResult:
    """The environments' mean seconds per step must stay under ``max_seconds``.

    Example:
        >>> step_time([Play([], steps=200, env_seconds=0.5)], 5.0).summary
        '2.5 ms per step over 200 steps (needs <= 5 s)'
    """
    steps = sum(p.steps for p in plays)
    seconds = math.fsum(p.env_seconds for p in plays)
    if not steps:
        return skipped("step_time", "no step was played")
    per_step = seconds / steps
    numbers = {"steps": steps, "env_seconds": seconds, "seconds_per_step": per_step}
    status: Status = "PASS" if per_step <= max_seconds else "FAIL"
    shown = f"{per_step * 1000:.2g} ms" if per_step < 1 else f"{per_step:.3g} s"
    summary = f"{shown} per step over {steps} steps (needs <= {fmt(max_seconds)} s)"
    return CheckResult("step_time", status, summary, numbers)
