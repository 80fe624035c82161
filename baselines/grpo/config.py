"""The configuration of the TRL GRPO runner (:mod:`baselines.grpo.run`).

One frozen pydantic dataclass, every field documented once, by the docstring
under it in the class that introduces it (the shared ones in
:mod:`baselines.config`): the command line (:mod:`baselines.cli`) and the docs
table (``docs/trl_grpo.md``) are built from that text. Values are checked at
construction (types and bounds by pydantic, see :mod:`baselines.config`; the
rules between fields here).
"""

from __future__ import annotations

import urllib.parse
from dataclasses import field
from typing import Annotated, Any, Literal

from annotated_types import Ge
from pydantic.dataclasses import dataclass

from baselines.config import (
    VALIDATION,
    DeviceName,
    EnvName,
    NonNegativeFloat,
    PositiveInt,
    RunConfig,
    TaskName,
    UnitFraction,
    check_nccl_transfer,
)
from baselines.data.credit import CreditName
from baselines.samplers.server_pool import Routing, split_urls
from baselines.samplers.server_weights import WeightTransfer
from llm_envs.registration import family_class

__all__ = [
    "CreditName",
    "DeviceName",
    "EnvName",
    "GRPORunConfig",
    "LossType",
    "Switch",
    "TaskName",
]

LossType = Literal["dapo", "grpo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo"]
"""TRL 1.16's ``loss_type`` values."""
Switch = Literal["auto", "on", "off"]
"""Whether to use something: ``auto`` decides from what is installed and where."""


def tasks_of(env: str) -> tuple[str, ...]:
    """The ``task`` values of ``env``: its family's (ValueError naming the registered ones)."""
    return family_class(env).tasks


