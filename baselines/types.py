"""The token-level contract of :mod:`baselines`: transitions, trajectories, groups, Datums.

Everything else in :mod:`baselines` imports these types; nothing here imports
them back. The flow of one training iteration is::

    rollouts  ->  Transition (one agent turn, in tokens)
              ->  Trajectory (one agent's turns in one episode)
              ->  TrajectoryGroup (trajectories whose returns are centred together)
    data/advantages.py: returns R = sum of step rewards + final reward, centred per group
    data/datums.py:     Trajectory + advantage -> Datum rows (input / target form)
              ->  PackedBatch (no padding) or PaddedBatch  ->  the trainer

Token sequences and arrays
--------------------------
* Inside a :class:`Transition`, tokens are ``tuple[int, ...]`` and sampling
  logprobs ``tuple[float, ...]``: immutable, hashable, cheap to compare for the
  prefix check of :func:`baselines.data.datums.trajectory_to_data`, and exactly what a
  sampler returns. Lists and numpy arrays are accepted and converted.
* Inside a :class:`Datum` and the batch types, every per-token field is a
  read-only 1-D (or 2-D for :class:`PaddedBatch`) numpy array: tokens
  ``int64`` (what ``torch.nn.Embedding`` indexes with), everything else
  ``float32`` (what the model computes logprobs in). Datum arrays are
  read-only, so a trainer cannot change advantages in place between epochs.
  :func:`baselines.data.datums.pack_data` and :func:`baselines.data.datums.pad_data` build
  fresh, writable arrays: ``torch.from_numpy(packed.input_ids_N)`` makes a
  tensor without a copy. For a single Datum use ``torch.tensor(datum.mask)``
  (``torch.from_numpy`` warns on read-only arrays).

Shape suffixes
--------------
Names of arrays, tensors and lists end with their dimensions, one capital
letter each (the tinker-cookbook convention)::

    _G  trajectories in one group          advantages_G, returns_G
    _P  groups in a batch                  groups_P
    _D  Datums in a batch                  data_D, strategies_D
    _T  tokens in one Datum (sequence)     tokens_T
    _N  tokens of a packed batch (sum of every Datum's T)   input_ids_N
    _B  rows of a padded batch             input_ids_B_T

The per-token fields of :class:`Datum` have no suffix: they are all ``_T``,
aligned with ``model_input``.

What this module must never do: import torch, tokenize text, or know about a
particular environment. Env-specific information reaches it only through the
``info`` dict of a :class:`Transition`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

__all__ = [
    "TOKEN_DTYPE",
    "VALUE_DTYPE",
    "ContextTransform",
    "Datum",
    "Message",
    "PackedBatch",
    "PaddedBatch",
    "RenderMessages",
    "Tokens",
    "TrainingBatch",
    "Trajectory",
    "TrajectoryGroup",
    "Transition",
    "as_tokens",
]

Tokens: TypeAlias = tuple[int, ...]
"""A token sequence inside a :class:`Transition`."""

Message: TypeAlias = Mapping[str, str]
"""One chat message, ``{"role": ..., "content": ...}``, as environments emit them."""

ContextTransform: TypeAlias = Callable[[Tokens, int], Sequence[int]]
"""``(observation_tokens, turn_index) -> training observation tokens``.

