"""Datum assembly throughput: trajectories -> Datums, then packed vs padded batches.

Run from the repository root::

    python bench/datum_assembly.py                      # 1k trajectories x 4 turns x 512 tokens
    python bench/datum_assembly.py --trajectories 200   # quicker

It times :func:`baselines.data.datums.trajectory_to_data` (fills numpy arrays slice by
slice, one span per action) against a baseline that builds per-token Python
lists and converts them at the end (the direct port of the seed's description),
on two workloads: every observation extends the previous sequence (one Datum
per trajectory, the debate case) and every other turn breaks the prefix (two
Datums per trajectory). Both produce identical Datums; the bench checks that.

Then it packs the Datums of variable-length trajectories with
:func:`baselines.data.datums.pack_data` and pads them with :func:`baselines.data.datums.pad_data`
and prints how many tokens each makes the model process.

Not a test: numbers depend on the machine. Nothing here is imported by the package.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from baselines.data.datums import pack_data, pad_data, trajectory_to_data
from baselines.types import Datum, Trajectory, Transition


def list_based_trajectory_to_data(trajectory: Trajectory, advantage: float) -> list[Datum]:
    """The baseline: per-token Python lists, converted to arrays once per Datum."""
    data: list[Datum] = []
    tokens: list[int] = []
    logprobs: list[float] = []
    advantages: list[float] = []
    mask: list[float] = []
    weights: list[float] = []

    def finalize() -> None:
        if len(tokens) >= 2:
            data.append(
                Datum(
                    model_input=np.array(tokens[:-1], dtype=np.int64),
                    target_tokens=np.array(tokens[1:], dtype=np.int64),
                    logprobs=np.array(logprobs[1:], dtype=np.float32),
                    advantages=np.array(advantages[1:], dtype=np.float32),
                    mask=np.array(mask[1:], dtype=np.float32),
                    weights=np.array(weights[1:], dtype=np.float32),
                    strategy=trajectory.strategy,
                )
            )

    for transition in trajectory.transitions:
        observation = list(transition.observation)
        if tokens and observation[: len(tokens)] != tokens:
            finalize()
            tokens, logprobs, advantages, mask, weights = [], [], [], [], []
        delta = observation[len(tokens) :]
        tokens += delta
        logprobs += [0.0] * len(delta)
        advantages += [0.0] * len(delta)
        mask += [0.0] * len(delta)
        weights += [0.0] * len(delta)
        for token, logprob in zip(transition.action, transition.logprobs, strict=True):
            tokens.append(token)
            logprobs.append(logprob)
            advantages.append(advantage)
            mask.append(1.0)
            weights.append(transition.loss_weight)
    finalize()
    return data


def make_trajectories(
    count: int,
    turns: int,
    tokens_per_turn: int,
    action_tokens: int,
    *,
    break_every: int,
    vary_lengths: bool,
    seed: int = 0,
) -> list[Trajectory]:
    """Synthetic trajectories; every ``break_every``-th turn rewrites the history's first token.

    With ``vary_lengths``, episodes end after 1..turns turns (a debate reaching
    consensus early) and each turn's observation delta and action vary in length
    around the given sizes; otherwise every turn has exactly ``tokens_per_turn``.
    """
    rng = np.random.default_rng(seed)
    trajectories = []
    mean_delta = max(tokens_per_turn - action_tokens, 1)
    for _ in range(count):
        sequence: list[int] = []
        transitions = []
        for turn in range(int(rng.integers(1, turns + 1)) if vary_lengths else turns):
            if vary_lengths:
                n_action = int(rng.integers(16, 2 * action_tokens))
                n_delta = int(rng.integers(1, 2 * mean_delta))
            else:
                n_action, n_delta = action_tokens, mean_delta
            observation = sequence + rng.integers(0, 50_000, n_delta).tolist()
            if break_every and turn and turn % break_every == 0:
                observation[0] = 50_001  # a truncated / edited history: not a prefix
            action = rng.integers(0, 50_000, n_action).tolist()
            logprobs = (-rng.exponential(1.0, n_action)).tolist()
            transitions.append(Transition(observation, action, logprobs))
            sequence = observation + action
        trajectories.append(Trajectory(tuple(transitions)))
    return trajectories


def time_assembly(
    convert: Callable[[Trajectory, float], list[Datum]],
    trajectories: list[Trajectory],
    repeats: int,
) -> tuple[float, list[Datum]]:
    """Best-of-``repeats`` seconds to convert every trajectory, and the Datums."""
    best = float("inf")
    data: list[Datum] = []
    for _ in range(repeats):
        start = time.perf_counter()
        data = [d for t in trajectories for d in convert(t, 0.5)]
        best = min(best, time.perf_counter() - start)
    return best, data


def same_data(a: list[Datum], b: list[Datum]) -> bool:
    fields = ("model_input", "target_tokens", "logprobs", "advantages", "mask", "weights")
    pairs = zip(a, b, strict=True) if len(a) == len(b) else iter(())
    return len(a) == len(b) and all(
        np.array_equal(getattr(x, f), getattr(y, f)) for x, y in pairs for f in fields
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--tokens-per-turn", type=int, default=512)
    parser.add_argument("--action-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    print(
        f"{args.trajectories} trajectories x {args.turns} turns x {args.tokens_per_turn} tokens "
        f"({args.action_tokens} sampled per turn); best of {args.repeats}"
    )
    header = (
        f"{'workload':<22}{'assembly':<12}{'datums/s':>12}{'tokens/s':>14}"
        f"{'ms total':>10}{'speedup':>9}"
    )
    print(header)
    print("-" * len(header))
    for workload, break_every in (("all prefix (1/traj)", 0), ("split every 2nd turn", 2)):
        trajectories = make_trajectories(
            args.trajectories,
            args.turns,
            args.tokens_per_turn,
            args.action_tokens,
            break_every=break_every,
            vary_lengths=False,
        )
        base_s, base_data = time_assembly(list_based_trajectory_to_data, trajectories, args.repeats)
        lib_s, lib_data = time_assembly(trajectory_to_data, trajectories, args.repeats)
        if not same_data(base_data, lib_data):
            raise SystemExit("the two assemblies disagree: the benchmark is invalid")
        tokens = sum(len(d) for d in lib_data)
        for name, seconds in (("lists", base_s), ("numpy", lib_s)):
            print(
                f"{workload:<22}{name:<12}{len(lib_data) / seconds:>12,.0f}"
                f"{tokens / seconds:>14,.0f}{seconds * 1e3:>10.1f}{base_s / seconds:>8.2f}x"
            )

    trajectories = make_trajectories(
        args.trajectories,
        args.turns,
        args.tokens_per_turn,
        args.action_tokens,
        break_every=2,
        vary_lengths=True,
    )
    data = [d for t in trajectories for d in trajectory_to_data(t, 0.5)]
    start = time.perf_counter()
    packed = pack_data(data)
    pack_s = time.perf_counter() - start
    start = time.perf_counter()
    padded = pad_data(data)
    pad_s = time.perf_counter() - start
    print()
    lengths = packed.lengths_D
    print(f"variable-length batch: {len(data)} Datums, lengths {lengths.min()}..{lengths.max()}")
    print(f"{'layout':<10}{'tokens processed':>18}{'build ms':>10}{'tokens vs packed':>18}")
    for name, count, seconds in (
        ("packed", packed.num_tokens, pack_s),
        ("padded", padded.num_tokens, pad_s),
    ):
        print(f"{name:<10}{count:>18,}{seconds * 1e3:>10.1f}{count / packed.num_tokens:>17.2f}x")


if __name__ == "__main__":
    main()
