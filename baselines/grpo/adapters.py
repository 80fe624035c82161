"""Rollout functions for ``trl.GRPOTrainer`` that play :mod:`llm_envs` environments.

``GRPOTrainer(rollout_func=f)`` calls ``f(prompts, trainer)`` with the prompts of
one generation batch, each prompt already repeated ``num_generations`` times
(TRL 1.16), and expects one completion per prompt entry: ``prompt_ids``,
``completion_ids``, ``logprobs`` and, for multi-turn completions, ``env_mask``.
Every other key is handed to the reward functions as a keyword argument.

The rollout functions here:

1. map each prompt back to an environment episode (:class:`DebateRollout`:
   one debate per block of ``num_agents`` equal prompts, generation ``g`` is
   ``agent_g``; :class:`SingleAgentRollout`: one episode per prompt entry);
2. play every episode at once with :func:`baselines.rollouts.rollout`, sampling
   with the trainer's current weights (:func:`trainer_policy`);
3. assemble each agent's turns into one completion with masked environment
   tokens (:mod:`baselines.grpo.assembly`);
4. return the environment's return (step rewards + final reward) as the extra
   field ``env_reward``, read by the reward function :func:`env_reward`, and
   per-completion metrics as ``env_metrics``, which :func:`env_reward` logs;
5. with ``save_episodes > 0``, write the first episodes' transcripts
   (:class:`~llm_envs.records.EpisodeRecord`) of each training step to
   ``OUTPUT_DIR/episodes/step_NNNNN.jsonl`` for ``python -m baselines.report``.

A rollout function never parses environment text: rewards and metrics come
from the environment's rewards and infos.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from baselines.data.episode_metrics import numeric_info
from baselines.grpo.assembly import AssembledCompletion, SampledTurn, assemble_completion
from baselines.grpo.reward import env_reward
from baselines.grpo.sampling import RecordingPolicy, SeenTurn, trainer_policy
from baselines.policies.base import (
    ChatRenderer,
    Policy,
    SamplingParams,
)
from baselines.rollouts import rollout
from baselines.run_directory import RunDirectory
from baselines.types import Tokens, Trajectory

__all__ = [
    "DebateRollout",
    "EnvRollout",
    "SingleAgentRollout",
    "code_collab_rollout",
    "env_reward",
    "expert_iteration_rollout",
    "trainer_policy",
]

GRPO_STRATEGIES = ("iid", "two_turn_feedback")
"""Expert-iteration strategies whose completions TRL trains correctly (no context swap)."""


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

    A subclass says which episodes to play for a list of prompts (``_plan``)
    and which prompts make the training data set (:meth:`dataset`).

    Args:
        max_tokens_per_turn: most sampled tokens per turn.
        policy: a fixed sampler (tests, scripted opponents, your own engine);
            ``None`` samples with the trainer's current weights (:func:`trainer_policy`).
        seed: base seed of the environments' resets (episode ``i`` uses ``seed + i``).
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

    Attributes:
        episodes_played: episodes played so far (the next reset seed is ``seed + episodes_played``).
        last_output: what the last call returned to TRL (``None`` before the
            first), to inspect a completion and its ``env_mask``.
    """

    num_generations: int

    def __init__(
        self,
        *,
        max_tokens_per_turn: int = 256,
        policy: Policy | None = None,
        seed: int = 0,
        close_final_turn: bool = True,
        save_episodes: int = 0,
    ) -> None:
        if max_tokens_per_turn < 1:
            raise ValueError(f"max_tokens_per_turn must be >= 1, got {max_tokens_per_turn}")
        if not isinstance(save_episodes, int) or save_episodes < 0:
            raise ValueError(f"save_episodes must be an int >= 0, got {save_episodes!r}")
        self.max_tokens_per_turn = max_tokens_per_turn
        self.policy = policy
        self.seed = seed
        self.close_final_turn = close_final_turn
        self.save_episodes = save_episodes
        self.episodes_played = 0
        self.last_output: dict[str, list[Any]] | None = None
        self._pool: list[Any] = []
        self._saved_step: int | None = None

    # -- to implement
    def dataset_prompts(self) -> list[str]:
        """The prompts of the training data set, one per question or problem."""
        raise NotImplementedError

    def _plan(self, prompts: Sequence[Any]) -> _Plan:
        raise NotImplementedError

    def _make_env(self) -> Any:
        raise NotImplementedError

    # -- shared
    def dataset(self) -> Any:
        """The training data set: a ``datasets.Dataset`` with a ``prompt`` column."""
        from datasets import Dataset

        return Dataset.from_dict({"prompt": self.dataset_prompts()})

    def _envs(self, n: int) -> list[Any]:
        # Environments are reset by every rollout, so they are reused across calls.
        while len(self._pool) < n:
            self._pool.append(self._make_env())
        return self._pool[:n]

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
        for prompt, (index, agent) in zip(prompts, plan.rows, strict=True):
            result = results[index]
            trajectory = result.trajectories[agent]
            if trajectory.transitions:
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
            out["env_metrics"].append(_metrics(trajectory, done))
        self.last_output = out
        return out

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


