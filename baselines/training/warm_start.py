"""A supervised warm start: imitate a scripted teacher's episodes before reinforcement learning.

A small model that never writes an environment's output contract gets the same
reward for every answer, and a policy gradient has nothing to follow (the
SmolLM2-135M debate: every answer a parse error, reward flat at -1/3). A few
steps of supervised fine-tuning on episodes played by a scripted teacher
(a family's scripted agents, e.g. :mod:`llm_envs.debate.agents`) teach the
format; reinforcement learning then takes over. The teacher plays the
environment for real, so its Datums are built by the same pipeline as the
trained policy's (observations are context, its answers the targets), and
nothing here reads the environment's text.

The loss is the mean negative log-likelihood of the teacher's action tokens
(each weighted by the environment's ``loss_weight``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch

from baselines.data.datums import trajectory_to_data
from baselines.types import Datum, TrajectoryGroup

__all__ = ["demonstration_data", "imitation_loss", "step_batches"]


def demonstration_data(groups: Sequence[TrajectoryGroup]) -> list[Datum]:
    """Every trajectory of the teacher's episodes as Datums to imitate (advantage 1).

    A Datum whose every token weighs 0 (turns the env masked) teaches
    nothing and is left out.

    Example:
        >>> from baselines.types import Trajectory, Transition
        >>> turn = Transition([1, 2], [3, 4], [0.0, 0.0])
        >>> group = TrajectoryGroup((Trajectory((turn,)),), (0.0,))
        >>> [d] = demonstration_data([group])
        >>> d.target_tokens.tolist(), d.mask.tolist()
        ([2, 3, 4], [0.0, 1.0, 1.0])
    """
    return [
        datum
        for group in groups
        for trajectory in group.trajectories_G
        for datum in trajectory_to_data(trajectory, advantage=1.0)
        if float(datum.weights.sum()) > 0
    ]


def imitation_loss(logprobs: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """The summed negative log-likelihood of the weighted tokens (divide by their total weight).

    Example:
        >>> imitation_loss(torch.tensor([-1.0, -2.0, -3.0]), torch.tensor([0.0, 1.0, 0.5]))
        tensor(3.5000)
    """
    return -(logprobs * weights).sum()


def step_batches(count: int, per_step: int, steps: int) -> Iterator[list[int]]:
    """The Datum indices of each warm-start step: consecutive slices, wrapping around.

    Every Datum is used once before any is used twice.

    Example:
        >>> list(step_batches(5, 2, 4))
        [[0, 1], [2, 3], [4, 0], [1, 2]]
    """
    if count < 1:
        raise ValueError("the teacher's episodes gave no Datums to imitate")
    for step in range(steps):
        start = step * per_step
        yield [(start + k) % count for k in range(min(per_step, count))]
