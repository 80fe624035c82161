"""The importance-sampling trainer: the debate recipe's training loop, run locally in torch.

    python -m baselines.is_trainer --env debate          # SmolLM2-135M-Instruct, CPU or GPU
    accelerate launch --multi_gpu --num_processes 2 -m baselines.is_trainer --env debate

One iteration (the debate recipe, "Training Loop"):

1. *Sample* ``groups_per_batch`` groups with the current weights
   (:mod:`baselines.rollouts`; each process plays its share, then every process
   receives every group).
2. *Assemble* Datums (:func:`baselines.data.datums.assemble_training_data`): advantages
   of the ``credit`` scheme (:mod:`baselines.data.credit`; by default returns
   centred per group), the training context of the expert-iteration plan swapped in from
   ``info["training_messages"]`` with the sampler's own chat renderer, strategy
   weights ``w_s / n_s``.
3. *Optimize*: the Datums are split into ``num_substeps`` consecutive chunks,
   one AdamW step each. Each process runs the forward pass on its share of a
   chunk, in microbatches of packed Datums (no padding), and the loss of
   :mod:`baselines.training.losses` over action tokens (``-sum(w * r * A)`` with ``r =
   exp(lp_train - lp_sample)`` for ``importance_sampling``), divided by the
   chunk's total action-token weight (``loss_normalization``). Gradients are
   averaged across processes by DDP; since every process scales its loss by
   ``num_processes / total weight``, the step is the same for any number of
   processes.
4. *Refresh* the sampler after every optimizer step (the debate recipe,
   "Checkpointing and sampling-client refresh"), so the next batch is sampled
   on-policy: the first substep's ``optim/kl_sample_train_*`` stay at the
   sampler/trainer numerical noise, and are the check.
5. *Log* one JSON line per iteration (``metrics.jsonl``), *checkpoint*, and
   *evaluate* (debate: role-averaged against a fixed opponent, the debate recipe
   "Evaluation mode"; expert iteration: ``iid`` accuracy on held-out problems).

A run started again with the same ``output_dir`` resumes after its last
checkpoint: model, optimizer and random states are restored and the data of
iteration ``k`` depends only on the seed and ``k``, so no iteration is lost or
repeated (metric lines past the checkpoint are dropped and written again).

This trainer never parses environment text: it reads rewards, token ids and
``infos`` only.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from baselines.data.credit import RoleBaselines, assign_credit
from baselines.data.datums import assemble_training_data
from baselines.data.episode_metrics import episode_metrics
from baselines.env_families import batch_of, derive_seed, family_of
from baselines.is_trainer.config import ISTrainerConfig
from baselines.is_trainer.evaluation import EvaluationPolicies, evaluate
from baselines.is_trainer.league import LeaguePlay, new_league
from baselines.is_trainer.learner import Learner
from baselines.is_trainer.model import load_policy_model
from baselines.is_trainer.warm_start import warm_start
from baselines.progress import phase
from baselines.training.checkpoints import checkpoint_state, latest_checkpoint, load_checkpoint
from baselines.training.losses import kl_sample_train, per_strategy_metrics
from baselines.training.run import TrainingRun, command_line, start_run, train_with
from baselines.types import Datum, TrajectoryGroup

__all__ = ["ISTrainer", "main", "train"]


class ISTrainer(TrainingRun):
    """Set up a run (learner, family, league, resume), then :meth:`run` it.

    The loop, the metrics log and the final evaluation are
    :class:`~baselines.training.run.TrainingRun`'s; this class samples groups,
    assembles Datums and optimizes on them through its
    :class:`~baselines.is_trainer.learner.Learner`.

    Args:
        config: the run's configuration.
    """

    def __init__(self, config: ISTrainerConfig) -> None:
        self.config = config
        start = start_run(config, "is_trainer", accelerate_autocast=True, seed_per_process=True)
        acc = self.accelerator = start.accelerator
        self.run_dir = start.run_dir
        self.output_dir = Path(config.output_dir)
        self.family = family_of(
            config,
            strategy_mix=config.strategy_mix,
            debates_per_question=config.debates_per_question,
        )
        # A league's settings are checked before the model loads.
        league = new_league(config.league, self.family) if config.opponents == "league" else None
        loaded = load_policy_model(config, acc)
        self.learner = Learner(config, acc, loaded, self.run_dir, cuda=start.cuda, bf16=start.bf16)
        checkpoint = latest_checkpoint(self.output_dir)
        self.start_iteration = 0 if checkpoint is None else load_checkpoint(acc, checkpoint)
        # The running baselines of credit='role_baseline', as they were after the checkpoint.
        saved = {} if checkpoint is None else checkpoint_state(checkpoint)
        self.role_baselines = RoleBaselines.from_json(saved.get("role_baselines", {}))
        # The league as it was after the checkpoint (--opponents league).
        self.league = (
            None
            if league is None
            else LeaguePlay(
                self.learner,
                self.family,
                config.league,
                saved.get("league") or league,
                folder=self.output_dir / "league",
                groups_per_batch=config.groups_per_batch,
            )
        )
        self._league_metrics: dict[str, float] = {}
        if self.start_iteration > 0:
            self.learner.resumed()
        self.eval_policies = EvaluationPolicies(self.learner, config.evaluation)
        self._costs: dict[str, float] = {}  # this process's rollout costs, this iteration
        self.run_dir.start(config.to_json(), resume_from=self.start_iteration)
        self.metrics_path = self.run_dir.metrics_path
        if acc.is_main_process:
            learner = self.learner
            probe = (
                "" if math.isnan(learner.packing_probe) else f", probe {learner.packing_probe:.1e}"
            )
            print(
                f"is_trainer: {config.model} on {learner.world} x {acc.device}, sampler "
                f"{learner.sampler.kind}, {learner.layout} batches{probe}, starting at iteration "
                f"{self.start_iteration}",
                flush=True,
            )

    # --------------------------------------------------------------- sampling

    def sample(self, iteration: int) -> list[TrajectoryGroup]:
        """Play this process's share of the iteration's groups; return every process's groups."""
        config, learner = self.config, self.learner
        first = iteration * config.groups_per_batch
        indices = list(range(first, first + config.groups_per_batch))[learner.rank :: learner.world]
        if self.league is not None:
            played, self._league_metrics = self.league.sample(iteration, self._costs)
            return played
        groups: list[TrajectoryGroup] = []
        if indices:
            batch = batch_of(self.family.training(indices, derive_seed(config.seed, iteration)))
            policy = learner.sampler.policy
            results = learner.play(batch, policy, iteration, "sampling", self._costs)
            groups = batch.to_groups(results)
            learner.save_episodes(iteration, batch.envs)
        return learner.gather(groups)

    # ------------------------------------------------------------ optimizing

    def optimize(self, data_D: Sequence[Datum]) -> dict[str, float]:
        """``num_substeps`` optimizer steps on the batch; return optimization metrics."""
        config = self.config
        chunks = [c.tolist() for c in np.array_split(np.arange(len(data_D)), config.num_substeps)]
        training_D: dict[int, torch.Tensor] = {}
        metrics: dict[str, float] = {}
        losses, norms = [], []
        timings = {"time/forward_backward": 0.0, "time/optimizer_step": 0.0, "time/refresh": 0.0}
        chunks = [c for c in chunks if c]
        with phase("training", total=len(chunks), unit="optimizer steps") as progress:
            for substep, chunk in enumerate(chunks):
                total_weight = float(sum(float(data_D[i].weights.sum()) for i in chunk))
                if config.loss_normalization == "action_tokens" and total_weight <= 0:
                    continue  # every token masked: nothing to learn from this chunk
                denominator = total_weight if config.loss_normalization == "action_tokens" else 1.0
                loss, norm, step_D = self.learner.step(data_D, chunk, denominator, timings)
                losses.append(loss)
                norms.append(norm)
                training_D.update(step_D)
                progress.advance()
                if substep == 0 and config.num_substeps > 1:
                    # The on-policy check: data sampled with exactly these weights.
                    first = _kl_metrics(data_D, step_D, sorted(step_D))
                    metrics.update({f"optim/substep_0/{k[6:]}": v for k, v in first.items()})
        trained = sorted(training_D)
        metrics.update(_kl_metrics(data_D, training_D, trained))
        if trained:
            metrics.update(
                per_strategy_metrics([data_D[i] for i in trained], [training_D[i] for i in trained])
            )
        tokens = sum(len(data_D[i]) for i in trained)
        metrics.update(timings)
        metrics.update(
            {
                "optim/num_steps": float(len(losses)),
                "optim/loss": float(np.mean(losses)) if losses else 0.0,
                "optim/grad_norm": float(np.mean(norms)) if norms else 0.0,
                "optim/learning_rate": config.learning_rate,
                "train/tokens": float(tokens),
                "train/tokens_per_s": tokens / max(timings["time/forward_backward"], 1e-9),
            }
        )
        return metrics

    # ------------------------------------------------------------- evaluation

    def evaluate(self, iteration: int | None = None) -> dict[str, float]:
        """Play the evaluation episodes; return ``eval/...`` metrics of the trained policy.

        See :func:`baselines.is_trainer.evaluation.evaluate`.
        """
        return evaluate(self.learner, self.family, self.config.evaluation, self.eval_policies)

    # ------------------------------------------------------------------- loop

    def train_iteration(self, iteration: int) -> dict[str, Any]:
        """Sample the iteration's groups, assemble Datums, optimize; return the metrics."""
        config = self.config
        warm = (
            warm_start(self.learner, self.family, config.warm_start)
            if iteration == 0 and config.warm_start.steps > 0
            else {}
        )
        start = time.perf_counter()
        self._costs = {}
        groups = self.sample(iteration)
        metrics: dict[str, Any] = {
            **warm,
            "time/sample": time.perf_counter() - start,
            **self._costs,
            **self._league_metrics,
        }
        if self._costs.get("time/policy"):
            metrics["sample/tokens_per_s"] = (
                self._costs["sample/tokens"] / self._costs["time/policy"]
            )
        start = time.perf_counter()
        credit = assign_credit(
            groups,
            config.credit,
            env=config.env,
            baselines=self.role_baselines,
            normalize_std=config.normalize_advantages,
        )
        self.role_baselines = credit.baselines
        batch = assemble_training_data(
            groups,
            render_messages=self.learner.renderer,
            strategy_weights=config.strategy_weights,
            drop_constant=config.drop_constant_groups,
            credit=credit,
        )
        metrics["time/assemble"] = time.perf_counter() - start
        metrics.update(episode_metrics(groups))
        metrics.update(batch.metrics)
        train_start = time.perf_counter()
        metrics.update(self.optimize(batch.data_D))
        metrics["time/train"] = time.perf_counter() - train_start
        return metrics

    def save_checkpoint(self, iteration: int) -> None:
        """Save the learner, role baselines and league (every process calls it)."""
        state = {
            "role_baselines": self.role_baselines.to_json(),
            **({} if self.league is None else {"league": self.league.state()}),
        }
        self.learner.save_checkpoint(self.output_dir, iteration, state)

    def save_final_model(self) -> None:
        """Save the trained model (with LoRA: the adapter) and tokenizer in ``final_model/``."""
        self.learner.save_final_model(self.run_dir.final_model_dir)

    def progress_postfix(self, metrics: Mapping[str, Any]) -> dict[str, str]:
        """The mean reward and the sampler/trainer KL of the iteration."""
        return {
            "reward": f"{metrics.get('env/all/reward/total', math.nan):.3f}",
            "kl": f"{metrics.get('optim/kl_sample_train_v2', math.nan):.1e}",
        }

    def run(self) -> Path:
        """Train; with ``num_iterations=0`` and a warm start, the warm start alone.

        The warm-started model is then the final model (and, with ``eval_every``,
        what the final evaluation measures): a starting point several runs can share.
        """
        config = self.config
        if config.num_iterations == 0 and config.warm_start.steps > 0:
            self.log({"iteration": 0, **warm_start(self.learner, self.family, config.warm_start)})
        return super().run()

    def finish(self) -> None:
        """Close the sampler's engine (if it has one), then wait for every process."""
        for policy in (self.learner.sampler.policy, *self.eval_policies.engines()):
            close = getattr(policy, "close", None)
            if close is not None:
                close()
        if self.league is not None:
            self.league.close()
        self.accelerator.wait_for_everyone()


def _kl_metrics(
    data_D: Sequence[Datum], training_D: dict[int, torch.Tensor], indices: list[int]
) -> dict[str, float]:
    masks = [data_D[i].mask for i in indices]
    if not indices or not any(m.any() for m in masks):
        return {}
    return kl_sample_train(
        torch.from_numpy(np.concatenate([data_D[i].logprobs for i in indices])),
        torch.cat([training_D[i] for i in indices]),
        torch.from_numpy(np.concatenate(masks)),
    )


def train(config: ISTrainerConfig) -> Path:
    """Train (or resume) with ``config``; return the path of ``metrics.jsonl``.

    Progress lines and quiet libraries as the command line has them
    (:func:`~baselines.training.run.train_with`).
    """
    return train_with(ISTrainer, config)


def main(
    argv: Sequence[str] | None = None, *, prog: str = "python -m baselines.is_trainer"
) -> None:
    """The command line: ``python -m baselines.is_trainer --help`` (``llm-envs train``)."""
    command_line(ISTrainerConfig, ISTrainer, argv, prog=prog)
