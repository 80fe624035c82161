"""The configuration of the importance-sampling trainer (:mod:`baselines.is_trainer.trainer`).

:class:`ISTrainerConfig` holds the loop's settings and four sub-configs, one per
helper, each handed to the helper that reads it: :class:`SamplerSettings`
(the learner's sampler), :class:`EvalSettings` (the evaluation),
:class:`WarmStartSettings` and :class:`LeagueSettings`. Their settings keep
flat names, the flags and ``config.json`` keys (``--league-group-size``);
documentation, flags, docs table (``docs/trainer.md``) and checks work as
:mod:`baselines.config` says. Importing it does not import torch.
"""

from __future__ import annotations

from dataclasses import field, fields
from typing import Annotated, Any, ClassVar, Literal

from annotated_types import Interval
from pydantic.dataclasses import dataclass

from baselines.config import (
    VALIDATION,
    DeviceName,
    EnvName,
    LossName,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Precision,
    Probability,
    TaskName,
    TrainerConfig,
    UnitFraction,
    check_nccl_transfer,
)
from baselines.data.credit import CreditName
from baselines.league.matchmaking import Matchmaking, PFSPWeighting
from baselines.league.pool import parse_anchor
from baselines.precision import EvalPrecision
from baselines.samplers.server_pool import Routing
from baselines.samplers.server_weights import WeightTransfer
from llm_envs.capabilities import ScriptedPlayers, Teacher, require
from llm_envs.registration import family_class, family_names

__all__ = [
    "CreditName",
    "DeviceName",
    "EnvName",
    "ISTrainerConfig",
    "LossName",
    "LossNormalization",
    "Opponents",
    "Packing",
    "Precision",
    "SamplerName",
    "TaskName",
]

SamplerName = Literal["auto", "vllm", "transformers", "openai"]
"""Which sampler backend samples the training episodes."""
Packing = Literal["auto", "packed", "padded"]
"""How Datums are laid out for the forward pass."""
LossNormalization = Literal["action_tokens", "sum"]
"""What the summed loss of an optimizer step is divided by."""
AdamBeta = Annotated[float, Interval(ge=0, lt=1)]
"""One of AdamW's betas: in ``[0, 1)``."""
Opponents = Literal["mirror", "league"]
"""Who plays the seats the learner does not: itself (self-play), or a league's pool."""
RatingDecay = Annotated[float, Interval(gt=0, le=1)]
"""A league's rating decay per iteration: in ``(0, 1]``."""


TEACHER_FIELDS = (
    ("warm_start_broken_rate", "broken_rate", "a teacher that breaks a seat's answers"),
    ("warm_start_mistake_rate", "mistake_rate", "a teacher that answers wrong at a rate"),
)
"""Warm-start settings a family's teacher may take: (flag name, ``teacher_options`` name and
:class:`WarmStartSettings` field, what)."""


