"""The rows a verl run trains on: one per (problem, episode, seat), as ``RLHFDataset`` reads them.

verl (0.9.1) reads a parquet file into ``RLHFDataset``: each row becomes one
call of its agent loop (``agent_name`` names the loop), repeated
``actor_rollout_ref.rollout.n`` times, and every column reaches the loop's
``run(**row)``. For llm-envs a row is one seat of one episode; the loop
(:class:`~baselines.verl.agent_loop.SeatAgentLoop`) plays that seat and meets
the episode's other seats, played by the other rows, by the row's episode key
(:mod:`llm_envs.serve.rendezvous`). The columns:

============  ==============================================================
``data_source``  ``llm_envs/<env>``: verl groups its validation metrics by it
``prompt``       one user message naming the episode and the seat, for verl's
                 tables; the model's prompt is the environment's observation
``agent_name``   the agent loop: ``llm_envs_seat``
``uid``          what is normalized together: the seat's episodes of one problem
``llm_envs``     JSON: the episode key, the seat, every seat of the episode, the
                 episode's settings (``POST /episodes`` fields) and the family seed
``extra_info``   ``index`` (the row), ``split``, ``problem``, ``episode``, ``seat``
``reward_model`` ``{"style": "llm_envs", "ground_truth": ""}``: verl's tables read it;
                 the reward is the environment's, computed by the loop
============  ==============================================================

Rows come episode by episode, each episode's seats next to each other in
the family's seat order, episodes in a seeded random order. A verl run
must keep the seats of an episode in one batch, or they wait for each other
until the seat timeout: ``data.shuffle=False`` and a ``data.train_batch_size``
that is a multiple of the number of seats (the loop refuses other settings).

``uid``: verl 0.9.1's PPO trainer replaces a training row's ``uid`` with a fresh
one before repeating the row ``rollout.n`` times (validation keeps it), so
there a group is the ``n`` episodes one row starts: with one episode per
problem (``episodes_per_problem=1``) that is the seat's episodes of one
problem, which the row's ``uid`` names too.

Example:
    >>> config = VerlDataConfig(
    ...     env="debate", env_kwargs={"num_agents": 3, "max_rounds": 1}, task="arithmetic",
    ...     problems=2, task_kwargs={"num_problems": 10})
    >>> rows = seat_rows(config)
    >>> len(rows), [row["extra_info"]["seat"] for row in rows[:3]]
    (6, ['agent_0', 'agent_1', 'agent_2'])
    >>> json.loads(rows[0]["llm_envs"])["key"] == json.loads(rows[2]["llm_envs"])["key"]
    True
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Sequence
from dataclasses import field
from pathlib import Path
from typing import Any, Final

import numpy as np
from pydantic.dataclasses import dataclass

from baselines.cli import parse_config
from baselines.config import VALIDATION, NonNegativeInt, PositiveFloat, PositiveInt
from llm_envs.registration import make_family
from llm_envs.seeding import derive_seed

__all__ = [
    "AGENT_LOOP_FILE",
    "AGENT_NAME",
    "VerlDataConfig",
    "agent_loop_config",
    "main",
    "seat_rows",
    "write",
]

AGENT_NAME: Final = "llm_envs_seat"
"""The agent loop's name: the rows' ``agent_name``, the config file's ``name``."""
AGENT_LOOP_FILE: Final = "agent_loop.yaml"
"""The agent-loop config file :func:`write` puts beside the rows
(``actor_rollout_ref.rollout.agent.agent_loop_config_path``)."""


@dataclass(frozen=True, kw_only=True, config=VALIDATION)
class VerlDataConfig:
    """Write a verl data set of llm-envs episodes: one row per (problem, episode, seat)."""

    env: str = "debate"
    """the environment family (a registered name, what ``--env`` takes elsewhere)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """its arguments as a JSON object. A seat with several turns is trained as one growing chat,
    so each observation must extend the seat's previous one: ``{"observation_mode": "chat"}`` for
    ``debate``.
    """
    task: str = "default"
    """where its problems come from: one of the family's tasks."""
    task_kwargs: dict[str, Any] = field(default_factory=dict)
    """the task's settings as a JSON object, e.g. ``{"num_problems": 200}`` for ``arithmetic``."""
    problems: PositiveInt = 64
    """how many problems (the family's evaluation problems, from ``first_problem`` on)."""
    first_problem: NonNegativeInt = 0
    """the first problem; keep the training and validation sets apart with it."""
    episodes_per_problem: PositiveInt = 1
    """episodes of each problem in the data set; verl's ``rollout.n`` multiplies them."""
    seed: NonNegativeInt = 0
    """the episodes' seed: problem ``p`` is reset with ``derive_seed(seed, p)``, as the evaluator
    does; also the seed of the episodes' order.
    """
    family_seed: NonNegativeInt = 0
    """the families' seed, which decides which problems there are: the episode server's
    ``--seed``.
    """
    split: str = "train"
    """the data set's name: ``train`` or ``val`` (part of each episode key and ``uid``)."""
    tag: str = "llm_envs"
    """a name for this data set's episodes (part of each key): two runs sharing a server give
    theirs different tags so their seats never meet.
    """
    shuffle: bool = True
    """write the episodes in a seeded random order (each episode's seats stay together)."""
    output_dir: str = "data/llm_envs"
    """where ``<split>.parquet`` and ``agent_loop.yaml`` go."""
    server_url: str | None = None
    """the episode server the seats meet on (``http://HOST:PORT``), written into
    ``agent_loop.yaml``; none: a rendezvous inside verl's one agent-loop worker
    (``actor_rollout_ref.rollout.agent.num_workers=1``).
    """
    seat_timeout: PositiveFloat = 300.0
    """seconds a seat may take to act once its turn begins, for the in-process rendezvous (a
    server has its own ``--seat-timeout``).
    """
    max_turn_tokens: PositiveInt | None = None
    """the most tokens sampled for one turn, written into ``agent_loop.yaml``; none: what is
    left of verl's ``rollout.response_length``.
    """


