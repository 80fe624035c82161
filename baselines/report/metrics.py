"""A run's metrics: series, counts of iterations and evaluations, the headline metrics."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from baselines.report._common import Series
from llm_envs.formatting import finite as _number


def first_and_last(rows: Sequence[Mapping[str, Any]], key: str) -> str:
    """``"0.250 -> 0.500 (rose by 0.250)"``: a metric's first and last finite values in ``rows``.

    Says whether it rose, fell or did not move (a change under 0.0005, what
    three decimals cannot show). ``"not logged"`` when no row has a finite
    value for ``key``.

    Example:
        >>> first_and_last([{"r": 0.25}, {}, {"r": float("nan")}, {"r": 0.5}], "r")
        '0.250 -> 0.500 (rose by 0.250)'
        >>> first_and_last([{"r": -1 / 3}, {"r": -1 / 3}], "r")
        '-0.333 -> -0.333 (did not move)'
    """
    values = [v for row in rows if (v := _number(row.get(key))) is not None]
    if not values:
        return "not logged"
    first, last = values[0], values[-1]
    change = last - first
    if abs(change) < 5e-4:
        moved = "did not move"
    else:
        moved = f"{'rose' if change > 0 else 'fell'} by {abs(change):.3f}"
    return f"{first:.3f} -> {last:.3f} ({moved})"


def metric_series(rows: Sequence[Mapping[str, Any]]) -> dict[str, Series]:
    """Every numeric metric of ``rows``: its iterations and finite values, in row order.

    A row without an ``iteration`` counts as iteration = its index. Booleans,
    strings, lists, NaN and infinities are skipped.

    Example:
        >>> metric_series([{"iteration": 0, "r": 1}, {"iteration": 1, "r": 2.5, "s": "x"}])
        {'r': ([0.0, 1.0], [1.0, 2.5])}
    """
    series: dict[str, Series] = {}
    for index, row in enumerate(rows):
        x = _number(row.get("iteration"))
        x = float(index) if x is None else x
        for name, value in row.items():
            y = _number(value)
            if name != "iteration" and y is not None:
                xs, ys = series.setdefault(name, ([], []))
                xs.append(x)
                ys.append(y)
    return series


def about_equal(a: float, b: float) -> bool:
    """Whether two logged values read the same (float32 wobbles in its 7th digit)."""
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)


def constant_series(series: Mapping[str, Series]) -> dict[str, float]:
    """The series that never change (a single value counts): name -> value, sorted by name.

    Example:
        >>> constant_series({"a": ([0, 1], [2, 2]), "b": ([0, 1], [0, 1]), "c": ([3], [7.0])})
        {'a': 2, 'c': 7.0}
    """
    return {
        name: ys[0]
        for name, (_, ys) in sorted(series.items())
        if ys and all(about_equal(y, ys[0]) for y in ys)
    }


_NOT_TRAINING = frozenset({"iteration", "time/eval", "time/checkpoint"})
"""Keys the final evaluation's line may hold besides ``eval/...`` (the last save's time)."""


def is_training_row(row: Mapping[str, Any]) -> bool:
    """A line with training metrics; not the final evaluation's line (``eval/...`` alone)."""
    return any(k not in _NOT_TRAINING and not k.startswith("eval/") for k in row)


def _iteration(row: Mapping[str, Any], index: int) -> int:
    x = _number(row.get("iteration"))
    return index if x is None else int(x)


@dataclass(frozen=True)
class RunCounts:
    """Which iterations a run trained and evaluated, from its metric lines.

    Attributes:
        training: the iterations (TRL: steps) with training metrics, sorted.
        evaluations: the iterations with ``eval/...`` metrics, sorted: ``k``
            measures the weights after ``k`` training iterations, so the final
            evaluation sits at ``num_iterations``, past the last training one.
        planned: the config's ``num_iterations`` (TRL: ``max_steps``), if known.
        unit: ``"iteration"``, or ``"step"`` for TRL runs.
    """

    training: tuple[int, ...]
    evaluations: tuple[int, ...]
    planned: int | None
    unit: str

    def describe(self) -> list[str]:
        """One sentence for the training iterations, one for the evaluations (if any)."""
        n, unit = len(self.training), self.unit
        if not n:
            said = [f"no training {unit} logged yet"]
        else:
            span = f"{self.training[0]}–{self.training[-1]}" if n > 1 else f"{self.training[0]}"
            plural = unit + ("s" if n != 1 else "")
            said = [f"{n} training {plural} ({unit} {span})"]
            if self.planned is not None and n < self.planned:
                said[0] = (
                    f"{n} of {self.planned} planned training {unit}s logged ({unit} {span}): "
                    "the run stopped early or is still going"
                )
        if self.evaluations:
            first, last = self.training[:1], self.training[-1:]
            notes = []
            for k in self.evaluations:
                if first and k <= first[0]:
                    notes.append(f"{k} (before training)")
                elif last and k > last[0]:
                    notes.append(f"{k} (final evaluation, after the last training {unit})")
                else:
                    notes.append(str(k))
            times = "once" if len(notes) == 1 else f"{len(notes)} times"
            if len(notes) > 6:
                notes[2:-2] = ["…"]
            said.append(f"evaluated {times}, at {unit} " + ", ".join(notes))
        return said


