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
sampler: ``eval/exploitability`` and the family's other numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from baselines.data.advantages import trajectory_return
from baselines.data.episode_metrics import numeric_info
from baselines.env_families import batch_of, derive_seed, one_per_setting
from baselines.precision import cpu_flags, eval_dtype, sampler_dtype
from baselines.samplers.base import Policy, SampleRequest, SamplingParams
from baselines.samplers.build import build_fixed_policy
from baselines.training.weights import gather_full_state
from llm_envs.family import EpisodePlan

if TYPE_CHECKING:
    from baselines.is_trainer.trainer import ISTrainer

__all__ = ["EVAL_SEED", "EvaluationPolicies", "eval_metrics", "evaluate", "measured"]

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

    def __init__(self, trainer: ISTrainer) -> None:
        self.trainer = trainer
        bf16 = trainer.bf16
        # The evaluation engines' precision; `own`: the trained side needs an engine of it.
        self.dtype = eval_dtype(trainer.config.eval_precision, bf16=bf16, flags=cpu_flags())
        self.own = trainer.sampler.kind == "vllm" and self.dtype != sampler_dtype(bf16=bf16)
        self._opponent: Policy | None = None
        self._learner: Policy | None = None

    def learner(self) -> Policy:
        """The trained policy with its current weights (handed over here when on its own engine)."""
        trainer = self.trainer
        if not self.own:
            return trainer.sampler.policy
        if self._sides_agree():
            return self._opponent_engine()  # the initial weights
        if self._learner is None:
            self._learner = self._engine(None, derive_seed(trainer.config.seed, trainer.rank, 3))
        if trainer._weights_moved:
            weights = gather_full_state(trainer.accelerator, trainer.model, everywhere=True)
            self._learner.update_weights(weights)  # type: ignore[attr-defined]
        return self._learner

    def opponent(self) -> Policy:
        """The fixed opponent; the trained side's own policy while the two agree."""
        return self.learner() if self._sides_agree() else self._opponent_engine()

    def _sides_agree(self) -> bool:
        """Whether the opponent is the initial model and the trained weights still are too."""
        return self.trainer.config.eval_opponent is None and not self.trainer._weights_moved

    def engines(self) -> list[Policy]:
        """The engines started so far (to close at the end)."""
        return [p for p in (self._opponent, self._learner) if p is not None]

    def _opponent_engine(self) -> Policy:
        if self._opponent is None:
            config = self.trainer.config
            seed = derive_seed(config.seed, self.trainer.rank, 2)
            self._opponent = self._engine(config.eval_opponent, seed)
        return self._opponent

    def _engine(self, spec: str | None, seed: int) -> Policy:
        trainer = self.trainer
        return build_fixed_policy(
            spec,
            kind=trainer.sampler.kind,
            model_path=trainer.model_path,
            served_name=trainer.config.eval_opponent_model,
            device=trainer.accelerator.device,
            seed=seed,
            max_model_len=trainer.max_model_len,
            config=trainer.config,
            dtype=self.dtype,
        )


def evaluate(trainer: ISTrainer) -> dict[str, float]:
    """Play the evaluation episodes; return ``eval/...`` metrics of the trained policy.

    Before the first optimizer step the fixed opponent is the trained weights
    themselves: each setting of a role rotation is then played once
    (:func:`~baselines.env_families.one_per_setting`), a third of the
    episodes of a three-seat debate, and every seat counts for both sides.
    """
    config, family = trainer.config, trainer.family
    indices = list(range(config.eval_groups))[trainer.rank :: trainer.world]
    seed = derive_seed(config.seed, EVAL_SEED)
    rows: list[EvalRow] = []
    learner = trainer.eval_policies.learner() if indices else trainer.sampler.policy
    if indices:
        opponent = trainer.eval_policies.opponent() if family.fixed_opponent else None
        rows = _rows(trainer, family.evaluation(indices, seed), learner, opponent)
    metrics = eval_metrics(trainer.gather(rows), "eval", "eval/opponent")
    metrics.update(measured(trainer, learner))
    if config.eval_scripted:
        from baselines.samplers.scripted import ScriptedPolicy

        for name, players in sorted(family.scripted_players(seed).items()):
            scripted = ScriptedPolicy(players, trainer.tokenizer)
            plan = family.evaluation(indices, seed)
            rows = _rows(trainer, plan, learner, scripted) if indices else []
            metrics.update(eval_metrics(trainer.gather(rows), f"eval/scripted:{name}", None))
    return metrics


def measured(trainer: ISTrainer, policy: Policy) -> dict[str, float]:
    """The family's meter of ``policy`` (``eval/exploitability`` in Kuhn Poker); ``{}`` without one.

    Sampled like the evaluation's turns (``max_tokens``, ``temperature``), on
    the first process only: the meter needs no other process's turns.
    """
    config = trainer.config
    measure = getattr(trainer.family, "measure", None)  # optional: FamilyBase.measure
    if measure is None or config.eval_meter_samples <= 0 or trainer.rank != 0:
        return {}
    params = SamplingParams(
        max_tokens=config.max_tokens,
        temperature=config.temperature,
        seed=derive_seed(config.seed, EVAL_SEED, 1),
    )

    def sample(turns: Sequence[tuple[str, Any, Mapping[str, Any]]]) -> list[str]:
        requests = [SampleRequest.for_turn(agent, obs, info) for agent, obs, info in turns]
        with trainer._sampling_context():
            return [completion.text for completion in policy.sample(requests, params)]

    found = measure(sample, samples=config.eval_meter_samples, seed=config.seed)
    return {f"eval/{name}": float(value) for name, value in found.items()}


def _rows(
    trainer: ISTrainer, plan: EpisodePlan, learner: Policy, opponent: Policy | None
) -> list[EvalRow]:
    """Play an evaluation plan; a row per seat: (trained side?, return, numeric infos)."""
    rows: list[EvalRow] = []
    opponent_seats: list[frozenset[str]] | None = None
    if opponent is not None and opponent is learner:
        # The same weights on both sides: each setting once, every seat on both.
        plan, opponent_seats = one_per_setting(plan)
    batch = batch_of(plan)
    for result in trainer._play(batch, batch.assignment(learner, opponent), EVAL_SEED, "eval"):
        trained = batch.trained_agents[result.env_index]
        for agent, trajectory in result.trajectories.items():
            numeric = dict(numeric_info(result.final_infos[agent]))
            ret = trajectory_return(trajectory, result.final_rewards[agent])
            if opponent_seats is None:
                rows.append((agent in trained, ret, numeric))
                continue
            rows += [(True, ret, numeric)] if agent in trained else []
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
