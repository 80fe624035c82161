"""Trajectories -> Datums: prefix merge, context swap, masks and weights; packing for the trainer.

:func:`trajectory_to_data` is the debate recipe's algorithm ("Converting Trajectories to
Token-Level Training Data"), with the expert-iteration plan's context swap:

1. For each turn i, the training observation is ``context_transform(o_i, i)``
   (or ``o_i`` without a transform).
2. With x the running full sequence of the current Datum: if x is empty, append
   the whole observation; if x is a prefix of the observation, append only the
   delta ``o[len(x):]``; otherwise finalize the current Datum and start a new one
   from the whole observation.
3. Append the action tokens. Observation tokens get sampling logprob 0,
   advantage 0, mask 0, weight 0; action tokens get their sampling logprobs, the
   trajectory's advantage, mask 1 and weight ``loss_weight`` of the turn.
4. Shift: ``model_input = x[:-1]``, ``target_tokens = x[1:]`` and every
   per-token array drops its first position, so each array is aligned with the
   targets.

"Prefix" includes equality (an observation equal to x appends an empty delta).

The context transform sees only observations: action tokens and their
sampling logprobs pass through untouched, never re-tokenized, because they
define the behaviour policy ``q`` in the importance ratio (the expert-iteration plan,
"Invariants"). Observation tokens are context only: they are never trained on.

This module never imports torch or a tokenizer (chat messages are rendered by a
caller-supplied :data:`~baselines.types.RenderMessages`), and never reads an
environment beyond a transition's ``info``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from baselines.data.advantages import (
    group_returns,
    is_constant_group,
    strategy_counts,
    stratified_scales,
)
from baselines.data.credit import Credit, assign_credit
from baselines.types import (
    TOKEN_DTYPE,
    VALUE_DTYPE,
    ContextTransform,
    Datum,
    PackedBatch,
    PaddedBatch,
    RenderMessages,
    Tokens,
    TrainingBatch,
    Trajectory,
    TrajectoryGroup,
    as_tokens,
)

__all__ = [
    "assemble_training_data",
    "pack_data",
    "pad_data",
    "training_context_transform",
    "trajectory_to_data",
    "unpack_data",
]

# (start, end, sampling logprobs, loss weight, advantage) of one action inside a full sequence.
_ActionSpan = tuple[int, int, tuple[float, ...], float, float]


def _build_datum(
    full_sequence: list[int],
    action_spans: list[_ActionSpan],
    strategy: str | None,
) -> Datum | None:
    """Fill the per-token arrays of one full sequence and shift it into input/target form."""
    length = len(full_sequence)
    if length < 2:  # a single token has nothing to predict it from
        return None
    tokens = np.array(full_sequence, dtype=TOKEN_DTYPE)
    logprobs = np.zeros(length, dtype=VALUE_DTYPE)
    advantages = np.zeros(length, dtype=VALUE_DTYPE)
    mask = np.zeros(length, dtype=VALUE_DTYPE)
    weights = np.zeros(length, dtype=VALUE_DTYPE)
    for start, end, sampling_logprobs, loss_weight, advantage in action_spans:
        logprobs[start:end] = sampling_logprobs
        advantages[start:end] = advantage
        mask[start:end] = 1.0
        weights[start:end] = loss_weight
    # Position t of model_input predicts x[t + 1]: every per-token array drops x[0].
    return Datum(
        model_input=tokens[:-1],
        target_tokens=tokens[1:],
        logprobs=logprobs[1:],
        advantages=advantages[1:],
        mask=mask[1:],
        weights=weights[1:],
        strategy=strategy,
    )


def trajectory_to_data(
    trajectory: Trajectory,
    advantage: float | Sequence[float] | np.ndarray,
    context_transform: ContextTransform | None = None,
) -> list[Datum]:
    """Convert one trajectory into Datums (the debate recipe, with the context swap).

    Args:
        trajectory: one agent's turns in one episode.
        advantage: the trajectory's advantage, put on each of its action tokens;
            or one advantage per turn (``agent_turn_groups`` credit), each put on
            its turn's action tokens.
        context_transform: ``(observation_tokens, turn_index) -> training
            observation tokens``, applied before the prefix check. Actions and
            sampling logprobs are never passed to it.

    Returns:
        One Datum per run of turns whose (training) observations extend the
        previous sequence; a sequence shorter than 2 tokens yields none.

    Example:
        Two turns where the second observation extends the first sequence merge
        into one Datum::

            >>> from baselines.types import Transition
            >>> t0 = Transition([1, 2], [3], [-0.5])
            >>> t1 = Transition([1, 2, 3, 4], [5], [-0.25])
            >>> [d] = trajectory_to_data(Trajectory((t0, t1)), advantage=2.0)
            >>> d.model_input.tolist(), d.target_tokens.tolist()
            ([1, 2, 3, 4], [2, 3, 4, 5])
            >>> d.mask.tolist(), d.logprobs.tolist(), d.advantages.tolist()
            ([0.0, 1.0, 0.0, 1.0], [0.0, -0.5, 0.0, -0.25], [0.0, 2.0, 0.0, 2.0])
    """
    advantages_T = _turn_advantages(advantage, len(trajectory.transitions))
    data: list[Datum] = []
    full_sequence: list[int] = []
    action_spans: list[_ActionSpan] = []

    def finalize() -> None:
        datum = _build_datum(full_sequence, action_spans, trajectory.strategy)
        if datum is not None:
            data.append(datum)

    for turn, transition in enumerate(trajectory.transitions):
        observation: Tokens = transition.observation
        if context_transform is not None:
            observation = as_tokens(
                context_transform(observation, turn), f"context_transform output at turn {turn}"
            )
        prefix_length = len(full_sequence)
        if prefix_length and (
            prefix_length > len(observation) or list(observation[:prefix_length]) != full_sequence
        ):
            # Not an extension (truncated history, clipped fields, a swapped
            # context): the model would see a different context, so start anew.
            finalize()
            full_sequence, action_spans = [], []
            prefix_length = 0
        full_sequence.extend(observation[prefix_length:])
        start = len(full_sequence)
        full_sequence.extend(transition.action)
        end = len(full_sequence)
        action_spans.append(
            (start, end, transition.logprobs, transition.loss_weight, advantages_T[turn])
        )
    finalize()
    return data


def _turn_advantages(advantage: float | Sequence[float] | np.ndarray, turns: int) -> list[float]:
    """One advantage per turn: the trajectory's repeated, or the per-turn ones checked."""
    if np.ndim(advantage) == 0:
        return [float(advantage)] * turns  # type: ignore[arg-type]
    values = [float(a) for a in advantage]  # type: ignore[union-attr]
    if len(values) != turns:
        raise ValueError(
            f"got {len(values)} per-turn advantages for a trajectory of {turns} turns; "
            "give one per turn, or one float for the whole trajectory"
        )
    if not all(map(math.isfinite, values)):
        raise ValueError(f"per-turn advantages must be finite, got {values}")
    return values


