"""The IS trainer's warm start: supervised steps on a scripted teacher's games.

Before the first iteration, :func:`warm_start` plays ``warm_start_groups``
episodes with the environment family's teacher and takes ``warm_start_steps``
optimizer steps of imitation on its answers, asking the learner's learning-rate
schedule for ``warm_start_learning_rate`` on those first steps
(see :mod:`baselines.training.warm_start` for the data and the loss).
"""

from __future__ import annotations

import time
from typing import Any

import torch

from baselines.env_families import batch_of, derive_seed
from baselines.is_trainer.config import TEACHER_FIELDS, WarmStartSettings
from baselines.is_trainer.learner import Learner
from baselines.progress import phase, say
from baselines.training.warm_start import demonstration_data, imitation_loss, step_batches
from llm_envs.capabilities import Teacher, require

__all__ = ["warm_start"]


def _imitation(
    training_logprobs: torch.Tensor,
    sampling_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    weights: torch.Tensor,
) -> torch.Tensor:
    """The warm start's loss in the signature of the policy losses (it needs no sampler)."""
    return imitation_loss(training_logprobs, weights)


def warm_start(learner: Learner, family: Any, settings: WarmStartSettings) -> dict[str, float]:
    """Imitate the environment family's scripted teacher before the first iteration.

    ``settings.steps`` optimizer steps of supervised fine-tuning on
    ``settings.groups`` episodes played by the teacher, at
    ``settings.learning_rate`` (the learner's schedule for its first steps);
    see :mod:`baselines.training.warm_start`.
    """
    from baselines.samplers.scripted import ScriptedPolicy

    start = time.perf_counter()
    tell = learner.show_progress
    if tell:
        say(
            f"warm start: playing {settings.groups} teacher episodes, then "
            f"{settings.steps} imitation steps"
        )
    first = 1_000_000_000  # group indices of their own, far from the training ones
    indices = list(range(first, first + settings.groups))
    # A family's teacher takes the options it lists (the config refuses the others).
    family = require(family, Teacher, by="a warm start imitates a scripted teacher")
    options = family.teacher_options
    asked = {
        option: getattr(settings, option) for _, option, _ in TEACHER_FIELDS if option in options
    }
    plan, teachers = family.demonstrations(
        indices, derive_seed(learner.config.seed, first), **asked
    )
    batch = batch_of(plan)
    teacher = ScriptedPolicy(teachers, tokenizer=learner.tokenizer)
    with phase("warm start"):
        played = learner.play(batch, teacher, first, "teacher play")
    data = demonstration_data(batch.to_groups(played))
    timings = {"time/forward_backward": 0.0, "time/optimizer_step": 0.0, "time/refresh": 0.0}
    learner.schedule_first_steps(settings.learning_rate, settings.steps)
    losses = []
    steps = step_batches(len(data), settings.datums, settings.steps)
    every = max(1, settings.steps // 8)  # a line every eighth of the steps
    with phase("warm start", total=settings.steps, unit="steps") as progress:
        for step, chunk in enumerate(steps, 1):
            weight = sum(float(data[i].weights.sum()) for i in chunk)
            loss, _, _ = learner.step(
                data, chunk, max(weight, 1.0), timings, loss_fn=_imitation, refresh=False
            )
            losses.append(loss)
            progress.advance()
            progress.note = f"loss {loss:.3f}"
            if tell and step % every == 0 and step < settings.steps:
                say(
                    f"warm start: step {step}/{settings.steps}, loss {loss:.3f} "
                    f"({time.perf_counter() - start:.0f} s)"
                )
    learner.refresh_sampler()
    seconds = time.perf_counter() - start
    if tell:
        say(
            f"warm start: {len(losses)} steps on {len(data)} teacher answers, "
            f"loss {losses[0]:.3f} -> {losses[-1]:.3f} ({seconds:.0f} s)"
        )
    return {
        "warm_start/loss_first": losses[0],
        "warm_start/loss_last": losses[-1],
        "warm_start/steps": float(len(losses)),
        "warm_start/datums": float(len(data)),
        "time/warm_start": seconds,
    }