def _metrics(trajectory: Trajectory, done: AssembledCompletion) -> dict[str, float]:
    """Per-completion metrics: the last turn's numeric outcome infos, turns, env tokens."""
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


# ------------------------------------------------------------------- debate


class DebateRollout(EnvRollout):
    """Debate (the debate recipe) for TRL: one debate per question, one generation per agent.

    TRL repeats each question ``num_generations`` times; every block of
    ``num_agents`` copies becomes one debate in ``observation_mode="chat"``,
    and generation ``g`` of the block is ``agent_g``'s whole trajectory: its
    first observation is the prompt, its answers are trained tokens, and what
    the other agents said in between is masked context. The reward is the
    agent's return: step rewards (a parse-error penalty) plus the final
    pairwise reward of ``reward`` (leave-one-out win rate by default). The
    group is the debate, so TRL's group baseline is the debate's mean reward
    (the debate recipe's baseline) when ``scale_rewards="none"``.

    Args:
        questions: the questions to debate (``str`` or
            :class:`~llm_envs.debate.DebateQuestion`); the data set holds their texts.
            A prompt that is none of them is debated as a new question.
        num_agents: debaters, and TRL's ``num_generations``.
        max_rounds: see :class:`~llm_envs.debate.DebateConfig`.
        reward: ``"win_rate"`` or ``"win_minus_loss"``.
        on_parse_error: see :class:`~llm_envs.debate.DebateConfig`.
        max_chars_per_field: see :class:`~llm_envs.debate.DebateConfig`.
        **kwargs: :class:`EnvRollout` arguments.
    """

    def __init__(
        self,
        questions: Sequence[Any] | None = None,
        *,
        num_agents: int = 3,
        max_rounds: int = 3,
        reward: str = "win_rate",
        on_parse_error: str = "penalize",
        max_chars_per_field: int = 1000,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        from llm_envs.debate import REWARD_WRAPPERS, DebateConfig

        if reward not in REWARD_WRAPPERS:
            raise ValueError(f"reward must be one of {sorted(REWARD_WRAPPERS)}, got {reward!r}")
        # Validated now, not at the first rollout: a broken config fails before training.
        self.config = DebateConfig(
            num_agents=num_agents,
            max_rounds=max_rounds,
            max_chars_per_field=max_chars_per_field,
            questions=_questions(questions),
            on_parse_error=on_parse_error,  # type: ignore[arg-type]  # validated by DebateConfig
            observation_mode="chat",
        )
        self.reward = reward
        self.num_generations = num_agents
        self._questions = {q.text: q for q in self.config.questions}

    def dataset_prompts(self) -> list[str]:
        """One prompt per question: its text."""
        return list(self._questions)

    def _make_env(self) -> Any:
        from llm_envs.debate import env

        cfg = self.config
        return env(
            reward=self.reward,  # checked in __init__
            num_agents=cfg.num_agents,
            max_rounds=cfg.max_rounds,
            max_chars_per_field=cfg.max_chars_per_field,
            questions=cfg.questions,
            on_parse_error=cfg.on_parse_error,
            observation_mode="chat",
        )

    def _plan(self, prompts: Sequence[Any]) -> _Plan:
        from llm_envs.debate import DebateQuestion

        n = self.config.num_agents
        texts = _blocks(prompts, n, f"one debate of num_agents={n} agents per question")
        options = []
        for text in texts:
            key = _prompt_text(text)
            options.append({"question": self._questions.get(key) or DebateQuestion(key)})
        rows = [(b, f"agent_{g}") for b in range(len(texts)) for g in range(n)]
        return _Plan(self._envs(len(texts)), options, rows)


def _questions(questions: Sequence[Any] | None) -> tuple[Any, ...]:
    """The debate questions: the defaults, or the given sequence (never one str split up)."""
    if questions is None:
        from llm_envs.debate import DEFAULT_QUESTIONS

        return tuple(DEFAULT_QUESTIONS)
    if isinstance(questions, str):
        raise TypeError(
            f"questions must be a sequence of questions, got one str {questions[:60]!r}; "
            "pass questions=[...]"
        )
    return tuple(questions)


def _prompt_text(prompt: Any) -> str:
    """The text of a TRL prompt: a string, or the last message of a conversational prompt."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and prompt and isinstance(prompt[-1], Mapping):
        return str(prompt[-1]["content"])
    raise TypeError(f"a prompt must be a str or a list of chat messages, got {prompt!r}")


# -------------------------------------------------------------- single agent


class SingleAgentRollout(EnvRollout):
    """Any environment in which one agent's trajectory is one generation.

    Each prompt entry is one episode: TRL's ``num_generations`` copies of a
    prompt are that many independent episodes of the same item, and TRL's group
    baseline is their mean return. Used for expert iteration
    (:func:`expert_iteration_rollout`) and single-agent code collaboration
    (:func:`code_collab_rollout`).

    Args:
        make_env: builds one environment (reused across rollouts: every episode resets it).
        items: prompt text -> the reset options of its episode (e.g. ``{"problem": p}``).
        agent: the agent whose trajectory is trained.
        num_generations: episodes per item (TRL's ``num_generations``), at least 2.
        **kwargs: :class:`EnvRollout` arguments.
    """

    def __init__(
        self,
        make_env: Callable[[], Any],
        items: Mapping[str, Mapping[str, Any]],
        *,
        agent: str,
        num_generations: int = 4,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if num_generations < 2:
            raise ValueError(
                f"num_generations must be >= 2 (GRPO centres returns within a group), "
                f"got {num_generations}"
            )
        if not items:
            raise ValueError("items must not be empty: the data set needs at least one prompt")
        self.make_env = make_env
        self.items = dict(items)
        self.agent = agent
        self.num_generations = num_generations

    def dataset_prompts(self) -> list[str]:
        """One prompt per item."""
        return list(self.items)

    def _make_env(self) -> Any:
        return self.make_env()

    def _plan(self, prompts: Sequence[Any]) -> _Plan:
        options = []
        for prompt in prompts:
            key = _prompt_text(prompt)
            if key not in self.items:
                raise KeyError(
                    f"prompt {key[:80]!r} is not one of this rollout's items; build the data "
                    "set with .dataset() (the prompt text is the key of its episode)"
                )
            options.append(dict(self.items[key]))
        rows = [(i, self.agent) for i in range(len(prompts))]
        return _Plan(self._envs(len(prompts)), options, rows)


def expert_iteration_rollout(
    strategy: str = "iid",
    problems: Sequence[Any] | None = None,
    *,
    num_generations: int = 4,
    env_kwargs: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> SingleAgentRollout:
    """Expert iteration for TRL: ``num_generations`` episodes per problem.

    ``"iid"``: one attempt per completion. ``"two_turn_feedback"``: attempt 1,
    the feedback and attempt 2 in one completion, the feedback masked; attempt
    1 is trained only when the env's ``attempt1_loss_weight`` is above 0 (its
    default, 0, trains attempt 2 alone). TRL trains attempt 2 on the context it
    was sampled on, feedback included: it has no place for the env's
    ``training_messages`` (the context swap). The strategies that only make
    sense with the swap (``prompt_augmentation``, ``answer_hint``) are refused;
    train them with the importance-sampling trainer.

    Args:
        strategy: ``"iid"`` or ``"two_turn_feedback"``.
        problems: math or code problems (default: the env's arithmetic problems).
        num_generations: episodes per problem.
        env_kwargs: other :class:`~llm_envs.expert_iteration.ExpertIterationEnv` arguments.
        **kwargs: :class:`EnvRollout` arguments.
    """
    from llm_envs.expert_iteration import ExpertIterationConfig
    from llm_envs.expert_iteration import env as make_env
    from llm_envs.expert_iteration.prompts import problem_text

    if strategy not in GRPO_STRATEGIES:
        raise ValueError(
            f"strategy {strategy!r} trains on a context other than the one it samples on "
            f"(the context swap), which TRL's GRPOTrainer cannot represent; use one of "
            f"{GRPO_STRATEGIES} here, or train {strategy!r} with the importance-sampling "
            "trainer (baselines.is_trainer.trainer)"
        )
    env_kwargs = dict(env_kwargs or {})
    for key in ("strategy", "problems"):
        if key in env_kwargs:
            raise ValueError(f"pass {key} as its own argument, not in env_kwargs")
    config_kwargs = {**env_kwargs, "strategy": strategy}
    if problems is not None:
        config_kwargs["problems"] = tuple(problems)
    config = ExpertIterationConfig(**config_kwargs)
    items: dict[str, dict[str, Any]] = {}
    for problem in config.problems:
        key = problem_text(problem)
        if key in items and items[key]["problem"].answer != getattr(problem, "answer", None):
            raise ValueError(
                f"problems {items[key]['problem'].task_id!r} and {problem.task_id!r} read the "
                "same but differ: a prompt must identify its problem"
            )
        items.setdefault(key, {"problem": problem})
    return SingleAgentRollout(
        lambda: make_env(strategy=strategy, **env_kwargs),
        items,
        agent="solver",
        num_generations=num_generations,
        **kwargs,
    )


def code_collab_rollout(
    problems: Sequence[Any] | None = None,
    *,
    num_generations: int = 4,
    env_kwargs: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> SingleAgentRollout:
    """Code collaboration, single-agent setting, for TRL: the ``main`` agent alone.

    Each generation is one episode of ``num_turns`` turns: the main agent's
    programs are trained tokens, the test feedback between them is masked
    context, and the return is the sum of its turns' team rewards. The two-agent
    setting needs one policy per agent: that is :mod:`baselines.magrpo.trainer`.

    Args:
        problems: code problems (:class:`~llm_envs.tasks.CodeProblem`), or None
            for the environment's default data set.
        num_generations: episodes per problem.
        env_kwargs: other :class:`~llm_envs.code_collab.CodeCollabConfig` arguments
            (``num_agents`` is 1).
        **kwargs: :class:`EnvRollout` arguments.
    """
    from llm_envs.code_collab import MAIN, CodeCollabConfig, first_prompt, parallel_env

    env_kwargs = dict(env_kwargs or {})
    if env_kwargs.pop("num_agents", 1) != 1:
        raise ValueError(
            "TRL's GRPOTrainer trains one policy: code collaboration runs with num_agents=1 "
            "here; train the helper and main agents together with baselines.magrpo.trainer"
        )
    if "problems" in env_kwargs:
        raise ValueError("pass problems as their own argument, not in env_kwargs")
    if problems is not None:
        env_kwargs["problems"] = tuple(problems)
    settings = {**env_kwargs, "num_agents": 1}
    probe = parallel_env(**settings)  # validates the settings and loads a named data set
    config: CodeCollabConfig = probe.config
    items: dict[str, dict[str, Any]] = {}
    for problem in config.problems:
        items.setdefault(first_prompt(problem, MAIN, 1), {"problem": problem})
    settings["problems"] = config.problems
    return SingleAgentRollout(
        lambda: parallel_env(**settings),
        items,
        agent=MAIN,
        num_generations=num_generations,
        **kwargs,
    )