@dataclass(frozen=True, kw_only=True, config=VALIDATION)
class SamplerSettings:
    """The sampler of the training episodes: its backend, its servers, its vLLM engine's memory."""

    FLAG_PREFIX: ClassVar[str] = ""

    sampler: SamplerName = "auto"
    """``auto`` (vLLM when importable, else transformers), ``vllm`` (an in-process engine refreshed
    with the new weights after every optimizer step), ``transformers`` (``generate`` on the trained
    model itself: always current), or ``openai`` (remote OpenAI-compatible vLLM servers at
    ``sampler_url``; see docs/trainer.md for refreshing them).
    """
    sampler_url: str | None = None
    """base URL of the remote sampler, e.g. ``http://10.0.0.2:8000/v1``, or several separated by
    commas. Each process spreads its requests over its share of them (see ``sampler_routing``): with
    ``P`` processes, process ``i`` gets URLs ``i, i + P, ...``; with fewer URLs than processes, URL
    ``i mod count``.
    """
    sampler_routing: Routing = "round_robin"
    """with ``sampler=openai`` and several servers for one process: ``round_robin`` (request after
    request, server after server) or ``least_loaded`` (the server with the fewest of this process's
    requests in flight).
    """
    sampler_weight_transfer: WeightTransfer = "folder"
    """with ``sampler=openai``: how the new weights reach the servers after every optimizer step:
    ``folder`` (written once into ``sampler_weights_dir`` and reloaded by every server; without a
    folder the servers keep their weights) or ``nccl`` (vLLM's weight-transfer API, GPU to GPU; CUDA
    only, servers started with ``--weight-transfer-config '{"backend": "nccl"}'``).
    """
    sampler_weights_dir: str | None = None
    """with ``sampler=openai``: a folder the trainer and the servers all see; after every optimizer
    step the trainer writes the weights there and asks the servers (started with
    ``VLLM_SERVER_DEV_MODE=1``) to reload them. None leaves the servers' weights alone (off-policy
    sampling; the KL metrics show by how much).
    """
    vllm_gpu_memory_utilization: UnitFraction = 0.3
    """with vLLM on GPU: the fraction of GPU memory each engine may take (the trainer needs the
    rest).
    """
    vllm_kv_cache_gib: PositiveFloat = 0.5
    """with vLLM on CPU: the KV-cache size of each engine."""

    def __post_init__(self) -> None:
        if self.sampler == "openai" and not self.sampler_url:
            raise ValueError("sampler='openai' needs sampler_url (the server's /v1 base URL)")
        if self.sampler_weights_dir is not None and self.sampler != "openai":
            raise ValueError("sampler_weights_dir is for sampler='openai' only")
        if self.sampler_weight_transfer == "nccl" and self.sampler != "openai":
            raise ValueError(
                "sampler_weight_transfer='nccl' sends weights to vLLM servers, for "
                f"sampler='openai' only, got sampler={self.sampler!r}"
            )


@dataclass(frozen=True, kw_only=True, config=VALIDATION)
class EvalSettings:
    """The evaluation of the trained policy (every ``eval_every`` iterations)."""

    FLAG_PREFIX: ClassVar[str] = "eval_"

    groups: NonNegativeInt = 2
    """questions (debate: each played ``num_agents`` times, the trained model in each role once, and
    answered ``num_agents`` times alone for the majority vote beside it) or problems (expert
    iteration, ``iid`` strategy) per evaluation.
    """
    meter_samples: NonNegativeInt = 16
    """texts sampled from the trained policy at each point the family's meter measures, at every
    evaluation (Kuhn Poker: each of the 12 information sets, ``eval/exploitability`` with its
    interval; see the family's page under ``docs/envs``); 0: no meter. Families without a meter
    ignore it.
    """
    opponent: str | None = None
    """debate evaluation only: the fixed policy playing the other roles: None for the initial model,
    a Hugging Face id or folder, or the URL of an OpenAI-compatible server.
    """
    opponent_model: str | None = None
    """the model name to request from an ``eval_opponent`` server; None uses ``model``."""
    precision: EvalPrecision = "auto"
    """with vLLM: the precision of the engines that play evaluation episodes. ``sampler``: the
    training sampler's (fp32 on a CPU, so its logprobs are the trainer's); ``bf16``; ``auto``: bf16
    on a CPU with bf16 arithmetic, where a call takes about half the time (evaluation needs samples,
    not logprobs), else the sampler's. In a precision other than the sampler's, the trained
    policy's evaluation turns run on an engine of their own, given the trained weights before each
    evaluation.
    """
    scripted: bool = False
    """also evaluate against each set of the family's scripted players (``eval/scripted:SET/...``,
    e.g. the random and minimax players of TicTacToe), as fixed opponents in the other seats.
    """


