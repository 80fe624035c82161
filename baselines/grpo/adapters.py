"""Rollout functions for ``trl.GRPOTrainer`` that play :mod:`llm_envs` environments.

``GRPOTrainer(rollout_func=f)`` calls ``f(prompts, trainer)`` with the prompts of
one generation batch, each prompt already repeated ``num_generations`` times
(TRL 1.16), and expects one completion per prompt entry: ``prompt_ids``,
``completion_ids``, ``logprobs`` and, for multi-turn completions, ``env_mask``.
Every other key is handed to the reward functions as a keyword argument.

The rollout functions here:

1. map each block of equal prompts back to the episodes of one training
   group and each prompt entry to one agent's trajectory in them
   (:class:`~baselines.grpo.family_rollout.FamilyRollout`: any registered
   family's own plan; :class:`EnvRollout` is the base for others);
2. play every episode at once with :func:`baselines.rollouts.rollout`, sampling
   with the trainer's current weights (:func:`trainer_policy`);
3. assemble each agent's turns into one completion with masked environment
   tokens (:mod:`baselines.grpo.assembly`);
4. return the environment's return (step rewards + final reward) as the extra
   field ``env_reward``, read by the reward function :func:`env_reward`, and
   per-completion metrics as ``env_metrics``, which :func:`env_reward` logs;
   with a ``credit`` scheme other than ``group_mean``, also each completion's
   advantage under it (:mod:`baselines.data.credit`, one TRL group = one
   training group) as ``credit_reward``, which :func:`env_reward` hands TRL
   in place of the return;
5. with ``save_episodes > 0``, write the first episodes' transcripts
   (:class:`~llm_envs.records.EpisodeRecord`) of each training step to
   ``OUTPUT_DIR/episodes/step_NNNNN.jsonl`` for ``python -m baselines.report``.

A rollout function never parses environment text: rewards and metrics come
from the environment's rewards and infos. It never names a family either.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from baselines.data.credit import CREDIT_NAMES, CreditName, RoleBaselines, assign_credit
from baselines.data.episode_metrics import numeric_info
from baselines.grpo.assembly import AssembledCompletion, SampledTurn, assemble_completion
from baselines.grpo.reward import env_reward
from baselines.grpo.sampling import RecordingPolicy, SeenTurn, trainer_policy
from baselines.rollouts import rollout
from baselines.run_directory import RunDirectory
from baselines.samplers.base import (
    ChatRenderer,
    Policy,
    SamplingParams,
)
from baselines.types import Tokens, Trajectory, TrajectoryGroup
from llm_envs.bridges.trl import refuse_context_swap

__all__ = ["EnvRollout", "completion_metrics", "env_reward", "trainer_policy"]


# ------------------------------------------------------------------ base class


@dataclass
class _Plan:
    """Episodes to play for one generation batch and which trajectory answers each prompt entry."""

    envs: list[Any]
    options: list[dict[str, Any]]
    rows: list[tuple[int, str]]  # per prompt entry: (episode index, agent)
    seeds: list[int] | None = None  # None: the rollout's running seeds


class EnvRollout:
    """Base of the rollout functions: play episodes, assemble completions, report rewards.

    A subclass says which episodes to play for a list of prompts (``_plan``),
    which prompts make the training data set (:meth:`dataset_prompts`), how
    many completions form a group (:attr:`num_generations`) and the most turns
    one completion holds (:attr:`max_turns`).

    Args:
        max_tokens_per_turn: most sampled tokens per turn.
        policy: a fixed sampler (tests, scripted opponents, your own engine);
            ``None`` samples with the trainer's current weights (:func:`trainer_policy`).
        seed: base seed of the environments' resets (a plan derives its seeds
            from it; a plan without seeds plays episode ``i`` of the run on ``seed + i``).
        close_final_turn: end a final action that stopped on a stop string with
            the template's end-of-turn token (masked), so TRL's truncation check
            (``mask_truncated_completions``) does not drop it.
        save_episodes: at each training step, write the records
            (``env.unwrapped.record()``: prompts, raw outputs, parsed fields,
            rewards) of the first this many episodes of the step's first rollout
            to ``trainer.args.output_dir/episodes/step_NNNNN.jsonl``, ``NNNNN``
            being the step that trains on them (the ``iteration`` of
            ``metrics.jsonl``). Only the main process writes; evaluation rollouts
            (model in eval mode) and environments without ``record()`` are not
            saved; 0 saves nothing.
        credit: the credit-assignment scheme (:mod:`baselines.data.credit`);
            ``group_mean`` leaves the returns to TRL's own centring, any other
            adds each completion's advantage as ``credit_reward``, which TRL
            centres again per group (a no-op where the group's advantages sum
            to zero; see docs/credit.md). Use ``scale_rewards="none"`` with it.

    Attributes:
        episodes_played: episodes played so far.
        last_output: what the last call returned to TRL (``None`` before the
            first), to inspect a completion and its ``env_mask``.
        role_baselines: the running baselines of ``credit="role_baseline"``
            after the last call (this process's episodes only).
        credit_env: the environment name the role baselines are kept under.
    """

    num_generations: int
    """Completions per group: TRL's ``num_generations``."""
    max_turns: int = 1
    """The most turns one completion holds (TRL's ``max_completion_length`` is
    ``max_tokens_per_turn`` times it)."""

    def __init__(
        self,
        *,
        max_tokens_per_turn: int = 256,
        policy: Policy | None = None,
        seed: int = 0,
        close_final_turn: bool = True,
        save_episodes: int = 0,
        credit: CreditName = "group_mean",
    ) -> None:
        if max_tokens_per_turn < 1:
            raise ValueError(f"max_tokens_per_turn must be >= 1, got {max_tokens_per_turn}")
        if not isinstance(save_episodes, int) or save_episodes < 0:
            raise ValueError(f"save_episodes must be an int >= 0, got {save_episodes!r}")
        if credit not in CREDIT_NAMES:
            raise ValueError(f"credit must be one of {list(CREDIT_NAMES)}, got {credit!r}")
        self.credit = credit
        self.credit_env = type(self).__name__
        self.role_baselines = RoleBaselines()
        self.max_tokens_per_turn = max_tokens_per_turn
        self.policy = policy
        self.seed = seed
        self.close_final_turn = close_final_turn
        self.save_episodes = save_episodes
        self.episodes_played = 0
        self.last_output: dict[str, list[Any]] | None = None
        self._saved_step: int | None = None

    # -- to implement
    def dataset_prompts(self) -> list[str]:
        """The prompts of the training data set, one per question or problem."""
        raise NotImplementedError

    def _plan(self, prompts: Sequence[Any]) -> _Plan:
        raise NotImplementedError

    # -- shared
    def dataset(self) -> Any:
        """The training data set: a ``datasets.Dataset`` with a ``prompt`` column."""
        from datasets import Dataset

        return Dataset.from_dict({"prompt": self.dataset_prompts()})

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        """The ``RolloutFunc``: one completion per entry of ``prompts``, in order."""
        plan = self._plan(prompts)
        seeds = plan.seeds or [self.seed + self.episodes_played + i for i in range(len(plan.envs))]
        self.episodes_played += len(plan.envs)
        params = SamplingParams(
            max_tokens=self.max_tokens_per_turn,
            temperature=float(getattr(trainer, "temperature", 1.0)),
            top_p=float(getattr(trainer, "top_p", 1.0)),
        )
        sampler = (
            contextlib.nullcontext(self.policy)
            if self.policy is not None
            else trainer_policy(trainer)
        )
        with sampler as policy:
            recorder = RecordingPolicy(policy)
            results = rollout(plan.envs, recorder, params, seeds=seeds, options=plan.options)
        self._save_episodes(trainer, plan.envs)
        tokenizer = trainer.processing_class
        eos = ChatRenderer(tokenizer).eos_token_ids
        out: dict[str, list[Any]] = {
            "prompt_ids": [],
            "completion_ids": [],
            "logprobs": [],
            "env_mask": [],
            "env_reward": [],
            "env_metrics": [],
        }
        played: list[tuple[Trajectory, float]] = []
        for prompt, (index, agent) in zip(prompts, plan.rows, strict=True):
            result = results[index]
            trajectory = result.trajectories[agent]
            played.append((trajectory, result.final_rewards[agent]))
            if trajectory.transitions:
                refuse_context_swap(agent, trajectory.transitions[0].info)
                done = assemble_completion(
                    tokenizer,
                    _sampled_turns(trajectory, recorder.seen),
                    close_final_turn=self.close_final_turn,
                    eos_token_ids=eos,
                )
            else:
                done = _never_acted(tokenizer, prompt, eos)
            out["prompt_ids"].append(done.prompt_ids)
            out["completion_ids"].append(done.completion_ids)
            out["logprobs"].append(done.logprobs)
            out["env_mask"].append(done.env_mask)
            out["env_reward"].append(trajectory.step_reward + result.final_rewards[agent])
            out["env_metrics"].append(completion_metrics(trajectory, done))
        if self.credit != "group_mean":
            out["credit_reward"] = self._credit_rewards(played)
        self.last_output = out
        return out

    def _credit_rewards(self, played: Sequence[tuple[Trajectory, float]]) -> list[float]:
        """Each completion's advantage under :attr:`credit`, TRL's groups as the training groups."""
        size = self.num_generations
        groups = [
            TrajectoryGroup([t for t, _ in block], [final for _, final in block])
            for block in (played[start : start + size] for start in range(0, len(played), size))
        ]
        credit = assign_credit(
            groups, self.credit, env=self.credit_env, baselines=self.role_baselines
        )
        if credit.turn_advantages_P_G is not None and any(
            len(turns) > 1 for group in credit.turn_advantages_P_G for turns in group
        ):
            raise ValueError(
                f"credit={self.credit!r} gives each turn its own advantage, but TRL gives a "
                "completion (all of an agent's turns) one: use it with agents of one turn, or "
                "train with the importance-sampling trainer (baselines.is_trainer)"
            )
        self.role_baselines = credit.baselines
        return [float(a) for advantages_G in credit.advantages_P_G for a in advantages_G]

    def _save_episodes(self, trainer: Any, envs: Sequence[Any]) -> None:
        """Write the first :attr:`save_episodes` transcripts of a training step (see the class)."""
        if self.save_episodes == 0 or not trainer.model.training:
            return
        if not trainer.accelerator.is_main_process:
            return
        # TRL samples before the optimizer step: the step that trains on this batch is the next.
        step = int(trainer.state.global_step) + 1
        if step == self._saved_step:  # several generation batches per step: keep the first
            return
        self._saved_step = step
        records = []
        for env in envs[: self.save_episodes]:
            base = getattr(env, "unwrapped", env)
            if hasattr(base, "record"):
                records.append({**base.record(), "iteration": step})
        RunDirectory(trainer.args.output_dir).write_episodes(f"step_{step:05d}", records)


def _sampled_turns(
    trajectory: Trajectory, seen: Mapping[tuple[Tokens, Tokens], SeenTurn]
) -> list[SampledTurn]:
    turns = []
    for t in trajectory.transitions:
        s = seen[(t.observation, t.action)]
        turns.append(
            SampledTurn(
                s.messages,
                t.observation,
                t.action,
                t.logprobs,
                s.text,
                s.stop_reason,
                trained=t.loss_weight > 0,
            )
        )
    return turns


def _never_acted(tokenizer: Any, prompt: Any, eos: frozenset[int]) -> AssembledCompletion:
    # An agent that never acted (a debate that ended on an earlier agent's parse error)
    # still owes TRL a completion: one masked end-of-sequence token after the prompt.
    messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": str(prompt)}]
    out = AssembledCompletion(prompt_ids=list(ChatRenderer(tokenizer)(messages)))
    out.extend([min(eos)], None, 0)
    return out


def completion_metrics(trajectory: Trajectory, done: AssembledCompletion) -> dict[str, float]:
    """Per-completion metrics: the last turn's numeric outcome infos, turns, env tokens.

    The trainer's own names are in :data:`llm_envs.contract.RESERVED_INFO_KEYS`.
    """
    n = len(done.completion_ids)
    metrics = {
        "num_turns": float(len(trajectory.transitions)),
        "env_token_fraction": (n - sum(done.env_mask)) / n if n else 0.0,
        "text_deltas": float(done.num_text_deltas),
    }
    if trajectory.transitions:
        metrics.update(numeric_info(trajectory.transitions[-1].info))
    return metrics


def _blocks(prompts: Sequence[Any], size: int, what: str) -> list[Any]:
    """Split prompts into blocks of ``size`` equal entries; return each block's prompt."""
    if len(prompts) % size:
        raise ValueError(
            f"got {len(prompts)} prompts, not a multiple of {size} ({what}); set "
            f"GRPOConfig(num_generations={size}) and a batch size that is a multiple of it"
        )
    firsts = []
    for start in range(0, len(prompts), size):
        block = prompts[start : start + size]
        if any(p != block[0] for p in block):
            raise ValueError(
                f"prompts {start}..{start + size - 1} are not {size} copies of one prompt "
                f"({what}); TRL 1.16 repeats each prompt num_generations times in a row, so "
                f"set GRPOConfig(num_generations={size})"
            )
        firsts.append(block[0])
    return firsts


def _prompt_text(prompt: Any) -> str:
    """The text of a TRL prompt: a string, or the last message of a conversational prompt."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and prompt and isinstance(prompt[-1], Mapping):
        return str(prompt[-1]["content"])
    raise TypeError(f"a prompt must be a str or a list of chat messages, got {prompt!r}")
