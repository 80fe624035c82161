"""The family's meter of each entrant (Kuhn Poker: exploitability), beside the evaluation's scores.

A family with a meter (:meth:`llm_envs.family.FamilyBase.measure`) asks each
entrant ``meter_samples`` times at each point it measures, with the
evaluation's sampling settings; the numbers join the entrant's metrics in
``summary.json`` and its first one (``exploitability``) becomes a column of
the scores table. A family with independent answers
(:class:`~llm_envs.capabilities.IndependentAnswers`; debate's majority vote)
adds their numbers the same way, over the evaluation's problems, whatever
``meter_samples`` says. They are kept in ``meter.json``, keyed by the settings
that decide them, so a resumed evaluation does not sample them again.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from baselines.eval.summary import EvalSummary
from baselines.run_directory import write_atomically
from baselines.samplers.base import Policy, SampleRequest, SamplingParams
from llm_envs.capabilities import IndependentAnswers, provides
from llm_envs.family import Sampler

__all__ = ["METER_FILE", "measure_entrants", "sampler_of", "with_meter"]

METER_FILE: Final = "meter.json"
"""The measured numbers of each entrant, in the evaluation's folder."""


def sampler_of(policy: Policy, params: SamplingParams) -> Sampler:
    """A :data:`~llm_envs.family.Sampler` that asks ``policy`` every turn in one call."""

    def sample(turns: Sequence[tuple[str, Any, Mapping[str, Any]]]) -> list[str]:
        requests = [SampleRequest.for_turn(agent, obs, info) for agent, obs, info in turns]
        return [completion.text for completion in policy.sample(requests, params)]

    return sample


def measure_entrants(
    family: Any,
    models: Sequence[str],
    load: Any,
    params: SamplingParams,
    *,
    samples: int,
    seed: int,
    folder: Path,
    settings: Mapping[str, Any],
    problems: int = 0,
) -> dict[str, dict[str, float]]:
    """Each model's meter, read from ``meter.json`` where it was measured with these settings.

    Args:
        family: the evaluation's family; without a ``measure`` (or with
            ``samples`` 0) nothing is measured.
        models: the entrants' names.
        load: a callable returning the entrants' policies by name (called
            only when a model is missing from the file).
        params: the evaluation's sampling settings.
        samples: the meter's samples per point it measures.
        seed: the meter's seed.
        folder: the evaluation's folder.
        settings: what decides the numbers besides the model (env, sampling):
            a file measured with others is measured again.
        problems: the evaluation's problems, answered alone by a family with
            independent answers (0: none).
    """
    measure = getattr(family, "measure", None) if samples > 0 else None
    problems = problems if provides(family, IndependentAnswers) else 0
    if measure is None and not problems:
        return {}
    decided = {**settings, "samples": samples, "seed": seed}
    if problems:
        decided["problems"] = problems
    key = json.loads(json.dumps(decided, default=str))
    path = folder / METER_FILE
    kept: dict[str, dict[str, float]] = {}
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(saved, dict) and saved.get("settings") == key:
            kept = {str(k): dict(v) for k, v in saved.get("models", {}).items()}
    except (OSError, ValueError, AttributeError, TypeError):
        kept = {}  # absent or torn by a kill: measured again
    missing = [m for m in models if m not in kept]
    if missing:
        policies = load()
        for model in missing:
            sample = sampler_of(policies[model], params)
            found = dict(measure(sample, samples=samples, seed=seed)) if measure else {}
            if problems:
                found.update(family.independent_answers(sample, range(problems), seed))
            kept[model] = {str(k): float(v) for k, v in found.items()}
        if any(kept.values()):
            write_atomically(path, json.dumps({"settings": key, "models": kept}, indent=2))
    return {m: kept[m] for m in models if kept.get(m)}


def with_meter(summary: EvalSummary, meters: Mapping[str, Mapping[str, float]]) -> EvalSummary:
    """The summary with each model's meter in its metrics, the first number a headline column."""
    if not meters:
        return summary
    scores = tuple(
        dataclasses.replace(s, metrics={**s.metrics, **meters.get(s.model, {})})
        for s in summary.scores
    )
    first = next(iter(next(iter(meters.values()))), None)
    headline = summary.headline
    if first is not None and first not in headline:
        headline = (*headline, first)
    return dataclasses.replace(summary, scores=scores, headline=headline)
