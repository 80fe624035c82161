"""TRL's ``rollout_func``: any registered family played for ``trl.GRPOTrainer``, token for token.

This is the token-level bridge to TRL (its text-level one, the
``environment_factory``, is :mod:`llm_envs.bridges.trl`): it returns token
ids, so it lives beside the trainer that owns tokens.

``GRPOTrainer(rollout_func=f)`` calls ``f(prompts, trainer)`` with the prompts of
one generation batch, each prompt already repeated ``num_generations`` times
(TRL 1.16), and expects one completion per prompt entry: ``prompt_ids``,
``completion_ids``, ``logprobs`` and, for multi-turn completions, ``env_mask``.
Every other key is handed to the reward functions as a keyword argument.

The rollout functions here:

1. map each block of equal prompts back to the episodes of one training
   group and each prompt entry to one agent's trajectory in them
   (:class:`FamilyRollout`: any registered family's own plan, one data-set
   row per training group; :class:`EnvRollout` is the base for others);
2. play every episode at once with :func:`baselines.rollouts.rollout`, sampling
   with the trainer's current weights
   (:func:`~baselines.grpo.sampling.trainer_policy`);
3. assemble each agent's turns into one completion with masked environment
   tokens (:mod:`baselines.grpo.assembly`);
4. return the environment's return (step rewards + final reward) as the extra
   field ``env_reward``, read by the reward function
   :func:`~baselines.grpo.reward.env_reward`, and per-completion metrics as
   ``env_metrics``, which it logs;
   with a ``credit`` scheme other than ``group_mean``, also each completion's
   advantage under it (:mod:`baselines.data.credit`, one TRL group = one
   training group) as ``credit_reward``, which the reward function hands TRL
   in place of the return;
5. with ``save_episodes > 0``, write the first episodes' transcripts
   (:class:`~llm_envs.records.EpisodeRecord`) of each training step to
   ``OUTPUT_DIR/episodes/step_NNNNN.jsonl`` for ``python -m baselines.report``.

:class:`FamilyRollout` is the only rollout of ``python -m baselines.grpo``:
every registered family goes through it. A rollout function never parses
environment text (rewards and metrics come from the environment's rewards
and infos) and never names a family.
"""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from baselines.data.credit import CREDIT_NAMES, CreditName, RoleBaselines, assign_credit
from baselines.data.episode_metrics import numeric_info
from baselines.grpo.assembly import AssembledCompletion, SampledTurn, assemble_completion
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
from llm_envs.family import EpisodePlan
from llm_envs.registration import make_family
from llm_envs.seeding import derive_seed

__all__ = ["EnvRollout", "FamilyRollout", "completion_metrics"]


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