def training_context_transform(
    trajectory: Trajectory,
    render_messages: RenderMessages | None = None,
    context_transform: ContextTransform | None = None,
) -> ContextTransform | None:
    """Return the context transform that puts a trajectory's training context in place.

    A turn whose ``info["training_messages"]`` is set trains on those messages,
    rendered with ``render_messages`` (the same chat template the sampler used);
    then ``context_transform``, if any, is applied on top. Without either, returns
    None (train on the sampling context).

    Raises:
        ValueError: a turn carries ``training_messages`` but no
            ``render_messages`` was given: training on the sampling context there
            would silently compute the wrong likelihood ratio.
    """
    turns_with_messages = [
        turn for turn, t in enumerate(trajectory.transitions) if t.training_messages is not None
    ]
    if not turns_with_messages:
        return context_transform
    if render_messages is None:
        raise ValueError(
            f"turns {turns_with_messages} of trajectory (agent {trajectory.agent_id!r}) carry "
            "info['training_messages'] but render_messages is None; pass render_messages "
            "(the sampler's chat-template renderer) so the training context is used"
        )
    transitions = trajectory.transitions
    render = render_messages

    def transform(observation: Tokens, turn: int) -> Sequence[int]:
        messages = transitions[turn].training_messages
        if messages is not None:
            observation = as_tokens(render(messages), f"render_messages output at turn {turn}")
        if context_transform is not None:
            return context_transform(observation, turn)
        return observation

    return transform