def run_counts(
    rows: Sequence[Mapping[str, Any]], config: Mapping[str, Any] | None = None
) -> RunCounts:
    """Count a run's training iterations and evaluations (see :class:`RunCounts`).

    Example:
        >>> rows = [{"iteration": i, "loss": 1.0} for i in range(5)]
        >>> rows[0]["eval/reward/total"] = 0.0
        >>> rows.append({"iteration": 5, "eval/reward/total": 0.5, "time/eval": 1.0,
        ...               "time/checkpoint": 2.0})
        >>> counts = run_counts(rows, {"num_iterations": 5})
        >>> len(counts.training), counts.evaluations
        (5, (0, 5))
    """
    config = config or {}
    trl = "max_steps" in config or any("reward" in row and "loss" in row for row in rows)
    planned = _number(config.get("max_steps" if trl else "num_iterations"))
    return RunCounts(
        training=tuple(
            sorted({_iteration(r, i) for i, r in enumerate(rows) if is_training_row(r)})
        ),
        evaluations=tuple(
            sorted(
                {
                    _iteration(r, i)
                    for i, r in enumerate(rows)
                    if any(k.startswith("eval/") for k in r)
                }
            )
        ),
        planned=None if planned is None else int(planned),
        unit="step" if trl else "iteration",
    )


_SUCCESS = {
    "correct": "fraction of answers that are correct",
    "pass_rate": "fraction of tests passed",
    "solved": "fraction of problems solved (every test passes)",
    "parse_error": "fraction of answers that broke the format",
    "solution_correct": "fraction of debate answers that match the reference",
    "consensus_reached": "fraction of debates that reached consensus",
}
_SUCCESS_NAMES = "|".join(_SUCCESS)

# The headline: (pattern, meaning), in the order shown; \1 in a meaning is the pattern's group.
_HEADLINE: tuple[tuple[str, str], ...] = (
    (r"env/all/reward/total", "training reward: mean return per agent and episode"),
    (r"reward", "training reward: mean return per completion"),
    (r"reward_std", "spread of that reward"),
    (r"env/turn_(\d+)/reward", "reward at turn \\1"),
    (r"env/(?!all/)([^/]+)/reward/total", "training reward of strategy \\1"),
    # A success rate per turn where the env reports one (what the console prints),
    # else per agent and episode (each trajectory's last info).
    (rf"env/all/turn/({_SUCCESS_NAMES})", "{success}, per turn"),
    (rf"env/(?:all/)?({_SUCCESS_NAMES})", "{success}, per agent and episode (its last info)"),
    (r"env/turn_(\d+)/(pass_rate|solved)", "{success}, turn \\1"),
    # Judging, where agents vote on each other (per answer that had two others to compare).
    (r"env/all/turn/voted", "fraction of answers that cast a valid vote, of those that could"),
    (r"env/all/turn/vote_agreement", "share of an answer's votes that agree with the reference"),
    (
        r"env/all/turn/vote_lower_seat",
        "position bias: share of strict votes for the lower-numbered seat (unbiased: 0.5)",
    ),
    (
        r"env/all/turn/vote_lower_label",
        "the judges' habit under shuffled labels: share of strict votes for the lower number",
    ),
    (r"env/all/pairwise_reward", "the pairwise reward alone (win rate or win minus loss)"),
    (r"env/all/turn/shaping/contract", "shaping (opt-in): fraction of the answer format written"),
    (r"env/all/turn/shaping/reward", "shaping (opt-in): partial credit added per answer"),
    (r"optim/loss|loss", "training loss"),
    (r"optim/([^/]+)/loss", "training loss of \\1"),
    (r"optim/grad_norm|grad_norm", "gradient norm"),
    (r"optim/entropy|entropy", "entropy of the sampled tokens"),
    (r"optim/kl_sample_train_v1", "KL between the sampler's and the trainer's log-probabilities"),
    (r"time/iteration", "seconds per iteration"),
    (r"step_time", "seconds per step"),
)
_MAX_HEADLINE = 16

_JUDGING_MEANINGS = {
    "voted": "fraction of last answers that cast a valid vote, of those that could",
    "vote_agreement": "share of the last answers' votes that agree with the reference",
    "vote_lower_seat": "position bias: share of strict votes for the lower seat (unbiased: 0.5)",
    "vote_lower_label": "share of strict votes for the lower number the judge read (labels)",
}
_JUDGING = "|".join(_JUDGING_MEANINGS)
_EVALUATION = re.compile(
    rf"eval/(?:(opponent|final|all)/)?(reward/total|reward|{_SUCCESS_NAMES}|{_JUDGING}"
    r"|exploitability|exploitability_chips|majority_vote/correct|single_answer/correct)"
)
_EVAL_MEANINGS = {
    "opponent": "the fixed opponent's, in the same episodes",
    "final": "at the last turn",
    "all": "summed over turns",
}