class FamilyRollout(EnvRollout):
    """Any registered environment family for TRL: one data-set row per training group.

    The data set holds one prompt per group index: ``"<family> group <g>:
    <title>"``, a key and the group's problem in words (the plan's title: a
    debate's question, a problem's text or id; the key alone where the family
    gives none), for TRL's logs and tables; a model never sees it. TRL
    repeats it ``num_generations`` times; the block becomes the family's
    training plan for group ``g`` (:meth:`llm_envs.family.Family.training`,
    seed ``derive_seed(seed, g)``: a group plays the same episodes whenever it
    comes), and its entries are the plan's trajectories in order: each
    episode's grouped agents (every agent where the plan does not say). So
    TRL's group is the family's group, and ``num_generations`` is the number of
    trajectories in one: a three-agent debate's three debaters, the solver of
    each of a problem's episodes, a two-player game's two players.

    Build it with :meth:`for_env` (the family as TRL needs it) or from a family
    built with ``chat_observations=True``.

    Args:
        family: the environment family (:func:`llm_envs.registration.make_family`).
        num_groups: rows of the data set (group indices ``0 .. num_groups - 1``).
        **kwargs: :class:`EnvRollout` arguments; ``seed`` seeds the plans.

    Raises:
        ValueError: a family whose groups hold fewer than two trajectories
            (GRPO centres returns within a group) or differ in size, or whose
            first turns train on another context than they sample on
            (:func:`~llm_envs.bridges.trl.refuse_context_swap`); a ``credit``
            its groups cannot carry (a seat-wise scheme on groups with one
            trajectory per seat, ``agent_turn_groups`` on agents of several turns).

    Example:
        >>> rollout = FamilyRollout.for_env(
        ...     "expert_iteration", num_groups=3, options={"strategy": "iid", "num_generations": 2}
        ... )
        >>> rollout.num_generations, rollout.max_turns, rollout.dataset_prompts()[0][:33]
        (2, 1, 'expert_iteration group 0: What is')
    """

    def __init__(self, family: Any, *, num_groups: int = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if num_groups < 1:
            raise ValueError(f"num_groups must be >= 1, got {num_groups}")
        self.family = family
        self.num_groups = num_groups
        self.prefix = f"{family.name} group "
        self._key = re.compile(rf"{re.escape(self.prefix)}(\d+)(?::|$)")
        first = self._group_plan(0)
        self.num_generations = len(self._rows(first))
        if self.num_generations < 2:
            raise ValueError(
                f"a group of --env {family.name} holds {self.num_generations} trajectory; GRPO "
                "centres returns within a group and needs at least two"
            )
        self.max_turns = int(getattr(family, "max_agent_turns", 1))
        self.credit_env = family.name
        _refuse_credit_without_comparisons(self.credit, self._rows(first), self.max_turns, family)
        _refuse_first_turn_swaps(first)

    @classmethod
    def for_env(
        cls,
        env: str,
        env_kwargs: Mapping[str, Any] | None = None,
        *,
        task: str = "default",
        task_kwargs: Mapping[str, Any] | None = None,
        seed: int = 0,
        num_groups: int = 1000,
        options: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> FamilyRollout:
        """The rollout of the registered family ``env``, built as TRL needs it.

        Args:
            env: a registered family's name (``debate``, ``expert_iteration``...).
            env_kwargs: its environment's arguments.
            task: its task (:attr:`~llm_envs.family.Family.tasks`).
            task_kwargs: the task's settings.
            seed: the family's problem order and the plans' seeds.
            num_groups: rows of the data set.
            options: run settings for the family (``num_generations``,
                ``strategy``...): it takes those in its ``run_options`` and
                ignores the rest. ``chat_observations`` is always True.
            **kwargs: :class:`EnvRollout` arguments (``policy``,
                ``max_tokens_per_turn``, ``save_episodes``...).
        """
        family = make_family(
            env,
            dict(env_kwargs or {}),
            task=task,
            seed=seed,
            task_kwargs=dict(task_kwargs or {}),
            **{**dict(options or {}), "chat_observations": True},
        )
        return cls(family, num_groups=num_groups, seed=seed, **kwargs)

    def _group_plan(self, group: int) -> EpisodePlan:
        plan: EpisodePlan = self.family.training([group], derive_seed(self.seed, group))
        return plan

    @staticmethod
    def _rows(plan: Any) -> list[tuple[int, str]]:
        rows: list[tuple[int, str]] = []
        for index, env in enumerate(plan.envs):
            agents = plan.grouped_agents or getattr(env, "possible_agents", ())
            rows.extend((index, agent) for agent in agents)
        return rows

    def dataset_prompts(self) -> list[str]:
        """One row per group index: its key and its title (see the class)."""
        rows = []
        for g in range(self.num_groups):
            titles = self._group_plan(g).titles
            rows.append(f"{self.prefix}{g}: {titles[0]}" if titles else f"{self.prefix}{g}")
        return rows

    def _plan(self, prompts: Sequence[Any]) -> _Plan:
        size = self.num_generations
        keys = _blocks(prompts, size, f"one group of --env {self.family.name} per prompt")
        envs: list[Any] = []
        options: list[dict[str, Any]] = []
        seeds: list[int] = []
        rows: list[tuple[int, str]] = []
        for key in keys:
            text = _prompt_text(key)
            match = self._key.match(text)
            if match is None:
                raise KeyError(
                    f"prompt {text[:80]!r} is not a group of this rollout; build the data set "
                    "with .dataset()"
                )
            group = int(match.group(1))
            plan = self._group_plan(group)
            block = self._rows(plan)
            if len(block) != size:
                raise ValueError(
                    f"group {group} of --env {self.family.name} holds {len(block)} trajectories, "
                    f"group 0 holds {size}: TRL needs groups of one size"
                )
            rows.extend((len(envs) + index, agent) for index, agent in block)
            envs.extend(plan.envs)
            options.extend(plan.options)
            seeds.extend(plan.seeds)
        return _Plan(envs, options, rows, seeds)


def _refuse_credit_without_comparisons(
    credit: str, rows: Sequence[tuple[int, str]], max_turns: int, family: Any
) -> None:
    """Refuse, before a model is loaded, a credit scheme this family's groups give nothing to."""
    if credit not in ("per_agent_norm", "agent_turn_groups"):
        return
    seats = Counter(agent for _, agent in rows)
    if max(seats.values()) < 2:
        raise ValueError(
            f"credit={credit!r} compares a seat's trajectories within a group, but a group of "
            f"--env {family.name} holds one trajectory per seat ({sorted(seats)}), so every "
            "advantage would be 0; use credit='role_baseline' (a running baseline per seat) "
            "or 'group_mean'"
        )
    if credit == "agent_turn_groups" and max_turns > 1:
        raise ValueError(
            f"credit='agent_turn_groups' gives each turn its own advantage, but an agent of "
            f"--env {family.name} takes up to {max_turns} turns in one TRL completion, which "
            "gets one advantage; use credit='per_agent_norm', or the importance-sampling "
            "trainer (baselines.is_trainer), which trains each turn on its own advantage"
        )


def _refuse_first_turn_swaps(plan: EpisodePlan) -> None:
    """Reset a plan's episodes and refuse a grouped agent whose first turn swaps its context.

    A construction-time check (before a model is loaded); the rollout checks
    every completion again.
    """
    for env, seed, options in zip(plan.envs, plan.seeds, plan.options, strict=True):
        reset = env.reset(seed=seed, options=options)
        infos = reset[1] if isinstance(reset, tuple) else env.infos  # parallel or AEC
        for agent in plan.grouped_agents or infos:
            refuse_context_swap(agent, infos.get(agent, {}))