def assemble_training_data(
    groups_P: Sequence[TrajectoryGroup],
    *,
    context_transform: ContextTransform | None = None,
    render_messages: RenderMessages | None = None,
    strategy_weights: Mapping[str, float] | None = None,
    normalize_std: bool = False,
    std_epsilon: float = 1e-6,
    drop_constant: bool = True,
    credit: Credit | None = None,
) -> TrainingBatch:
    """Advantages, stratification and Datum conversion for a batch of groups.

    Steps (the debate recipe, "Advantage + data assembly"; the expert-iteration plan, "Stratified
    averaging"):

    1. ``n_s``: trajectories of each strategy over *all* groups given, dropped
       ones included: they were sampled, their gradient is simply zero, and
       leaving them out would inflate the weight of strategies that often
       produce constant groups.
    2. Drop groups without signal (``drop_constant``): with the default credit,
       those whose returns are all equal; keep at least one.
    3. Per kept group: the advantages of ``credit`` (default: returns centred
       per group, optionally std-normalized), then ``A_i *= w_s / n_s`` when
       ``strategy_weights`` is given.
    4. Each trajectory -> Datums with its training context (see
       :func:`training_context_transform`).

    Args:
        groups_P: the batch's trajectory groups.
        context_transform: applied to every turn's observation (after rendering
            ``training_messages``).
        render_messages: renders ``info["training_messages"]`` to tokens.
        strategy_weights: mixture weight ``w_s`` per strategy key (None is keyed
            as ``"untagged"``); None weights every trajectory equally.
        normalize_std: divide centred returns by the group std + ``std_epsilon``.
        std_epsilon: see ``normalize_std``.
        drop_constant: drop groups whose advantages are all zero (with the
            default credit: whose returns are all equal).
        credit: the batch's credit (:func:`baselines.data.credit.assign_credit`
            of these groups, any scheme); None assigns ``group_mean`` with
            ``normalize_std`` and ``std_epsilon``.

    Returns:
        The Datums, group by group, and batch metrics (the credit's included).

    Raises:
        ValueError: no group; ``credit`` of another batch, or given together
            with ``normalize_std`` (pass that to ``assign_credit``).
    """
    if not groups_P:
        raise ValueError("groups_P is empty; assemble_training_data needs at least one group")
    if credit is None:
        credit = assign_credit(groups_P, normalize_std=normalize_std, epsilon=std_epsilon)
    elif normalize_std:
        raise ValueError(
            "normalize_std applies to the default credit only; with credit given, pass "
            "normalize_std to assign_credit instead"
        )
    sizes = [len(group) for group in groups_P]
    if [len(a) for a in credit.advantages_P_G] != sizes:
        raise ValueError(
            f"credit holds advantages for groups of sizes {[len(a) for a in credit.advantages_P_G]}"
            f" but the batch's groups have sizes {sizes}; assign credit to these groups"
        )
    returns_P = [group_returns(group) for group in groups_P]
    mixed_P = [not is_constant_group(returns_G) for returns_G in returns_P]
    # Same rule as drop_constant_groups, by index so that n_s and scales stay aligned.
    kept_P = [p for p, signal in enumerate(credit.signal_P) if signal or not drop_constant] or [0]

    all_strategies = [t.strategy for group in groups_P for t in group.trajectories_G]
    counts = strategy_counts(all_strategies)
    offsets_P1 = np.cumsum([0] + [len(group) for group in groups_P])
    scales = (
        stratified_scales(all_strategies, strategy_weights)
        if strategy_weights is not None
        else np.ones(len(all_strategies))
    )

    data: list[Datum] = []
    num_trajectories = 0
    for p in kept_P:
        group = groups_P[p]
        scales_G = scales[offsets_P1[p] : offsets_P1[p + 1]]
        advantages_G: Sequence[float | np.ndarray] = (
            (credit.advantages_P_G[p] * scales_G).tolist()
            if credit.turn_advantages_P_G is None
            else [a * s for a, s in zip(credit.turn_advantages_P_G[p], scales_G, strict=True)]
        )
        for trajectory, advantage in zip(group.trajectories_G, advantages_G, strict=True):
            transform = training_context_transform(trajectory, render_messages, context_transform)
            data.extend(trajectory_to_data(trajectory, advantage, transform))
            num_trajectories += 1

    metrics: dict[str, float] = {
        "data/num_groups": len(groups_P),
        "data/num_groups_kept": len(kept_P),
        "data/num_groups_with_signal": sum(map(bool, credit.signal_P)),
        "data/num_trajectories": num_trajectories,
        "data/num_datums": len(data),
        "data/num_tokens": sum(len(d) for d in data),
        "data/num_action_tokens": sum(d.num_action_tokens for d in data),
        "env/all/by_group/frac_mixed": float(np.mean(mixed_P)),
        "env/all/reward/total": float(np.concatenate(returns_P).mean()),
    }
    for strategy, count in counts.items():
        metrics[f"strategy/{strategy}/num_trajectories"] = count
    metrics.update(credit.metrics)
    return TrainingBatch(data_D=tuple(data), metrics=metrics)