@dataclass(frozen=True, kw_only=True, config=VALIDATION)
class WarmStartSettings:
    """The warm start: imitation of a family's scripted teacher before the first iteration."""

    steps: NonNegativeInt = 0
    """before the first iteration, this many optimizer steps of supervised fine-tuning on episodes
    played by a scripted teacher (debate: :class:`llm_envs.debate.agents.JudgingDebater`, which
    needs questions with reference answers, e.g. ``--task arithmetic``), so a model that never
    writes the output contract has something to improve on; 0 skips it (see
    :mod:`baselines.training.warm_start`).
    """
    groups: PositiveInt = 8
    """teacher episodes (debates) played for the warm start."""
    datums: PositiveInt = 8
    """teacher Datums (one agent's answers in one debate) per warm-start step."""
    learning_rate: PositiveFloat = 1e-4
    """the learning rate of the warm start."""
    broken_rate: Probability = 0.0
    """debate only: the share of teacher debates in which one seat breaks the answer contract (its
    turns masked, not imitated), so the teachers' votes show real answers above broken ones; 0 keeps
    every seat well-formed.
    """
    mistake_rate: Probability = 0.25
    """debate only: the chance that a teacher answers the reference answer plus one instead of the
    reference answer (per seat and question), so its debates hold answers that differ and votes
    that are not ties; at 0.5 two seats differ in half the debates.
    """


@dataclass(frozen=True, kw_only=True, config=VALIDATION)
class LeagueSettings:
    """League play (``--opponents league``): the pool, its matchmaking and its ratings."""

    matchmaking: Matchmaking = "pfsp"
    """league only: how a group's opponent is drawn: ``pfsp`` (prioritized fictitious self-play, by
    the learner's online win probability against each), ``uniform``, ``latest`` (the current
    policy: mirror play, one seat trained) or ``anchors`` (the anchors alone: a fixed opponent).
    """
    pfsp_weighting: PFSPWeighting = "hard"
    """league only: PFSP's weight of an opponent beaten with probability p: ``hard``, (1 - p)^2 (the
    ones the learner still loses to), or ``variance``, p (1 - p) (the even ones).
    """
    anchors: tuple[str, ...] | None = None
    """league only: fixed opponents, ``scripted:SET`` (a set of the family's scripted players, such
    as ``scripted:random``), ``[NAME=]model:FOLDER`` (a model folder, frozen: a checkpoint to
    exploit) or ``[NAME=]http(s)://URL[#model]`` (an OpenAI-compatible server); None for every
    scripted set the family has.
    """
    snapshot_every: NonNegativeInt = 2
    """league only: iterations between snapshots of the trained policy added to the pool (one before
    iteration 0: the initial model); 0 adds none.
    """
    max_snapshots: NonNegativeInt = 8
    """league only: snapshots kept in the pool, the newest."""
    group_size: PositiveInt = 4
    """league only: episodes per group: one training episode played this many times with the learner
    in one seat (the seats in turn over the groups) against one opponent.
    """
    rating_decay: RatingDecay = 0.9
    """league only: what the learner's win tallies are multiplied by each iteration before its
    games are added (1 counts every game alike; lower follows a changing learner).
    """

    def __post_init__(self) -> None:
        for anchor in self.anchors or ():
            parse_anchor(anchor)  # a bad spec names every form