Applied to each turn's observation before the prefix check (the expert-iteration plan, "Swap
context when building Datums"). It must never touch action tokens: it only sees
the observation.
"""

RenderMessages: TypeAlias = Callable[[Sequence[Message]], Sequence[int]]
"""Renders chat messages to prompt tokens (the chat template with the generation
prompt, exactly as the sampler rendered the sampling observation). Supplied by the
caller, so that :mod:`baselines.data.datums` never imports a tokenizer."""

IntArray: TypeAlias = npt.NDArray[np.int64]
FloatArray: TypeAlias = npt.NDArray[np.float32]

TOKEN_DTYPE = np.int64
"""dtype of token arrays in Datums and batches."""
VALUE_DTYPE = np.float32
"""dtype of logprobs, advantages, masks and weights in Datums and batches."""


def as_tokens(value: Sequence[int] | np.ndarray, name: str = "tokens") -> Tokens:
    """Return ``value`` as a tuple of ints (lists, tuples and 1-D integer arrays accepted).

    Example:
        >>> as_tokens([1, 2, 3])
        (1, 2, 3)
    """
    if isinstance(value, tuple):
        return value
    if isinstance(value, np.ndarray):
        if value.ndim != 1:
            raise ValueError(f"{name} must be 1-D, got shape {value.shape}")
        return tuple(value.tolist())
    if isinstance(value, str | bytes):
        raise TypeError(f"{name} must be token ids, got text {value[:20]!r}...; tokenize it first")
    return tuple(value)


def _as_floats(name: str, value: Sequence[float] | np.ndarray) -> tuple[float, ...]:
    if isinstance(value, np.ndarray):
        if value.ndim != 1:
            raise ValueError(f"{name} must be 1-D, got shape {value.shape}")
        return tuple(value.tolist())
    return tuple(value)


@dataclass(frozen=True, init=False)
class Transition:
    """One agent turn in tokens: what the model saw, what it sampled, what it got.

    Attributes:
        observation: the prompt tokens the sampler conditioned on (the sampling
            context: the observation's chat rendered with the chat template).
        action: the sampled completion tokens, exactly as sampled (never
            re-tokenized from text).
        logprobs: the sampler's logprob of each action token, ``len(action)``
            finite floats. They define the behaviour policy ``q`` and are never
            recomputed.
        reward: the step reward the agent received for this turn.
        done: whether the agent's episode ended with this turn.
        info: the environment's ``infos[agent]`` for this turn. Keys read here:
            ``loss_weight`` (float >= 0, default 1.0; 0 keeps the turn as context
            but trains nothing on it) and ``training_messages`` (the training
            context as chat messages, when it differs from the observation).

    Example:
        >>> t = Transition(observation=[1, 2, 3], action=[4, 5], logprobs=[-0.1, -0.2])
        >>> t.observation, t.loss_weight
        ((1, 2, 3), 1.0)
    """

    observation: Tokens
    action: Tokens
    logprobs: tuple[float, ...]
    reward: float = 0.0
    done: bool = False
    info: Mapping[str, Any] = field(default_factory=dict)

    def __init__(
        self,
        observation: Sequence[int] | np.ndarray,
        action: Sequence[int] | np.ndarray,
        logprobs: Sequence[float] | np.ndarray,
        reward: float = 0.0,
        done: bool = False,
        info: Mapping[str, Any] | None = None,
    ) -> None:
        # A hand-written __init__ so that lists and arrays type-check going in while
        # the fields stay precisely typed (tuples) coming out.
        object.__setattr__(self, "observation", as_tokens(observation, "observation"))
        object.__setattr__(self, "action", as_tokens(action, "action"))
        object.__setattr__(self, "logprobs", _as_floats("logprobs", logprobs))
        object.__setattr__(self, "reward", float(reward))
        object.__setattr__(self, "done", bool(done))
        object.__setattr__(self, "info", {} if info is None else info)
        if len(self.logprobs) != len(self.action):
            raise ValueError(
                f"Transition has {len(self.action)} action tokens but {len(self.logprobs)} "
                "logprobs; pass the sampler's logprob of every sampled token"
            )
        if not all(map(math.isfinite, self.logprobs)):
            bad = next(i for i, lp in enumerate(self.logprobs) if not math.isfinite(lp))
            raise ValueError(
                f"Transition.logprobs[{bad}] is {self.logprobs[bad]}: sampling logprobs must be "
                "finite (a token the sampler could not have sampled cannot be trained on)"
            )
        if not math.isfinite(self.reward):
            raise ValueError(f"Transition.reward must be finite, got {self.reward}")
        weight = self.info.get("loss_weight", 1.0)
        if not isinstance(weight, numbers.Real) or not math.isfinite(weight) or weight < 0:
            raise ValueError(
                f"info['loss_weight'] must be a finite number >= 0, got {weight!r}; "
                "use 0 for turns that must not be trained on"
            )

    @property
    def loss_weight(self) -> float:
        """Weight of this turn's action tokens in the loss (``info["loss_weight"]``, default 1)."""
        return float(self.info.get("loss_weight", 1.0))

    @property
    def training_messages(self) -> Sequence[Message] | None:
        """The training context as chat messages, or None when it equals the observation."""
        return self.info.get("training_messages")


@dataclass(frozen=True, init=False)
class Trajectory:
    """One agent's transitions in one episode, in turn order.

    The final (group) reward is not stored here but in the
    :class:`TrajectoryGroup`, because the group computes it from all its members
    (the debate recipe, "Final group reward").

    Attributes:
        transitions: the agent's turns, first to last.
        agent_id: the PettingZoo agent name (``"agent_0"``, ``"helper"``...), for logs.
        strategy: the search strategy that produced this trajectory (expert
            iteration, the expert-iteration plan), or None. Stratified weighting and per-strategy
            metrics group by it.
    """

    transitions: tuple[Transition, ...]
    agent_id: str | None = None
    strategy: str | None = None

    def __init__(
        self,
        transitions: Iterable[Transition],
        agent_id: str | None = None,
        strategy: str | None = None,
    ) -> None:
        object.__setattr__(self, "transitions", tuple(transitions))
        object.__setattr__(self, "agent_id", agent_id)
        object.__setattr__(self, "strategy", strategy)
        for i, t in enumerate(self.transitions):
            if not isinstance(t, Transition):
                raise TypeError(f"transitions[{i}] must be a Transition, got {type(t).__name__}")

    @property
    def step_reward(self) -> float:
        """Sum of the step rewards of all transitions."""
        return math.fsum(t.reward for t in self.transitions)

    @property
    def num_action_tokens(self) -> int:
        """Number of sampled tokens over all turns."""
        return sum(len(t.action) for t in self.transitions)


@dataclass(frozen=True, init=False)
class TrajectoryGroup:
    """Trajectories whose returns are centred together (the debate recipe, "Advantage Computation").

    A debate episode (its N agents), G samples of one problem (expert
    iteration), or the siblings of a tree node.

    Attributes:
        trajectories_G: the group's trajectories.
        final_rewards_G: each trajectory's final group reward (e.g. its
            leave-one-out win rate). Empty means all zero (rewards already
            attributed to the transitions).
        metrics_G: per-trajectory metric dicts (reward diagnostics). Empty means
            none.
    """

    trajectories_G: tuple[Trajectory, ...]
    final_rewards_G: tuple[float, ...] = ()
    metrics_G: tuple[Mapping[str, float], ...] = ()

    def __init__(
        self,
        trajectories_G: Iterable[Trajectory],
        final_rewards_G: Iterable[float] = (),
        metrics_G: Iterable[Mapping[str, float]] = (),
    ) -> None:
        trajectories = tuple(trajectories_G)
        if not trajectories:
            raise ValueError("a TrajectoryGroup needs at least one trajectory, got 0")
        n = len(trajectories)
        finals = tuple(float(r) for r in final_rewards_G) or (0.0,) * n
        metrics = tuple(metrics_G) or tuple({} for _ in range(n))
        if len(finals) != n:
            raise ValueError(
                f"final_rewards_G has {len(finals)} entries for {n} trajectories; give one each"
            )
        if len(metrics) != n:
            raise ValueError(f"metrics_G has {len(metrics)} entries for {n} trajectories")
        if not all(map(math.isfinite, finals)):
            raise ValueError(f"final_rewards_G must be finite, got {finals}")
        object.__setattr__(self, "trajectories_G", trajectories)
        object.__setattr__(self, "final_rewards_G", finals)
        object.__setattr__(self, "metrics_G", metrics)

    @property
    def strategies_G(self) -> tuple[str | None, ...]:
        """The strategy tag of each trajectory."""
        return tuple(t.strategy for t in self.trajectories_G)

    def __len__(self) -> int:
        return len(self.trajectories_G)


def _frozen_array(name: str, value: Any, dtype: type[np.generic]) -> np.ndarray:
    array = np.asarray(value, dtype=dtype)
    if array.ndim != 1:
        raise ValueError(f"Datum.{name} must be 1-D, got shape {array.shape}")
    if array.flags.writeable:
        # A read-only view: freezes the Datum without copying and without
        # changing the flags of an array the caller still owns.
        array = array.view()
        array.flags.writeable = False
    return array


_DATUM_ARRAYS: dict[str, type[np.generic]] = {
    "model_input": TOKEN_DTYPE,
    "target_tokens": TOKEN_DTYPE,
    "logprobs": VALUE_DTYPE,
    "advantages": VALUE_DTYPE,
    "mask": VALUE_DTYPE,
    "weights": VALUE_DTYPE,
}


@dataclass(frozen=True, eq=False, init=False)
class Datum:
    """One training row in next-token form: ``model_input[t]`` is followed by ``target_tokens[t]``.

    Every field is a read-only 1-D array of the same length T (the
    ``_T`` suffix, implicit). Built by :func:`baselines.data.datums.trajectory_to_data`
    from a full sequence x of observation and action tokens: ``model_input =
    x[:-1]``, ``target_tokens = x[1:]``, and every per-token array is aligned
    with the targets.

    Attributes:
        model_input: int64 input tokens.
        target_tokens: int64 tokens to predict.
        logprobs: float32 sampling logprob of each target (0 where the target is
            an observation token).
        advantages: float32 advantage of each target (the trajectory's advantage
            on action tokens, 0 on observation tokens).
        mask: float32, 1 where the target is a sampled action token, else 0.
            Metrics (KL, entropy) average over mask == 1.
        weights: float32 loss weight of each target: the turn's ``loss_weight``
            on action tokens, 0 on observation tokens. Losses multiply each
            token's term by it.
        strategy: the trajectory's strategy tag, for per-strategy metrics.
    """

    model_input: IntArray
    target_tokens: IntArray
    logprobs: FloatArray
    advantages: FloatArray
    mask: FloatArray
    weights: FloatArray
    strategy: str | None = None

    def __init__(
        self,
        model_input: npt.ArrayLike,
        target_tokens: npt.ArrayLike,
        logprobs: npt.ArrayLike,
        advantages: npt.ArrayLike,
        mask: npt.ArrayLike,
        weights: npt.ArrayLike,
        strategy: str | None = None,
    ) -> None:
        values = {
            "model_input": model_input,
            "target_tokens": target_tokens,
            "logprobs": logprobs,
            "advantages": advantages,
            "mask": mask,
            "weights": weights,
        }
        for name, dtype in _DATUM_ARRAYS.items():
            object.__setattr__(self, name, _frozen_array(name, values[name], dtype))
        object.__setattr__(self, "strategy", strategy)
        lengths = {name: len(getattr(self, name)) for name in _DATUM_ARRAYS}
        if len(set(lengths.values())) != 1:
            raise ValueError(f"Datum fields must have one length, got {lengths}")

    def __len__(self) -> int:
        return len(self.model_input)

    def __reduce__(self) -> tuple[type[Datum], tuple[Any, ...]]:
        # Rebuild through __init__ so that an unpickled Datum (sent to another
        # process) is read-only and validated like the original.
        arrays = tuple(getattr(self, name) for name in _DATUM_ARRAYS)
        return (Datum, (*arrays, self.strategy))

    @property
    def num_action_tokens(self) -> int:
        """Number of targets that are sampled action tokens (mask == 1)."""
        return int(np.count_nonzero(self.mask))

    def __repr__(self) -> str:
        return (
            f"Datum(T={len(self)}, action_tokens={self.num_action_tokens}, "
            f"strategy={self.strategy!r})"
        )


@dataclass(frozen=True, eq=False)
class PackedBatch:
    """Datums concatenated into one row with no padding (variable-length attention).

    ``cu_seqlens_D1`` holds the boundaries: Datum d is
    ``[cu_seqlens_D1[d], cu_seqlens_D1[d + 1])``. ``position_ids_N`` restarts at 0
    for each Datum, which is how Hugging Face models and flash-attention's
    ``varlen`` kernels keep packed sequences from attending to each other.

    Attributes:
        input_ids_N: int64 concatenated ``model_input``.
        target_tokens_N: int64 concatenated ``target_tokens``.
        logprobs_N: float32 sampling logprobs.
        advantages_N: float32 advantages.
        mask_N: float32 action-token mask.
        weights_N: float32 loss weights.
        position_ids_N: int64 position of each token within its Datum.
        cu_seqlens_D1: int32 cumulative lengths, ``D + 1`` entries starting at 0.
        strategies_D: each Datum's strategy tag.
    """

    input_ids_N: IntArray
    target_tokens_N: IntArray
    logprobs_N: FloatArray
    advantages_N: FloatArray
    mask_N: FloatArray
    weights_N: FloatArray
    position_ids_N: IntArray
    cu_seqlens_D1: npt.NDArray[np.int32]
    strategies_D: tuple[str | None, ...]

    @property
    def lengths_D(self) -> npt.NDArray[np.int32]:
        """Length of each Datum."""
        return np.diff(self.cu_seqlens_D1)

    @property
    def max_seqlen(self) -> int:
        """Longest Datum (flash-attention's ``max_seqlen``)."""
        return int(self.lengths_D.max(initial=0))

    @property
    def num_tokens(self) -> int:
        """Tokens the model processes: the sum of Datum lengths."""
        return len(self.input_ids_N)


@dataclass(frozen=True, eq=False)
class PaddedBatch:
    """Datums right-padded to the longest one: the layout every model accepts.

    Padding positions have ``attention_mask_B_T == 0`` and zero logprob,
    advantage, mask and weight, so they contribute nothing to any loss or metric.

    Attributes:
        input_ids_B_T: int64 inputs, padded with ``pad_token_id``.
        target_tokens_B_T: int64 targets, padded with ``pad_token_id``.
        logprobs_B_T: float32 sampling logprobs.
        advantages_B_T: float32 advantages.
        mask_B_T: float32 action-token mask.
        weights_B_T: float32 loss weights.
        attention_mask_B_T: int64, 1 for real tokens, 0 for padding.
        strategies_B: each row's strategy tag.
    """

    input_ids_B_T: npt.NDArray[np.int64]
    target_tokens_B_T: npt.NDArray[np.int64]
    logprobs_B_T: npt.NDArray[np.float32]
    advantages_B_T: npt.NDArray[np.float32]
    mask_B_T: npt.NDArray[np.float32]
    weights_B_T: npt.NDArray[np.float32]
    attention_mask_B_T: npt.NDArray[np.int64]
    strategies_B: tuple[str | None, ...]

    @property
    def num_tokens(self) -> int:
        """Tokens the model processes, padding included: rows x longest row."""
        return int(self.input_ids_B_T.size)


@dataclass(frozen=True)
class TrainingBatch:
    """What :func:`baselines.data.datums.assemble_training_data` returns: Datums and their metrics.

    Attributes:
        data_D: the Datums of every kept group, group by group.
        metrics: batch statistics to log (group counts, per-strategy ``n_s``,
            fraction of mixed groups, mean return, token counts).
    """

    data_D: tuple[Datum, ...]
    metrics: Mapping[str, float]