def pack_data(data_D: Sequence[Datum]) -> PackedBatch:
    """Concatenate Datums into one packed row with ``cu_seqlens`` boundaries (no padding).

    Example:
        >>> from baselines.types import Transition
        >>> a = trajectory_to_data(Trajectory((Transition([1, 2], [3], [-0.1]),)), 1.0)
        >>> b = trajectory_to_data(Trajectory((Transition([7], [8, 9], [-0.2, -0.3]),)), 1.0)
        >>> packed = pack_data(a + b)
        >>> packed.input_ids_N.tolist(), packed.position_ids_N.tolist()
        ([1, 2, 7, 8], [0, 1, 0, 1])
        >>> packed.cu_seqlens_D1.tolist()
        [0, 2, 4]
    """
    if not data_D:
        raise ValueError("data_D is empty; pack_data needs at least one Datum")
    lengths_D = np.array([len(d) for d in data_D], dtype=np.int64)
    cu_seqlens_D1 = np.zeros(len(data_D) + 1, dtype=np.int32)
    np.cumsum(lengths_D, out=cu_seqlens_D1[1:])
    # position within its Datum: global index minus the Datum's start offset
    position_ids_N = np.arange(int(cu_seqlens_D1[-1]), dtype=TOKEN_DTYPE) - np.repeat(
        cu_seqlens_D1[:-1].astype(TOKEN_DTYPE), lengths_D
    )
    return PackedBatch(
        input_ids_N=np.concatenate([d.model_input for d in data_D]),
        target_tokens_N=np.concatenate([d.target_tokens for d in data_D]),
        logprobs_N=np.concatenate([d.logprobs for d in data_D]),
        advantages_N=np.concatenate([d.advantages for d in data_D]),
        mask_N=np.concatenate([d.mask for d in data_D]),
        weights_N=np.concatenate([d.weights for d in data_D]),
        position_ids_N=position_ids_N,
        cu_seqlens_D1=cu_seqlens_D1,
        strategies_D=tuple(d.strategy for d in data_D),
    )


def unpack_data(packed: PackedBatch) -> list[Datum]:
    """Split a :class:`PackedBatch` back into its Datums (the inverse of :func:`pack_data`)."""
    bounds = packed.cu_seqlens_D1.tolist()
    return [
        Datum(
            model_input=packed.input_ids_N[start:end],
            target_tokens=packed.target_tokens_N[start:end],
            logprobs=packed.logprobs_N[start:end],
            advantages=packed.advantages_N[start:end],
            mask=packed.mask_N[start:end],
            weights=packed.weights_N[start:end],
            strategy=strategy,
        )
        for start, end, strategy in zip(bounds[:-1], bounds[1:], packed.strategies_D, strict=True)
    ]


def pad_data(
    data_D: Sequence[Datum],
    *,
    pad_token_id: int = 0,
    pad_to_multiple_of: int = 1,
) -> PaddedBatch:
    """Right-pad Datums to the longest one (rounded up to ``pad_to_multiple_of``).

    The padded alternative to :func:`pack_data`, for models or kernels without
    variable-length attention. Padding has zero logprob, advantage, mask and
    weight, and ``attention_mask_B_T == 0``.
    """
    if not data_D:
        raise ValueError("data_D is empty; pad_data needs at least one Datum")
    if pad_to_multiple_of < 1:
        raise ValueError(f"pad_to_multiple_of must be >= 1, got {pad_to_multiple_of}")
    longest = max(len(d) for d in data_D)
    width = -(-longest // pad_to_multiple_of) * pad_to_multiple_of
    rows = len(data_D)

    def stack(field: str, dtype: type[np.generic], fill: float) -> np.ndarray:
        out = np.full((rows, width), fill, dtype=dtype)
        for row, datum in enumerate(data_D):
            values = getattr(datum, field)
            out[row, : len(values)] = values
        return out

    attention_mask_B_T = np.zeros((rows, width), dtype=TOKEN_DTYPE)
    for row, datum in enumerate(data_D):
        attention_mask_B_T[row, : len(datum)] = 1
    return PaddedBatch(
        input_ids_B_T=stack("model_input", TOKEN_DTYPE, pad_token_id),
        target_tokens_B_T=stack("target_tokens", TOKEN_DTYPE, pad_token_id),
        logprobs_B_T=stack("logprobs", VALUE_DTYPE, 0.0),
        advantages_B_T=stack("advantages", VALUE_DTYPE, 0.0),
        mask_B_T=stack("mask", VALUE_DTYPE, 0.0),
        weights_B_T=stack("weights", VALUE_DTYPE, 0.0),
        attention_mask_B_T=attention_mask_B_T,
        strategies_B=tuple(d.strategy for d in data_D),
    )
