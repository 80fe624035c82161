"""The importance-sampling trainer's evaluation: the trained policy against fixed opponents.

The episodes are the family's evaluation plan, the same at every evaluation
(their seed does not depend on the iteration), so evaluations compare. A
family with a fixed opponent (:attr:`~llm_envs.capabilities.EvaluationDetails.fixed_opponent`)
plays the trained policy in some seats and the opponent
(:meth:`EvaluationPolicies.opponent`: the initial model by default) in the
others; ``eval/...`` are the trained seats' means, ``eval/opponent/...`` the
opponent's. With ``eval_scripted`` the episodes are played again against
each set of the family's scripted players (``eval/scripted:SET/...``). A
family with a meter (:meth:`~llm_envs.family.FamilyBase.measure`: Kuhn
Poker's exploitability) measures the trained policy too, through the same
sampler: ``eval/exploitability`` and the family's other numbers. A family
with independent answers (:class:`~llm_envs.capabilities.IndependentAnswers`)
answers each evaluation question alone too: debate's majority vote,
``eval/majority_vote/correct`` beside ``eval/solution_correct``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from baselines.data.advantages import trajectory_return
from baselines.data.episode_metrics import numeric_info
from baselines.env_families import batch_of, derive_seed, one_per_setting
from baselines.is_trainer.config import EvalSettings
from baselines.is_trainer.learner import Learner
from baselines.precision import cpu_flags, eval_dtype, sampler_dtype
from baselines.samplers.base import Policy, SampleRequest
from llm_envs.capabilities import IndependentAnswers, provides
from llm_envs.family import EpisodePlan, Sampler

__all__ = [
    "EVAL_SEED",
    "EvaluationPolicies",
    "answered_alone",
    "eval_metrics",
    "evaluate",
    "measured",
]

EVAL_SEED = 7919
"""Evaluation episodes are the same at every evaluation, so they compare."""

EvalRow = tuple[bool, float, dict[str, float]]
"""An evaluation seat: whether the trained policy played it, its return, its numeric infos."""


class EvaluationPolicies:
    """Who plays an evaluation: the trained policy as it is now, and the fixed opponent.

    The trained side is the training sampler, unless the evaluation's vLLM
    engines have a precision of their own (``eval_precision``, bf16 on a CPU
    that has it): then an engine of that precision, handed the trained weights
    at each evaluation. The opponent (``eval_opponent``; the initial model by
    default) gets an engine of that precision too. Before the first optimizer
    step the trained weights are the initial model's, so one engine plays
    both sides (in one batched call per turn), and a second starts only when
    the weights have moved.
    """

    def __init__(self, learner: Learner, settings: EvalSettings) -> None:
        self.learner = learner
        self.settings = settings
        bf16 = learner.bf16
        # The evaluation engines' precision; `own`: the trained side needs an engine of it.
        self.dtype = eval_dtype(settings.precision, bf16=bf16, flags=cpu_flags())
        self.own = learner.sampler.kind == "vllm" and self.dtype != sampler_dtype(bf16=bf16)
        self._opponent: Policy | None = None
        self._learner: Policy | None = None

    def trained(self) -> Policy:
        """The trained policy with its current weights (handed over here when on its own engine)."""
        learner = self.learner
        if not self.own:
            return learner.sampler.policy
        if self._sides_agree():
            return self._opponent_engine()  # the initial weights
        if self._learner is None:
            self._learner = self._engine(None, 3)
        if learner.weights_moved:
            weights = learner.full_weights(everywhere=True)
            self._learner.update_weights(weights)  # type: ignore[attr-defined]
        return self._learner

    def opponent(self) -> Policy:
        """The fixed opponent; the trained side's own policy while the two agree."""
        return self.trained() if self._sides_agree() else self._opponent_engine()

    def _sides_agree(self) -> bool:
        """Whether the opponent is the initial model and the trained weights still are too."""
        return self.settings.opponent is None and not self.learner.weights_moved

    def engines(self) -> list[Policy]:
        """The engines started so far (to close at the end)."""
        return [p for p in (self._opponent, self._learner) if p is not None]

    def _opponent_engine(self) -> Policy:
        if self._opponent is None:
            self._opponent = self._engine(self.settings.opponent, 2)
        return self._opponent

    def _engine(self, spec: str | None, stream: int) -> Policy:
        return self.learner.fixed_policy(
            spec, served_name=self.settings.opponent_model, stream=stream, dtype=self.dtype
        )