# Numbers measured beside the episodes: a family's meter, and its independent answers.
_METER_MEANINGS = {
    "majority_vote/correct": (
        "questions whose majority answer, of as many answers as agents each given alone, "
        "is correct (the baseline debate is compared with)"
    ),
    "single_answer/correct": "fraction of those answers given alone that are correct",
    "exploitability": (
        "exploitability: what a best response wins against the policy, under the game's payoff "
        "(the family's meter; 0 at an equilibrium)"
    ),
    "exploitability_chips": (
        "exploitability in chips, one round, a bet costing a chip (uniform play: 11/24 = 0.458)"
    ),
}


def _meaning(template: str, match: re.Match[str]) -> str:
    success = next((_SUCCESS[g] for g in match.groups() if g in _SUCCESS), "")
    return match.expand(template.replace("{success}", success))


def headline_metrics(names: Iterable[str]) -> list[tuple[str, str]]:
    """The metrics that say what training did, as ``(name, meaning)`` in the order shown.

    The training reward (``env/all/reward/total`` for the local trainers,
    ``reward`` and ``reward_std`` for TRL), per-turn and per-strategy rewards,
    success rates (correct, pass rate, solved, parse errors, consensus: per
    turn where the run logs them so, else per agent and episode, never both),
    the loss, the gradient norm, the entropy, the sampler/trainer KL and the
    time per iteration; at most 16.

    Example:
        >>> headline_metrics(["time/iteration", "env/all/turn/correct", "env/all/correct"])
        [('env/all/turn/correct', 'fraction of answers that are correct, per turn'), \
('time/iteration', 'seconds per iteration')]
    """
    given = set(names)
    # One number per success rate: the per-turn one hides its per-episode twin. (Not for a
    # reward: the pairwise reward is paid per episode, and its per-turn mean is another number.)
    twins = {*_SUCCESS, *_JUDGING_MEANINGS}
    remaining = sorted(
        n
        for n in given
        if not (n[8:] in twins and n.startswith("env/all/") and f"env/all/turn/{n[8:]}" in given)
    )
    chosen: list[tuple[str, str]] = []
    for pattern, template in _HEADLINE:
        compiled = re.compile(pattern)
        for name in remaining:
            match = compiled.fullmatch(name)
            if match and all(name != c for c, _ in chosen):
                chosen.append((name, _meaning(template, match)))
    return chosen[:_MAX_HEADLINE]


def evaluation_metrics(names: Iterable[str]) -> list[tuple[str, str]]:
    """The evaluation metrics of the report's table, as ``(name, meaning)``.

    ``eval/reward/total``, ``eval/opponent/...``, ``eval/final/...``,
    ``eval/all/...`` and the success rates and judging measures under them.

    Example:
        >>> evaluation_metrics(["eval/num_episodes", "eval/correct", "eval/reward/total"])
        [('eval/reward/total', 'reward'), ('eval/correct', 'fraction of answers that are correct')]
    """
    rows = []
    for name in names:
        match = _EVALUATION.fullmatch(name)
        if match:
            scope, what = match.groups()
            meaning = (
                "reward"
                if what.startswith("reward")
                else _SUCCESS.get(what) or _JUDGING_MEANINGS.get(what) or _METER_MEANINGS[what]
            )
            if scope:
                meaning += f", {_EVAL_MEANINGS[scope]}"
            rows.append((name, meaning))
    return sorted(
        rows, key=lambda r: (not r[0].startswith("eval/reward"), "opponent" in r[0], r[0])
    )


# The groups of curves below the headline: the first matching test wins.
GROUPS: tuple[tuple[str, tuple[str, ...], frozenset[str]], ...] = (
    ("evaluation", ("eval/",), frozenset()),
    ("reward", ("env/all/reward", "reward", "rewards/"), frozenset()),
    ("environment", ("env/",), frozenset()),
    ("league", ("league/",), frozenset()),
    (
        "optimization",
        ("optim/", "clip_ratio/", "kl"),
        frozenset({"loss", "grad_norm", "learning_rate", "entropy", "frac_reward_zero_std"}),
    ),
    (
        "data and tokens",
        ("data/", "tokens/", "train/tokens", "completions/", "strategy/", "sample/"),
        frozenset({"num_tokens"}),
    ),
    (
        "time and progress",
        ("time/", "progress/", "train_"),
        frozenset({"step_time", "epoch", "total_flos"}),
    ),
)


def group_of(name: str) -> str:
    """The group of :data:`GROUPS` a metric's name falls in."""
    for group, prefixes, exact in GROUPS:
        if name in exact or name.startswith(prefixes):
            return group
    return "other"
