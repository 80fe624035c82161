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

import contextlib
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
from baselines.env_families import EpisodeBatch, batch_of, derive_seed
from baselines.is_trainer.config import ISTrainerConfig
from baselines.is_trainer.evaluation import EvaluationPolicies, evaluate
from baselines.is_trainer.league import LeaguePlay, new_league
from baselines.is_trainer.model import load_policy_model, make_optimizer
from baselines.is_trainer.warm_start import warm_start
from baselines.progress import phase
from baselines.rollouts import EpisodeResult, PolicyAssignment, rollout
from baselines.samplers.base import SamplingParams
from baselines.samplers.build import build_sampler, resolve_sampler_kind
from baselines.training.checkpoints import (
    checkpoint_state,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from baselines.training.forward import (
    forward_logprobs,
    split_microbatches,
)
from baselines.training.losses import LossFn, get_loss, kl_sample_train, per_strategy_metrics
from baselines.training.run import (
    TrainingRun,
    accumulating,
    command_line,
    gather_lists,
    start_run,
    train_with,
)
from baselines.training.weights import gather_full_state, is_sharded, loading_whole_models
from baselines.types import Datum, TrajectoryGroup
from llm_envs.registration import make_family

__all__ = ["ISTrainer", "main", "train"]


def _shard_by_tokens(lengths_D: Sequence[int], num_shards: int) -> list[list[int]]:
    """Deal Datum indices to shards, longest first to the lightest shard (balanced tokens)."""
    shards: list[list[int]] = [[] for _ in range(num_shards)]
    loads = [0] * num_shards
    for index in sorted(range(len(lengths_D)), key=lambda i: (-lengths_D[i], i)):
        lightest = loads.index(min(loads))
        shards[lightest].append(index)
        loads[lightest] += lengths_D[index]
    return [sorted(shard) for shard in shards]


class ISTrainer(TrainingRun):
    """Set up a run (model, optimizer, sampler, resume), then :meth:`run` it.

    The loop, the metrics log and the final evaluation are
    :class:`~baselines.training.run.TrainingRun`'s; this class samples groups,
    assembles Datums and optimizes on them.

    Args:
        config: the run's configuration.
    """

    def __init__(self, config: ISTrainerConfig) -> None:
        self.config = config
        start = start_run(config, "is_trainer", accelerate_autocast=True, seed_per_process=True)
        acc = self.accelerator = start.accelerator
        self.bf16 = start.bf16  # autocast: the sampler and the engines sample in bf16 too
        self.run_dir = start.run_dir
        self.rank, self.world = acc.process_index, acc.num_processes
        self.output_dir = Path(config.output_dir)
        self.family = make_family(
            config.env,
            config.env_kwargs,
            task=config.task,
            seed=config.seed,
            task_kwargs=config.task_kwargs,
            strategy_mix=config.strategy_mix,
        )
        # A league's settings are checked before the model loads.
        league = new_league(config, self.family) if config.opponents == "league" else None
        loaded = load_policy_model(config, acc)
        self.tokenizer, self.renderer = loaded.tokenizer, loaded.renderer
        self.model_path = loaded.path
        self.layout, self.packing_probe = loaded.layout, loaded.packing_probe
        self.actions_only = loaded.actions_only  # the loss projects action tokens alone
        self.model, self.optimizer = acc.prepare(loaded.model, make_optimizer(loaded.model, config))
        self.model.train()
        self.loss_fn = get_loss(config.loss, **config.loss_kwargs)
        self.pad_token_id = loaded.pad_token_id
        checkpoint = latest_checkpoint(self.output_dir)
        self.start_iteration = 0 if checkpoint is None else load_checkpoint(acc, checkpoint)
        # The running baselines of credit='role_baseline', as they were after the checkpoint.
        saved = {} if checkpoint is None else checkpoint_state(checkpoint)
        self.role_baselines = RoleBaselines.from_json(saved.get("role_baselines", {}))
        # The league as it was after the checkpoint (--opponents league).
        self.league = None if league is None else LeaguePlay(self, saved.get("league") or league)
        self._league_metrics: dict[str, float] = {}
        self.max_model_len = loaded.max_model_len
        self.sampler = self._build_sampler(start.cuda)
        if self.start_iteration > 0:
            self._refresh_sampler()  # the engine started from the initial weights
        # Until the first optimizer step the trained weights are the initial model's.
        self._weights_moved = self.start_iteration > 0
        self.eval_policies = EvaluationPolicies(self)
        self._costs: dict[str, float] = {}  # this process's rollout costs, this iteration
        self.run_dir.start(config.to_json(), resume_from=self.start_iteration)
        self.metrics_path = self.run_dir.metrics_path
        if acc.is_main_process:
            probe = "" if math.isnan(self.packing_probe) else f", probe {self.packing_probe:.1e}"
            print(
                f"is_trainer: {config.model} on {self.world} x {acc.device}, sampler "
                f"{self.sampler.kind}, {self.layout} batches{probe}, starting at iteration "
                f"{self.start_iteration}",
                flush=True,
            )

    # ------------------------------------------------------------------ setup

    def _build_sampler(self, cuda: bool) -> Any:
        """The sampler (``config.sampler``) of the initial weights."""
        config, acc = self.config, self.accelerator
        kind = resolve_sampler_kind(config.sampler, num_processes=self.world)
        with loading_whole_models(acc):  # a sampler's own copy stays whole
            return build_sampler(
                kind,
                model=self.unwrapped,
                tokenizer=self.tokenizer,
                model_path=self.model_path,
                cuda=cuda,
                bf16=self.bf16,
                seed=derive_seed(config.seed, self.rank, 1),
                process_index=self.rank,
                max_model_len=self.max_model_len,
                config=config,
                sharded=is_sharded(acc),
                num_processes=self.world,
            )

    @property
    def unwrapped(self) -> Any:
        """The trained model without its DDP wrapper."""
        return self.accelerator.unwrap_model(self.model)

    # -------------------------------------------------------------- utilities

    def gather(self, items: list[Any]) -> list[Any]:
        """Every process's list, concatenated in rank order, on every process."""
        return gather_lists(items, self.world)

    def _refresh_sampler(self) -> float:
        """Hand the new weights (LoRA merged, shards gathered) to the sampler; return seconds."""
        start = time.perf_counter()
        if self.sampler.refresh is not None:
            weights = gather_full_state(
                self.accelerator, self.model, everywhere=self.sampler.every_process
            )
            if weights is not None:
                self.sampler.refresh(weights)
        return time.perf_counter() - start

    def _sampling_context(self) -> contextlib.AbstractContextManager[Any]:
        # generate() on the trained model samples under the trainer's autocast, so
        # sampler and trainer logprobs agree (bf16 on GPU).
        if self.sampler.kind == "transformers":
            return self.accelerator.autocast()
        return contextlib.nullcontext()

    # --------------------------------------------------------------- sampling

    def sample(self, iteration: int) -> list[TrajectoryGroup]:
        """Play this process's share of the iteration's groups; return every process's groups."""
        config = self.config
        first = iteration * config.groups_per_batch
        indices = list(range(first, first + config.groups_per_batch))[self.rank :: self.world]
        if self.league is not None:
            played, self._league_metrics = self.league.sample(iteration)
            return played
        groups: list[TrajectoryGroup] = []
        if indices:
            batch = batch_of(self.family.training(indices, derive_seed(config.seed, iteration)))
            results = self._play(batch, self.sampler.policy, iteration, "sample")
            groups = batch.to_groups(results)
            self._save_episodes(iteration, batch.envs)
        return self.gather(groups)

    def _play(
        self, batch: EpisodeBatch, policy: PolicyAssignment, seed: int, phase: str
    ) -> list[EpisodeResult]:
        """Play a batch's episodes with ``policy``, sampling seeded by ``seed`` and the rank."""
        params = SamplingParams(
            max_tokens=self.config.max_tokens,
            temperature=self.config.temperature,
            seed=derive_seed(self.config.seed, seed, self.rank),
        )
        with self._sampling_context():
            return rollout(
                batch.envs,
                policy,
                params,
                seeds=batch.seeds,
                options=batch.options,
                progress=self.phase(phase),
                timings=self._costs if phase == "sample" else None,
            )

    def _save_episodes(self, iteration: int, envs: Sequence[Any]) -> None:
        # Transcripts for the report's viewer; envs without record() are skipped.
        records = [
            {**e.unwrapped.record(), "iteration": iteration}
            for e in envs[: self.config.save_episodes]
            if hasattr(e.unwrapped, "record")
        ]
        self.run_dir.write_episodes(f"iter_{iteration:05d}", records)

    # ------------------------------------------------------------ optimizing

    def _microbatch_loss(
        self, data: list[Datum], scale: float, loss_fn: LossFn
    ) -> tuple[float, list[torch.Tensor]]:
        with self.accelerator.autocast():
            logprobs, logprobs_D, inputs = forward_logprobs(
                self.model,
                data,
                self.layout,
                self.accelerator.device,
                pad_token_id=self.pad_token_id,
                actions_only=self.actions_only,
                chunk=self.config.logprob_chunk_tokens,
            )
        loss = loss_fn(
            logprobs, inputs["sampling_logprobs"], inputs["advantages"], inputs["weights"]
        )
        self.accelerator.backward(loss * scale)
        return float(loss.detach()), [lp.detach().float().cpu() for lp in logprobs_D]

    def _dummy_backward(self) -> None:
        # A process with fewer microbatches than the others still joins every
        # gradient all-reduce: a zero loss through every parameter.
        ids = torch.full((1, 2), self.pad_token_id, device=self.accelerator.device)
        with self.accelerator.autocast():
            logits = self.model(input_ids=ids, use_cache=False).logits
        self.accelerator.backward(logits.sum() * 0.0)

    def _plan_microbatches(
        self, lengths_D: Sequence[int], chunk: list[int]
    ) -> list[list[list[int]]]:
        """Deal a chunk's Datums to the processes, then cut each share into microbatches."""
        plans = []
        for shard in _shard_by_tokens([lengths_D[i] for i in chunk], self.world):
            shard_lengths = [lengths_D[chunk[i]] for i in shard]
            batches = split_microbatches(
                shard_lengths,
                self.config.max_tokens_per_microbatch,
                self.layout,
                longest_first=self.layout == "padded",  # rows of similar lengths waste little
            )
            plans.append([[chunk[shard[j]] for j in batch] for batch in batches])
        return plans

    def _optimizer_step(
        self,
        data_D: Sequence[Datum],
        chunk: list[int],
        denominator: float,
        timings: dict[str, float],
        loss_fn: LossFn | None = None,
        refresh: bool = True,
    ) -> tuple[float, float, dict[int, torch.Tensor]]:
        """One optimizer step on a chunk; return its loss, grad norm and training logprobs.

        ``loss_fn`` replaces the run's policy loss (the warm start's imitation);
        ``refresh=False`` leaves the sampler's weights for the caller to refresh.
        """
        acc = self.accelerator
        plans = self._plan_microbatches([len(d) for d in data_D], chunk)
        mine, num_micro = plans[self.rank], max(len(p) for p in plans)
        start, local_loss = time.perf_counter(), 0.0
        local_logprobs: dict[int, np.ndarray] = {}
        for m in range(num_micro):
            # Gradients are all-reduced once, in the last backward of the step.
            with accumulating(acc, self.model, last=m == num_micro - 1):
                if m >= len(mine):
                    self._dummy_backward()
                    continue
                loss, logprobs_D = self._microbatch_loss(
                    [data_D[i] for i in mine[m]], self.world / denominator, loss_fn or self.loss_fn
                )
                local_loss += loss
                local_logprobs.update(
                    (i, lp.numpy()) for i, lp in zip(mine[m], logprobs_D, strict=True)
                )
        timings["time/forward_backward"] += time.perf_counter() - start
        start = time.perf_counter()
        max_norm = self.config.max_grad_norm if self.config.max_grad_norm > 0 else math.inf
        clipped = acc.clip_grad_norm_(self.model.parameters(), max_norm)
        norm = math.nan if clipped is None else float(clipped)  # None: DeepSpeed clips itself
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self._weights_moved = True
        timings["time/optimizer_step"] += time.perf_counter() - start
        if refresh:
            timings["time/refresh"] += self._refresh_sampler()
        loss = sum(self.gather([local_loss])) / denominator
        training_D = {
            i: torch.from_numpy(lp)
            for part in self.gather([local_logprobs])
            for i, lp in part.items()
        }
        return loss, norm, training_D

    def optimize(self, data_D: Sequence[Datum]) -> dict[str, float]:
        """``num_substeps`` optimizer steps on the batch; return optimization metrics."""
        config = self.config
        chunks = [c.tolist() for c in np.array_split(np.arange(len(data_D)), config.num_substeps)]
        training_D: dict[int, torch.Tensor] = {}
        metrics: dict[str, float] = {}
        losses, norms = [], []
        timings = {"time/forward_backward": 0.0, "time/optimizer_step": 0.0, "time/refresh": 0.0}
        chunks = [c for c in chunks if c]
        with phase("train", total=len(chunks), unit="optimizer steps") as progress:
            for substep, chunk in enumerate(chunks):
                total_weight = float(sum(float(data_D[i].weights.sum()) for i in chunk))
                if config.loss_normalization == "action_tokens" and total_weight <= 0:
                    continue  # every token masked: nothing to learn from this chunk
                denominator = total_weight if config.loss_normalization == "action_tokens" else 1.0
                loss, norm, step_D = self._optimizer_step(data_D, chunk, denominator, timings)
                losses.append(loss)
                norms.append(norm)
                training_D.update(step_D)
                progress.advance()
                if substep == 0 and config.num_substeps > 1:
                    # The on-policy check: data sampled with exactly these weights.
                    first = self._kl_metrics(data_D, step_D, sorted(step_D))
                    metrics.update({f"optim/substep_0/{k[6:]}": v for k, v in first.items()})
        trained = sorted(training_D)
        metrics.update(self._kl_metrics(data_D, training_D, trained))
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

    @staticmethod
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

    # ------------------------------------------------------------- evaluation

    def evaluate(self, iteration: int | None = None) -> dict[str, float]:
        """Play the evaluation episodes; return ``eval/...`` metrics of the trained policy.

        See :func:`baselines.is_trainer.evaluation.evaluate`.
        """
        return evaluate(self)

    # ------------------------------------------------------------------- loop

    def warm_start(self) -> dict[str, float]:
        """Imitate the environment family's scripted teacher before the first iteration.

        See :func:`baselines.is_trainer.warm_start.warm_start`.
        """
        return warm_start(self)

    def train_iteration(self, iteration: int) -> dict[str, Any]:
        """Sample the iteration's groups, assemble Datums, optimize; return the metrics."""
        config = self.config
        warm = self.warm_start() if iteration == 0 and config.warm_start_steps > 0 else {}
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
            render_messages=self.renderer,
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
        """Save model, optimizer, role baselines and random states (every process calls it)."""
        save_checkpoint(
            self.accelerator,
            self.model,
            self.output_dir,
            iteration,
            self.tokenizer,
            keep=self.config.keep_checkpoints,
            state={
                "role_baselines": self.role_baselines.to_json(),
                **({} if self.league is None else {"league": self.league.state()}),
            },
        )

    def save_final_model(self) -> None:
        """Save the trained model (with LoRA: the adapter) and tokenizer in ``final_model/``.

        Sharded weights (FSDP, ZeRO-3) are gathered first, by every process.
        """
        acc = self.accelerator
        gathered = {"state_dict": acc.get_state_dict(self.model)} if is_sharded(acc) else {}
        if acc.is_main_process:
            self.unwrapped.save_pretrained(self.run_dir.final_model_dir, **gathered)
            self.tokenizer.save_pretrained(self.run_dir.final_model_dir)

    def progress_postfix(self, metrics: Mapping[str, Any]) -> dict[str, str]:
        """The mean reward and the sampler/trainer KL of the iteration."""
        return {
            "reward": f"{metrics.get('env/all/reward/total', math.nan):.3f}",
            "kl": f"{metrics.get('optim/kl_sample_train_v2', math.nan):.1e}",
        }

    def finish(self) -> None:
        """Close the sampler's engine (if it has one), then wait for every process."""
        for policy in (self.sampler.policy, *self.eval_policies.engines()):
            close = getattr(policy, "close", None)
            if close is not None:
                close()
        if self.league is not None:
            self.league.close()
        self.accelerator.wait_for_everyone()


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