def evaluate(
    learner: Learner, family: Any, settings: EvalSettings, policies: EvaluationPolicies
) -> dict[str, float]:
    """Play the evaluation episodes; return ``eval/...`` metrics of the trained policy.

    Before the first optimizer step the fixed opponent is the trained weights
    themselves: each setting of a role rotation is then played once
    (:func:`~baselines.env_families.one_per_setting`), a third of the
    episodes of a three-seat debate, and every seat counts for both sides.
    """
    indices = list(range(settings.groups))[learner.rank :: learner.world]
    seed = derive_seed(learner.config.seed, EVAL_SEED)
    rows: list[EvalRow] = []
    trained = policies.trained() if indices else learner.sampler.policy
    if indices:
        opponent = policies.opponent() if family.fixed_opponent else None
        rows = _rows(learner, family.evaluation(indices, seed), trained, opponent)
    metrics = eval_metrics(learner.gather(rows), "eval", "eval/opponent")
    metrics.update(measured(learner, family, settings, trained))
    metrics.update(answered_alone(learner, family, settings, trained))
    if settings.scripted:
        from baselines.samplers.scripted import ScriptedPolicy

        for name, players in sorted(family.scripted_players(seed).items()):
            scripted = ScriptedPolicy(players, learner.tokenizer)
            plan = family.evaluation(indices, seed)
            rows = _rows(learner, plan, trained, scripted) if indices else []
            metrics.update(eval_metrics(learner.gather(rows), f"eval/scripted:{name}", None))
    return metrics


def measured(
    learner: Learner, family: Any, settings: EvalSettings, policy: Policy
) -> dict[str, float]:
    """The family's meter of ``policy`` (``eval/exploitability`` in Kuhn Poker); ``{}`` without one.

    Sampled like the evaluation's turns (``max_tokens``, ``temperature``), on
    the first process only: the meter needs no other process's turns.
    """
    measure = getattr(family, "measure", None)  # optional: FamilyBase.measure
    if measure is None or settings.meter_samples <= 0 or learner.rank != 0:
        return {}
    sample = _sampler(learner, policy, 1)
    found = measure(sample, samples=settings.meter_samples, seed=learner.config.seed)
    return {f"eval/{name}": float(value) for name, value in found.items()}


def answered_alone(
    learner: Learner, family: Any, settings: EvalSettings, policy: Policy
) -> dict[str, float]:
    """The family's independent answers to the evaluation's problems; ``{}`` without them.

    Debate: ``eval/majority_vote/correct`` and ``eval/single_answer/correct``
    (:mod:`llm_envs.debate.majority`), ``num_agents`` answers per question,
    each from the debate's first prompt, sampled like the evaluation's turns,
    on the first process only.
    """
    if not provides(family, IndependentAnswers) or settings.groups == 0 or learner.rank != 0:
        return {}
    seed = derive_seed(learner.config.seed, EVAL_SEED)
    found = family.independent_answers(_sampler(learner, policy, 2), range(settings.groups), seed)
    return {f"eval/{name}": float(value) for name, value in found.items()}


def _sampler(learner: Learner, policy: Policy, stream: int) -> Sampler:
    """``policy`` as a :data:`~llm_envs.family.Sampler` at the evaluation's settings."""
    params = learner.sampling_params(EVAL_SEED, stream)

    def sample(turns: Sequence[tuple[str, Any, Mapping[str, Any]]]) -> list[str]:
        requests = [SampleRequest.for_turn(agent, obs, info) for agent, obs, info in turns]
        with learner.sampling_context():
            return [completion.text for completion in policy.sample(requests, params)]

    return sample


def _rows(
    learner: Learner, plan: EpisodePlan, trained: Policy, opponent: Policy | None
) -> list[EvalRow]:
    """Play an evaluation plan; a row per seat: (trained side?, return, numeric infos)."""
    rows: list[EvalRow] = []
    opponent_seats: list[frozenset[str]] | None = None
    if opponent is not None and opponent is trained:
        # The same weights on both sides: each setting once, every seat on both.
        plan, opponent_seats = one_per_setting(plan)
    batch = batch_of(plan)
    for result in learner.play(batch, batch.assignment(trained, opponent), EVAL_SEED, "evaluation"):
        seats = batch.trained_agents[result.env_index]
        for agent, trajectory in result.trajectories.items():
            numeric = dict(numeric_info(result.final_infos[agent]))
            ret = trajectory_return(trajectory, result.final_rewards[agent])
            if opponent_seats is None:
                rows.append((agent in seats, ret, numeric))
                continue
            rows += [(True, ret, numeric)] if agent in seats else []
            if agent in opponent_seats[result.env_index]:
                rows.append((False, ret, numeric))
    return rows


def eval_metrics(rows: Sequence[EvalRow], trained: str, opponent: str | None) -> dict[str, float]:
    """Mean return, episode count and infos of the trained seats (and of the opponent's)."""
    metrics: dict[str, float] = {}
    for prefix, is_trained in ((trained, True), (opponent, False)):
        selected = [r for r in rows if r[0] == is_trained]
        if prefix is None or not selected:
            continue
        metrics[f"{prefix}/reward/total"] = float(np.mean([r[1] for r in selected]))
        metrics[f"{prefix}/num_episodes"] = float(len(selected))
        for key in sorted({k for r in selected for k in r[2]}):
            values = [r[2][key] for r in selected if key in r[2]]
            metrics[f"{prefix}/{key}"] = float(np.mean(values))
    return metrics