@dataclass(frozen=True, kw_only=True, config=VALIDATION)
class ISTrainerConfig(TrainerConfig):
    """Train a language model in an llm-envs environment with the importance-sampling loss."""

    # Shared fields (documented in baselines.config) with this trainer's defaults.
    max_tokens: PositiveInt = 256
    output_dir: str = "runs/is_trainer"
    save_episodes: NonNegativeInt = 4
    num_iterations: NonNegativeInt = 5
    save_every: NonNegativeInt = 1
    eval_every: NonNegativeInt = 5
    env: EnvName = "debate"
    """the environment family: any registered one, yours included (docs/your_own_environment.md).
    Its family plans the groups: a debate's group is one debate, every agent played by the trained
    model (the Tinker Cookbook's multi-agent debate recipe); expert iteration's is the episodes of
    one problem, mixing search strategies (the expert-iteration plan for the Tinker Cookbook).
    """
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """keyword arguments for the environment constructor as a JSON object, e.g. ``{"num_agents": 3,
    "max_rounds": 1}`` for ``debate`` (see :class:`llm_envs.debate.DebateConfig`) or
    ``{"format_reward": 0.5}`` for ``expert_iteration`` (see
    :class:`llm_envs.expert_iteration.ExpertIterationConfig`). Problems come from ``task``, not from
    here.
    """
    task: TaskName = "default"
    """problem source: ``default`` (the env's built-in debate questions; arithmetic for expert
    iteration), ``arithmetic`` (procedural, exact answers; evaluation uses another seed), or
    ``gsm8k`` (the train split for training, the test split for evaluation; needs the data, see
    docs/tasks.md).
    """
    task_kwargs: dict[str, Any] = field(default_factory=dict)
    """settings of the ``arithmetic`` task as a JSON object (see
    :class:`llm_envs.tasks.ArithmeticTask`), e.g. ``{"max_digits": 1, "operations": ["+"]}``.
    """
    strategy_mix: dict[str, NonNegativeInt] = field(
        default_factory=lambda: {"iid": 2, "prompt_augmentation": 1, "answer_hint": 1}
    )
    """expert iteration only: episodes per search strategy in every group, as a JSON object
    (strategies ``iid``, ``prompt_augmentation``, ``answer_hint``, ``two_turn_feedback``).
    """
    strategy_weights: dict[str, NonNegativeFloat] | None = None
    """expert iteration only: mixture weight ``w_s`` per strategy; each trajectory's advantage is
    scaled by ``w_s / n_s`` (the expert-iteration plan's stratified mixture). None weights every
    trajectory equally.
    """
    debates_per_question: PositiveInt = 1
    """debate only: debates of one question in each training group. Within one debate the later
    seats often repeat the first answer, so all are equally right and ``group_mean`` cannot tell a
    correct answer from a wrong one; several debates of the question can.
    """
    groups_per_batch: PositiveInt = 4
    """groups sampled per iteration: questions of a debate (each ``debates_per_question`` debates of
    ``num_agents`` trajectories) or problems (each of ``sum(strategy_mix)`` episodes). Under
    several processes (``accelerate launch``, each process on its own GPU) each samples its share.
    """
    adam_betas: tuple[AdamBeta, AdamBeta] = (0.9, 0.95)
    """AdamW betas."""
    adam_eps: PositiveFloat = 1e-8
    """AdamW epsilon."""
    num_substeps: PositiveInt = 1
    """optimizer steps per iteration: the batch's Datums are split into this many consecutive
    chunks, one step each. The first step is on-policy; later ones are off by the steps before them,
    which the importance ratio corrects.
    """
    loss: LossName = "importance_sampling"
    """policy-gradient loss (:mod:`baselines.training.losses`): ``importance_sampling`` (the debate
    recipe's), ``ppo`` or ``cispo``.
    """
    loss_kwargs: dict[str, float] = field(default_factory=dict)
    """the loss's settings as a JSON object, e.g. ``{"eps_high": 0.28}`` for ``ppo``."""
    loss_normalization: LossNormalization = "action_tokens"
    """``action_tokens`` divides each step's summed loss by the total loss weight of its action
    tokens (a token mean, the same for any number of processes or microbatches); ``sum`` keeps the
    plain sum of the debate recipe (scale the learning rate to the batch).
    """
    normalize_advantages: bool = False
    """divide centred returns by the standard deviation of those they are compared with (their
    group; under ``agent_turn_groups``, the same seat's same turn) (GRPO-style); off follows the
    debate recipe.
    """
    drop_constant_groups: bool = True
    """skip groups whose advantages are all zero (under ``group_mean``: whose returns are all
    equal): they cost compute and add no gradient.
    """
    credit: CreditName = "group_mean"
    """multi-agent credit assignment (docs/credit.md): ``group_mean`` (returns centred per group),
    ``role_baseline`` (each seat against its running baseline in the environment, SPIRAL's role
    baselines; saved in the checkpoints), ``per_agent_norm`` (each seat normalized by its own
    mean and std in the group, Dr. MAS) or ``agent_turn_groups`` (each turn compared with the same
    seat's same turn in the group, AT-GRPO).
    """
    sampling: SamplerSettings = field(default_factory=SamplerSettings)
    """the sampler of the training episodes (the ``--sampler`` and ``--vllm-*`` flags)."""
    packing: Packing = "auto"
    """``auto`` (packed rows when the model's attention can skip the blocks between Datums and a
    start-up probe finds the packed forward equal to separate forwards and not slower; else padded),
    ``packed`` (rows of several Datums, no padding, positions restart per Datum) or ``padded`` (one
    Datum per row).
    """
    gradient_checkpointing: bool = False
    """recompute activations in the backward pass (less memory, about 30% slower)."""
    logprob_chunk_tokens: NonNegativeInt = 2048
    """the most tokens whose logits exist at once when computing the taken tokens' logprobs
    (SmolLM2: 200 KB per token in fp32): a microbatch that projects more runs the projection chunk
    by chunk, making each chunk's logits again in the backward (the default is the default
    microbatch: on a CPU nothing changes; a GPU's larger microbatches project in chunks); 0 always
    uses the model's own logits. Models it cannot run this way (a bias, logit soft-capping, a DDP
    wrapper) use their own logits.
    """
    evaluation: EvalSettings = field(default_factory=EvalSettings)
    """how the trained policy is evaluated (the ``--eval-*`` flags)."""
    warm_start: WarmStartSettings = field(default_factory=WarmStartSettings)
    """the imitation of a scripted teacher before the first iteration (``--warm-start-*``)."""

    opponents: Opponents = "mirror"
    """who plays the seats the learner does not (docs/league.md): ``mirror`` (self-play: the current
    policy in every seat, every seat trained) or ``league`` (each group's episodes have the learner
    in one seat, trained, and one opponent from the pool in the others: the current policy, the
    ``league_anchors`` and snapshots of the trained policy).
    """
    league: LeagueSettings = field(default_factory=LeagueSettings)
    """league play's settings (the ``--league-*`` flags; ``--opponents league``)."""

    def _check_rules(self) -> None:
        if self.opponents != "league" and self.league != LeagueSettings():
            default = LeagueSettings()
            changed = [
                f"league_{f.name}"
                for f in fields(self.league)
                if getattr(self.league, f.name) != getattr(default, f.name)
            ]
            raise ValueError(
                f"{', '.join(changed)} set with opponents={self.opponents!r}: the league_* "
                "settings are for --opponents league"
            )
        if self.normalize_advantages and self.credit in ("role_baseline", "per_agent_norm"):
            raise ValueError(
                f"normalize_advantages is for credit 'group_mean' or 'agent_turn_groups'; "
                f"credit={self.credit!r} decides the scale itself: drop normalize_advantages"
            )
        if self.sampling.sampler_weight_transfer == "nccl":
            check_nccl_transfer(self.sampling.sampler_weights_dir, self.device)
        family = family_class(self.env)  # an unknown env names the registered ones
        if self.task not in family.tasks:
            raise ValueError(
                f"--env {self.env} takes --task {' | '.join(family.tasks)}, got {self.task!r}"
            )
        if self.warm_start.steps > 0:
            require(
                family,
                Teacher,
                by="a warm start imitates a scripted teacher",
                otherwise="use --warm-start-steps 0",
            )
        if self.evaluation.scripted:
            by = "--eval-scripted plays the family's scripted players"
            require(family, ScriptedPlayers, by=by, otherwise="drop --eval-scripted")
        for name, option, what in TEACHER_FIELDS:
            default = getattr(WarmStartSettings(), option)
            if getattr(self.warm_start, option) == default or option in (
                getattr(family, "teacher_options", None) or ()
            ):
                continue
            takers = [
                taker
                for taker in family_names()
                if option in (getattr(family_class(taker), "teacher_options", None) or ())
            ]
            raise ValueError(
                f"{name} is for --env {' or '.join(takers)} ({what}), got env={self.env!r}; "
                f"leave it at {default}"
            )
        mix = self.strategy_mix
        if sum(mix.values()) < 1:
            raise ValueError(f"strategy_mix must ask for at least one episode, got {mix!r}")
        if self.strategy_weights is not None and "strategy_mix" in family.run_options:
            unweighted = sorted(s for s, n in mix.items() if n and s not in self.strategy_weights)
            if unweighted:
                raise ValueError(
                    f"strategy_weights has no weight for {unweighted} of strategy_mix; give "
                    "every sampled strategy a weight, or none (equal weights)"
                )
