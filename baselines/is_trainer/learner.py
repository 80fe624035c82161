"""The IS trainer's learner: the trained model, its optimizer and its sampler, behind one face.

The training loop (:mod:`baselines.is_trainer.trainer`) and its helpers, the
evaluation, league play and the warm start, act on the trained policy through
:class:`Learner` alone: play episodes with a policy (:meth:`Learner.play`),
take an optimizer step (:meth:`Learner.step`), hand the new weights to the
sampler (:meth:`Learner.refresh_sampler`), gather lists across processes
(:meth:`Learner.gather`), save transcripts, checkpoints and model folders. The
learning rate of each step is the learner's :func:`learning_rate_schedule`:
``learning_rate``, unless a caller (the warm start) asked for another rate for
the next few steps (:meth:`Learner.schedule_first_steps`).

MAGRPO (a model and an optimizer per agent, no ``accelerate``) and TRL's GRPO
(TRL owns the loop) keep their own: what they share with this learner lives in
:mod:`baselines.training`.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from baselines.env_families import EpisodeBatch, derive_seed
from baselines.is_trainer.config import ISTrainerConfig
from baselines.is_trainer.model import PolicyModel, make_optimizer
from baselines.progress import phase
from baselines.rollouts import EpisodeResult, PolicyAssignment, rollout
from baselines.run_directory import RunDirectory
from baselines.samplers.base import Policy, SamplingParams
from baselines.samplers.build import (
    build_adapter_engine,
    build_fixed_policy,
    build_sampler,
    resolve_sampler_kind,
)
from baselines.training.checkpoints import save_checkpoint
from baselines.training.forward import forward_logprobs, split_microbatches
from baselines.training.losses import LossFn, get_loss
from baselines.training.run import accumulating, gather_lists
from baselines.training.weights import gather_full_state, is_sharded, loading_whole_models
from baselines.types import Datum

if TYPE_CHECKING:
    from baselines.samplers.vllm_policy import VLLMPolicy

__all__ = ["Learner", "StepResult", "learning_rate_schedule", "shard_by_tokens"]

StepResult = tuple[float, float, dict[int, torch.Tensor]]
"""An optimizer step's loss, gradient norm and the training logprobs of its Datums, by index."""


def shard_by_tokens(lengths_D: Sequence[int], num_shards: int) -> list[list[int]]:
    """Deal Datum indices to shards, longest first to the lightest shard (balanced tokens)."""
    shards: list[list[int]] = [[] for _ in range(num_shards)]
    loads = [0] * num_shards
    for index in sorted(range(len(lengths_D)), key=lambda i: (-lengths_D[i], i)):
        lightest = loads.index(min(loads))
        shards[lightest].append(index)
        loads[lightest] += lengths_D[index]
    return [sorted(shard) for shard in shards]


def learning_rate_schedule(
    learning_rate: float, warm_rate: float, warm_steps: int
) -> Callable[[int], float]:
    """The learning rate of optimizer step ``k``, counted from 0.

    ``warm_rate`` for the first ``warm_steps`` steps (the warm start's), ``learning_rate`` after.

    Example:
        >>> rate = learning_rate_schedule(1e-5, 1e-4, 2)
        >>> [rate(k) for k in range(4)]
        [0.0001, 0.0001, 1e-05, 1e-05]
    """
    return lambda step: warm_rate if step < warm_steps else learning_rate