@dataclass(frozen=True, kw_only=True, config=VALIDATION)
class GRPORunConfig(RunConfig):
    """Train a language model in an llm-envs environment with TRL's GRPOTrainer."""

    # Shared fields (documented in baselines.config) with this runner's defaults.
    max_tokens: PositiveInt = 96
    output_dir: str = "runs/grpo"
    env: EnvName = "debate"
    """a registered environment family, yours included (docs/your_own_environment.md). Its
    own training plan makes the groups, and each generation of a group is one agent's whole
    episode: a debate's generation ``g`` is agent ``g`` (its transcript is one episode of all its
    agents); expert iteration's, the solver of one episode; code collaboration's, each agent of
    each episode (the main agent alone with ``{"num_agents": 1}``).
    """
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """the environment's arguments as a JSON object: for ``debate`` those of
    :class:`llm_envs.debate.DebateConfig` (e.g. ``{"num_agents": 3, "max_rounds": 2}``; debates run
    in ``observation_mode="chat"``, each agent's episode one growing chat); for ``expert_iteration``
    those of :class:`llm_envs.expert_iteration.ExpertIterationConfig` (e.g.
    ``{"attempt1_loss_weight": 0.5}``); for ``code_collab`` those of
    :class:`llm_envs.code_collab.CodeCollabConfig` (e.g. ``{"num_agents": 1, "num_turns": 2}``).
    Problems come from ``task``, not from here.
    """
    task: TaskName = "default"
    """question or problem source, one of the family's tasks: ``default`` (debate: the built-in
    questions; expert iteration: arithmetic; code collaboration: CoopHumanEval), ``arithmetic``,
    ``gsm8k``, ``humaneval``, ``mbpp`` or ``coophumaneval`` (see docs/tasks.md for the data).
    """
    task_kwargs: dict[str, Any] = field(default_factory=dict)
    """settings of the ``arithmetic`` task as a JSON object (see
    :class:`llm_envs.tasks.ArithmeticTask`), e.g. ``{"max_digits": 1}``.
    """
    strategy: Literal["iid", "two_turn_feedback"] = "iid"
    """for a family with search strategies (expert iteration): the strategy of every episode,
    ``iid`` or ``two_turn_feedback`` (the strategies whose first turn trains on the context it
    samples on).
    """
    num_generations: Annotated[int, Ge(2)] = 4  # GRPO centres returns within a group
    """episodes of one problem per group, for the families that take it (``expert_iteration``,
    ``code_collab``); a debate's group is its ``num_agents`` debaters. TRL's ``num_generations`` is
    the number of trajectories in a group.
    """
    items_per_step: PositiveInt = 1
    """questions or problems per optimizer step."""
    max_steps: PositiveInt = 4
    """optimizer steps."""
    loss_type: LossType = "dapo"
    """TRL's ``loss_type``."""
    scale_rewards: Literal["none", "group", "batch"] = "none"
    """TRL's ``scale_rewards``: ``none`` is the mean baseline of the debate recipe, the
    expert-iteration plan and the MAGRPO paper (no standard-deviation normalization), ``group`` or
    ``batch`` divide by the group's or batch's standard deviation.
    """
    credit: CreditName = "group_mean"
    """multi-agent credit assignment (docs/credit.md): ``group_mean`` (TRL's own group centring of
    the returns), ``role_baseline`` (each seat's return minus its running baseline in the
    environment), ``per_agent_norm`` (each seat normalized by its own mean and std in the group) or
    ``agent_turn_groups`` (each seat centred on its own mean in the group; for agents of one turn).
    The rollout hands TRL these advantages as the rewards, and TRL's centring then changes nothing
    (``role_baseline``: as far as the group's baselines add up to its returns, exactly in a
    two-player zero-sum game). All but ``group_mean`` need ``scale_rewards='none'``.
    """
    beta: NonNegativeFloat = 0.0
    """KL coefficient against the initial model; 0 loads no reference model."""
    vllm: Switch = "auto"
    """sample through TRL's colocated vLLM engine: ``auto`` (on a GPU when vLLM is installed, unless
    ``sampler_url`` is set), ``on`` or ``off``.
    """
    vllm_gpu_memory_utilization: UnitFraction = 0.3
    """the GPU memory share of TRL's vLLM engine."""
    vllm_max_model_length: PositiveInt = 8192
    """the longest prompt plus multi-turn completion the vLLM engine must hold."""
    sampler_url: str | None = None
    """sample the rollouts from OpenAI-compatible ``vllm serve`` servers instead of the trainer's
    own model or TRL's vLLM engine: the base URL of one, e.g. ``http://10.0.0.2:8000/v1``, or
    several separated by commas (each process spreads its requests over its share of them, as the
    importance-sampling trainer does: with ``P`` processes, process ``i`` gets URLs ``i, i + P,
    ...``). None samples locally.
    """
    sampler_routing: Routing = "round_robin"
    """with several servers for one process: ``round_robin`` (request after request, server after
    server) or ``least_loaded`` (the server with the fewest of this process's requests in flight).
    """
    sampler_weight_transfer: WeightTransfer = "folder"
    """with ``sampler_url``: how the trained weights reach the servers before the first rollout
    after each optimizer step (LoRA merged, shards gathered): ``folder`` (written once into
    ``sampler_weights_dir`` and reloaded by every server; without a folder the servers keep their
    weights) or ``nccl`` (vLLM's weight-transfer API, GPU to GPU; CUDA only, servers started with
    ``--weight-transfer-config '{"backend": "nccl"}'``).
    """
    sampler_weights_dir: str | None = None
    """with ``sampler_url``: a folder the trainer and the servers all see, for the ``folder``
    transfer; the servers must run with ``VLLM_SERVER_DEV_MODE=1``. None leaves the servers' weights
    alone (off-policy sampling: the servers keep the initial model).
    """
    save_model: bool = True
    """save the trained model and tokenizer in ``output_dir/final_model`` at the end. TRL saves no
    checkpoints here: a run started again starts afresh, its ``metrics.jsonl`` and
    ``episodes/step_*.jsonl`` too.
    """

    def _check_rules(self) -> None:
        if self.task not in tasks_of(self.env):
            raise ValueError(
                f"task for env={self.env!r} must be one of {tasks_of(self.env)}, got {self.task!r}"
            )
        if self.task_kwargs and self.task != "arithmetic":
            raise ValueError(f"task_kwargs are for task='arithmetic', got task={self.task!r}")
        if self.credit != "group_mean" and self.scale_rewards != "none":
            raise ValueError(
                f"credit={self.credit!r} hands TRL advantages as rewards, and "
                f"scale_rewards={self.scale_rewards!r} would divide them by a std again: set "
                "scale_rewards='none' (per_agent_norm divides by each seat's std itself)"
            )
        owned = sorted({"questions", "problems"} & set(self.env_kwargs))
        if owned:
            raise ValueError(
                f"env_kwargs must not set {owned}: the questions or problems come from "
                f"task (and task_kwargs); got env_kwargs={self.env_kwargs!r}"
            )
        self._check_servers()

    def _check_servers(self) -> None:
        if self.sampler_url is None:
            for name, value, unset in (
                ("sampler_weights_dir", self.sampler_weights_dir, None),
                ("sampler_weight_transfer", self.sampler_weight_transfer, "folder"),
            ):
                if value != unset:
                    raise ValueError(
                        f"{name}={value!r} is for sampling from servers: set sampler_url too "
                        "(e.g. http://127.0.0.1:8000/v1), or drop it"
                    )
            return
        try:
            urls = split_urls(self.sampler_url)
        except ValueError as exc:
            raise ValueError(f"sampler_url: {exc}") from None
        for url in urls:
            parts = urllib.parse.urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(
                    f"sampler_url must be http(s) base URLs separated by commas, e.g. "
                    f"http://127.0.0.1:8000/v1, got {url!r} in {self.sampler_url!r}"
                )
        if self.vllm == "on":
            raise ValueError(
                "vllm='on' starts TRL's own vLLM engine, but sampler_url samples from servers "
                f"({self.sampler_url!r}); drop sampler_url, or set vllm='off' (or 'auto')"
            )
        if self.sampler_weight_transfer == "nccl":
            check_nccl_transfer(self.sampler_weights_dir, self.device)
