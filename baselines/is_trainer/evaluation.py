"""The importance-sampling trainer's evaluation: the trained policy against fixed opponents.

The episodes are the family's evaluation plan, the same at every evaluation
(their seed does not depend on the iteration), so evaluations compare. A
family with a fixed opponent (:attr:`~llm_envs.family.Family.fixed_opponent`)
plays the trained policy in some seats and the opponent
(:meth:`ISTrainer._fixed_opponent`: the initial model by default) in the
others; ``eval/...`` are the trained seats' means, ``eval/opponent/...`` the
opponent's. With ``eval_scripted`` the episodes are played again against
each set of the family's scripted players (``eval/scripted:SET/...``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from baselines.data.advantages import trajectory_return
from baselines.data.episode_metrics import numeric_info
from baselines.env_families import batch_of, derive_seed, one_per_setting
from baselines.policies.base import Policy
from llm_envs.family import EpisodePlan

if TYPE_CHECKING:
    from baselines.is_trainer.trainer import ISTrainer

__all__ = ["EVAL_SEED", "eval_metrics", "evaluate"]

EVAL_SEED = 7919
"""Evaluation episodes are the same at every evaluation, so they compare."""

EvalRow = tuple[bool, float, dict[str, float]]
"""An evaluation seat: whether the trained policy played it, its return, its numeric infos."""


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
    learner = trainer._eval_learner() if indices else trainer.sampler.policy
    if indices:
        opponent = trainer._fixed_opponent() if family.fixed_opponent else None
        rows = _rows(trainer, family.evaluation(indices, seed), learner, opponent)
    metrics = eval_metrics(trainer._gather(rows), "eval", "eval/opponent")
    if config.eval_scripted:
        from baselines.policies.scripted import ScriptedPolicy

        for name, players in sorted(family.scripted_players(seed).items()):
            scripted = ScriptedPolicy(players, trainer.tokenizer)
            plan = family.evaluation(indices, seed)
            rows = _rows(trainer, plan, learner, scripted) if indices else []
            metrics.update(eval_metrics(trainer._gather(rows), f"eval/scripted:{name}", None))
    return metrics


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