class Learner:
    """The trained policy of one process: model, optimizer, sampler, and what is done with them.

    Args:
        config: the run's configuration.
        accelerator: the run's ``accelerate.Accelerator``.
        loaded: the model as :func:`~baselines.is_trainer.model.load_policy_model` loaded it.
        run_dir: the run's folder (transcripts).
        cuda: whether the run is on GPU.
        bf16: whether the trainer autocasts to bf16 (the sampler samples in it too).
    """

    def __init__(
        self,
        config: ISTrainerConfig,
        accelerator: Any,
        loaded: PolicyModel,
        run_dir: RunDirectory,
        *,
        cuda: bool,
        bf16: bool,
    ) -> None:
        self.config = config
        self.accelerator = accelerator
        self.run_dir = run_dir
        self.bf16 = bf16
        self.rank, self.world = accelerator.process_index, accelerator.num_processes
        self.tokenizer, self.renderer = loaded.tokenizer, loaded.renderer
        self.model_path = loaded.path
        self.layout, self.packing_probe = loaded.layout, loaded.packing_probe
        self.actions_only = loaded.actions_only  # the loss projects action tokens alone
        self.max_model_len = loaded.max_model_len
        self.pad_token_id = loaded.pad_token_id
        self.model, self.optimizer = accelerator.prepare(
            loaded.model, make_optimizer(loaded.model, config)
        )
        self.model.train()
        self.loss_fn = get_loss(config.loss, **config.loss_kwargs)
        self.steps = 0  # optimizer steps taken by this learner object
        self.schedule = learning_rate_schedule(config.learning_rate, config.learning_rate, 0)
        # Until the first optimizer step the trained weights are the initial model's.
        self.weights_moved = False
        self.show_progress = bool(config.progress and run_dir.writer)
        self.sampler = self._build_sampler(cuda)

    def resumed(self) -> None:
        """The checkpoint's weights are loaded: the sampler gets them."""
        self.weights_moved = True
        self.refresh_sampler()  # the engine started from the initial weights

    def schedule_first_steps(self, rate: float, steps: int) -> None:
        """Take the next ``steps`` optimizer steps at ``rate``, then the run's ``learning_rate``."""
        self.schedule = learning_rate_schedule(self.config.learning_rate, rate, self.steps + steps)

    # ------------------------------------------------------------------ policies

    def _build_sampler(self, cuda: bool) -> Any:
        """The sampler (``config.sampling.sampler``) of the initial weights."""
        config, acc = self.config, self.accelerator
        kind = resolve_sampler_kind(config.sampling.sampler, num_processes=self.world)
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
                config=config.sampling,
                sharded=is_sharded(acc),
                num_processes=self.world,
            )

    def fixed_policy(
        self, spec: str | None, *, served_name: str | None, stream: int, dtype: str
    ) -> Policy:
        """A policy that never changes (:func:`~baselines.samplers.build.build_fixed_policy`).

        ``spec`` None is the initial model; ``stream`` picks the engine's seed.
        """
        return build_fixed_policy(
            spec,
            kind=self.sampler.kind,
            model_path=self.model_path,
            served_name=served_name,
            device=self.accelerator.device,
            seed=derive_seed(self.config.seed, self.rank, stream),
            max_model_len=self.max_model_len,
            config=self.config.sampling,
            dtype=dtype,
        )

    def adapter_engine(self, max_adapters: int) -> VLLMPolicy:
        """A vLLM engine of the base model that samples this run's LoRA adapters side by side."""
        return build_adapter_engine(
            self.model_path,
            self.tokenizer,
            bf16=self.bf16,
            seed=derive_seed(self.config.seed, self.rank, 3),
            max_model_len=self.max_model_len,
            lora_rank=self.config.lora_r,
            memory=self.config.sampling,
            max_adapters=max_adapters,
        )

    @property
    def lora(self) -> bool:
        """Whether LoRA adapters are trained instead of the whole model."""
        return self.config.lora_r > 0

    @property
    def unwrapped(self) -> Any:
        """The trained model without its DDP wrapper."""
        return self.accelerator.unwrap_model(self.model)

    def full_weights(self, *, everywhere: bool) -> dict[str, Any] | None:
        """The trained weights whole (LoRA merged, shards gathered); None where not gathered."""
        return gather_full_state(self.accelerator, self.model, everywhere=everywhere)

    # ------------------------------------------------------------------ playing

    def gather(self, items: list[Any]) -> list[Any]:
        """Every process's list, concatenated in rank order, on every process."""
        return gather_lists(items, self.world)

    def sampling_context(self) -> contextlib.AbstractContextManager[Any]:
        """Where a sampler call runs.

        ``generate`` on the trained model runs under the trainer's autocast, so
        sampler and trainer logprobs agree (bf16 on GPU).
        """
        if self.sampler.kind == "transformers":
            return self.accelerator.autocast()
        return contextlib.nullcontext()

    def sampling_params(self, *seed: int) -> SamplingParams:
        """The run's ``max_tokens`` and ``temperature``; the seed: the run's seed, then ``seed``."""
        config = self.config
        return SamplingParams(
            max_tokens=config.max_tokens,
            temperature=config.temperature,
            seed=derive_seed(config.seed, *seed),
        )

    def play(
        self,
        batch: EpisodeBatch,
        policy: PolicyAssignment,
        seed: int,
        phase: str,
        timings: dict[str, float] | None = None,
    ) -> list[EpisodeResult]:
        """Play a batch's episodes with ``policy``, sampling seeded by ``seed`` and the rank.

        ``phase`` names the progress shown; ``timings`` gathers the rollout's costs.
        """
        with self.sampling_context():
            return rollout(
                batch.envs,
                policy,
                self.sampling_params(seed, self.rank),
                seeds=batch.seeds,
                options=batch.options,
                progress=phase if self.show_progress else None,
                timings=timings,
            )

    def save_episodes(self, iteration: int, envs: Sequence[Any]) -> None:
        """Transcripts of the first ``save_episodes`` episodes (envs without ``record()``: none)."""
        records = [
            {**e.unwrapped.record(), "iteration": iteration}
            for e in envs[: self.config.save_episodes]
            if hasattr(e.unwrapped, "record")
        ]
        self.run_dir.write_episodes(f"iter_{iteration:05d}", records)

    # ------------------------------------------------------------------ optimizing

    def refresh_sampler(self) -> float:
        """Hand the new weights (LoRA merged, shards gathered) to the sampler; return seconds."""
        start = time.perf_counter()
        if self.sampler.refresh is not None:
            weights = self.full_weights(everywhere=self.sampler.every_process)
            if weights is not None:
                self.sampler.refresh(weights)
        return time.perf_counter() - start

    def step(
        self,
        data_D: Sequence[Datum],
        chunk: list[int],
        denominator: float,
        timings: dict[str, float],
        loss_fn: LossFn | None = None,
        refresh: bool = True,
    ) -> StepResult:
        """One optimizer step on the Datums ``chunk`` of ``data_D``; its loss, grad norm, logprobs.

        The summed loss is divided by ``denominator``; ``loss_fn`` replaces the
        run's policy loss (the warm start's imitation); ``refresh=False`` leaves
        the sampler's weights for the caller to refresh. ``timings`` gathers the
        ``time/forward_backward``, ``time/optimizer_step`` and ``time/refresh`` seconds.
        """
        acc = self.accelerator
        plans = self._plan_microbatches([len(d) for d in data_D], chunk)
        mine, num_micro = plans[self.rank], max(len(p) for p in plans)
        start, local_loss = time.perf_counter(), 0.0
        local_logprobs: dict[int, np.ndarray] = {}
        with phase("forward and backward", num_micro, "microbatches") as passes:
            for m in range(num_micro):
                # Gradients are all-reduced once, in the last backward of the step.
                with accumulating(acc, self.model, last=m == num_micro - 1):
                    if m < len(mine):
                        loss, logprobs_D = self._microbatch_loss(
                            [data_D[i] for i in mine[m]],
                            self.world / denominator,
                            loss_fn or self.loss_fn,
                        )
                        local_loss += loss
                        local_logprobs.update(
                            (i, lp.numpy()) for i, lp in zip(mine[m], logprobs_D, strict=True)
                        )
                    else:
                        self._dummy_backward()
                passes.advance()
        timings["time/forward_backward"] += time.perf_counter() - start
        start = time.perf_counter()
        max_norm = self.config.max_grad_norm if self.config.max_grad_norm > 0 else math.inf
        clipped = acc.clip_grad_norm_(self.model.parameters(), max_norm)
        norm = math.nan if clipped is None else float(clipped)  # None: DeepSpeed clips itself
        for group in self.optimizer.param_groups:
            group["lr"] = self.schedule(self.steps)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.steps += 1
        self.weights_moved = True
        timings["time/optimizer_step"] += time.perf_counter() - start
        if refresh:
            timings["time/refresh"] += self.refresh_sampler()
        loss = sum(self.gather([local_loss])) / denominator
        training_D = {
            i: torch.from_numpy(lp)
            for part in self.gather([local_logprobs])
            for i, lp in part.items()
        }
        return loss, norm, training_D

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
        for shard in shard_by_tokens([lengths_D[i] for i in chunk], self.world):
            shard_lengths = [lengths_D[chunk[i]] for i in shard]
            batches = split_microbatches(
                shard_lengths,
                self.config.max_tokens_per_microbatch,
                self.layout,
                longest_first=self.layout == "padded",  # rows of similar lengths waste little
            )
            plans.append([[chunk[shard[j]] for j in batch] for batch in batches])
        return plans

    # ------------------------------------------------------------------ saving

    def save_checkpoint(self, output_dir: Path, iteration: int, state: dict[str, Any]) -> None:
        """Save model, optimizer, random states and ``state`` (every process calls it)."""
        save_checkpoint(
            self.accelerator,
            self.model,
            output_dir,
            iteration,
            self.tokenizer,
            keep=self.config.keep_checkpoints,
            state=state,
        )

    def save_model_folder(self, folder: Path, *, adapter: bool = False) -> None:
        """Write the trained weights (LoRA merged) as a model folder that ``from_pretrained`` loads.

        ``adapter``: keep the LoRA adapter alone beside them too (``folder/adapter``).
        Every process calls it; the main process writes, atomically (a
        ``.partial`` folder renamed), so a folder that exists is whole.
        """
        from baselines.samplers.server_weights import write_weights_folder

        acc = self.accelerator
        weights = self.full_weights(everywhere=False)
        if acc.is_main_process and weights is not None:
            partial = folder.with_name(f"{folder.name}.partial")
            shutil.rmtree(partial, ignore_errors=True)
            unwrapped = self.unwrapped
            base = getattr(unwrapped, "get_base_model", lambda: unwrapped)()
            write_weights_folder(weights, base.config, partial, self.tokenizer)
            if adapter:
                unwrapped.save_pretrained(partial / "adapter")  # PEFT: the adapter alone
            shutil.rmtree(folder, ignore_errors=True)  # a resumed run's redo
            partial.replace(folder)
        acc.wait_for_everyone()

    def save_final_model(self, folder: Path) -> None:
        """Save the trained model (with LoRA: the adapter) and tokenizer in ``folder``.

        Sharded weights (FSDP, ZeRO-3) are gathered first, by every process.
        """
        acc = self.accelerator
        gathered = {"state_dict": acc.get_state_dict(self.model)} if is_sharded(acc) else {}
        if acc.is_main_process:
            self.unwrapped.save_pretrained(folder, **gathered)
            self.tokenizer.save_pretrained(folder)