def seat_rows(config: VerlDataConfig) -> list[dict[str, Any]]:
    """The data set's rows, episode by episode, each episode's seats together (see the module).

    Raises:
        ValueError: an unknown env or settings the family refuses (its
            message), or more problems than the family has.
    """
    family = make_family(
        config.env,
        dict(config.env_kwargs),
        task=config.task,
        seed=config.family_seed,
        task_kwargs=dict(config.task_kwargs),
    )
    available = family.num_eval_problems
    last = config.first_problem + config.problems
    if available is not None and last > available:
        raise ValueError(
            f"--env {config.env} has {available} problems; problems "
            f"{config.first_problem}..{last - 1} were asked for: ask for fewer"
        )
    seats = tuple(family.agents)
    settings = json.dumps(
        [config.env, config.env_kwargs, config.task, config.task_kwargs, config.family_seed],
        sort_keys=True,
        default=str,
    )
    digest = hashlib.sha256(settings.encode()).hexdigest()[:10]
    episodes = [
        (problem, episode)
        for problem in range(config.first_problem, last)
        for episode in range(config.episodes_per_problem)
    ]
    if config.shuffle:
        order = np.random.default_rng([config.seed, 7]).permutation(len(episodes))
        episodes = [episodes[i] for i in order]
    rows: list[dict[str, Any]] = []
    for problem, episode in episodes:
        key = f"{config.tag}/{digest}/{config.split}/problem-{problem}/episode-{episode}"
        request = {
            "env": config.env,
            "env_kwargs": dict(config.env_kwargs),
            "task": config.task,
            "task_kwargs": dict(config.task_kwargs),
            "problem": problem,
            "seed": derive_seed(config.seed, problem),
        }
        for seat in seats:
            uid = f"{config.tag}/{digest}/{config.split}/problem-{problem}/{seat}"
            spec = {
                "key": key,
                "seat": seat,
                "seats": list(seats),
                "episode": request,
                "family_seed": config.family_seed,
            }
            label = (
                f"llm-envs {config.env} ({config.task}), problem {problem}, "
                f"episode {episode}, seat {seat}"
            )
            rows.append(
                {
                    "data_source": f"llm_envs/{config.env}",
                    "prompt": [{"role": "user", "content": label}],
                    "agent_name": AGENT_NAME,
                    "uid": uid,
                    "llm_envs": json.dumps(spec, sort_keys=True),
                    "extra_info": {
                        "index": len(rows),
                        "split": config.split,
                        "problem": problem,
                        "episode": episode,
                        "seat": seat,
                    },
                    "reward_model": {"style": "llm_envs", "ground_truth": ""},
                }
            )
    return rows


def agent_loop_config(
    server_url: str | None = None,
    seat_timeout: float = 300.0,
    max_turn_tokens: int | None = None,
) -> str:
    """The agent-loop config file (YAML): the loop's name, class and settings.

    Example:
        >>> print(agent_loop_config("http://10.0.0.1:8000"))
        - name: llm_envs_seat
          _target_: baselines.verl.agent_loop.SeatAgentLoop
          server_url: "http://10.0.0.1:8000"
          seat_timeout: 300.0
          max_turn_tokens: null
        <BLANKLINE>
    """
    url = json.dumps(server_url) if server_url is not None else "null"
    turn = int(max_turn_tokens) if max_turn_tokens is not None else "null"
    return (
        f"- name: {AGENT_NAME}\n"
        "  _target_: baselines.verl.agent_loop.SeatAgentLoop\n"
        f"  server_url: {url}\n"
        f"  seat_timeout: {float(seat_timeout)}\n"
        f"  max_turn_tokens: {turn}\n"
    )


def write(
    config: VerlDataConfig, rows: Sequence[dict[str, Any]] | None = None
) -> tuple[Path, Path]:
    """Write ``<split>.parquet`` and ``agent_loop.yaml`` in ``output_dir``; return both paths.

    ``rows``: :func:`seat_rows` of ``config``, when the caller has them already.
    """
    from datasets import Dataset

    rows = seat_rows(config) if rows is None else rows
    folder = Path(config.output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / f"{config.split}.parquet"
    Dataset.from_list(list(rows)).to_parquet(str(data))
    loops = folder / AGENT_LOOP_FILE
    loops.write_text(
        agent_loop_config(config.server_url, config.seat_timeout, config.max_turn_tokens)
    )
    return data, loops


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m baselines.verl.dataset``: write the rows and the loop config; say what to set."""
    config = parse_config(VerlDataConfig, argv, prog=_PROG)
    rows = seat_rows(config)
    data, loops = write(config, rows)
    seats = len(json.loads(rows[0]["llm_envs"])["seats"])
    print(f"wrote {len(rows)} rows ({len(rows) // seats} episodes of {seats} seats) to {data}")
    print(f"wrote {loops}: actor_rollout_ref.rollout.agent.agent_loop_config_path={loops}")
    print(
        f"verl settings it needs: data.shuffle=False, data.train_batch_size a multiple of {seats}"
        + ("" if config.server_url else ", actor_rollout_ref.rollout.agent.num_workers=1")
    )
    return 0


_PROG: Final = "python -m baselines.verl.dataset"

if __name__ == "__main__":
    sys.exit(main())
