"""One seat of any registered family as a ``verifiers`` 0.4 environment.

verifiers 0.4.0 (``import verifiers.v1 as vf``) builds an environment from
plugins it imports by id: a module that exports, in ``__all__``, one
``vf.Taskset`` subclass (the rows), optionally one ``vf.Env`` subclass (how a
row becomes an episode) and one ``vf.Harness`` subclass (the program that
talks to the model). This module is such a plugin:

* :class:`SeatTaskset` gives one row per evaluation problem of a family
  (:func:`~llm_envs.registration.make_family`), for one seat; its settings are
  :class:`SeatTasksetConfig` (``--env.taskset.env debate --env.taskset.seat
  agent_1 ...``).
* :class:`SeatEnv` plays a row's episode through :class:`~llm_envs.seats.SeatView`
  with verifiers' multi-agent API: an ``Env`` whose roles are
  ``AgentConfig`` fields, each driven turn by turn with
  ``agent.interaction(task)``. The ``player`` role plays the seat; the other
  seats are played by the family's reference players
  (``others="reference"``, the default) or by the ``opponents`` role
  (``others="model"``: one interaction, and one trace, per seat, untrained
  unless ``train_opponents``). Every observation's messages that the seat
  has not seen yet become its next user turn; its reply is its action as it
  stands; its return (every reward the environment paid it) is recorded on
  its trace as the reward ``seat_return``, as verifiers' own TextArena env
  records a game's outcome. A seat the model played has its return computed
  the same way, by replaying the episode's texts through its own
  ``SeatView``.
* :class:`ChatHarness` is the program: one chat completion per segment, made
  in process through the rollout's interception endpoint (verifiers' built-in
  chat loop instead installs a PEP 723 script with ``uv`` per machine).

verifiers imports a plugin by a top-level module name, so it finds this one
as :data:`PLUGIN` (``llm_envs_verifiers``): :func:`write_plugin` writes a
module of that name that re-exports this one; :func:`load_environment`
registers the name in-process.

Nothing here parses environment text, names a family, or imports torch or
``baselines``; importing :mod:`llm_envs` never imports this module (it needs
``pip install verifiers==0.4.0``). Episodes run their ``SeatView`` in a
worker thread, so that a seat the model plays can wait for its reply there.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import itertools
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, Literal

import httpx
import verifiers.v1 as vf
from pydantic import Field
from verifiers.v1.types import content_text

from llm_envs.contract import TRAINING_MESSAGES
from llm_envs.family import Agent, Family
from llm_envs.registration import make_family
from llm_envs.seats import SeatView, chat_messages, family_seat, unseen_messages
from llm_envs.seeding import derive_seed

__all__ = [
    "PLUGIN",
    "REWARD",
    "ChatHarness",
    "ChatHarnessConfig",
    "SeatData",
    "SeatEnv",
    "SeatEnvConfig",
    "SeatTask",
    "SeatTaskset",
    "SeatTasksetConfig",
    "load_environment",
    "write_plugin",
]

PLUGIN = "llm_envs_verifiers"
"""The id verifiers imports this plugin by (``vf-eval llm_envs_verifiers ...``)."""

REWARD = "seat_return"
"""The name of the reward each seat's trace carries: its return in the episode."""

# ---------------------------------------------------------------------- the rows


class SeatTasksetConfig(vf.TasksetConfig):
    """Which family, seat and problems: ``--env.taskset.<field>`` on verifiers' command line.

    The field docstrings are verifiers' ``--help`` text: plain words.
    """

    env: str = "debate"
    """The registered family, as llm-envs' --env names it (debate, textarena...)."""
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """The environment's arguments (JSON on the command line)."""
    env_task: str = "default"
    """The family's question or problem source, llm-envs' --task (verifiers' own task
    field is its per-row task config)."""
    task_kwargs: dict[str, Any] = Field(default_factory=dict)
    """The problem source's settings."""
    seat: str = "agent_0"
    """The agent the player role plays."""
    seed: int = 0
    """The family's seed; problem p resets with derive_seed(seed, p), as llm-envs' evaluator."""
    num_problems: int | None = Field(None, ge=1)
    """Rows, from first_problem on; unset: all the problems the family counts, or endless
    (bound the run with -n)."""
    first_problem: int = Field(0, ge=0)
    """The first problem (the family's evaluation problems, from 0)."""


class SeatData(vf.TaskData):
    """One row: a problem of the family, for one seat (no prompt: the episode opens it)."""

    problem: int
    seat: str


class SeatTask(vf.Task[SeatData, vf.State, vf.TaskConfig]):
    """A row's task; its reward is recorded by :class:`SeatEnv` (the seat's return)."""


class SeatTaskset(vf.Taskset[SeatTask, SeatTasksetConfig]):
    """The family's evaluation problems from ``first_problem`` on, one row each, for one seat.

    ``num_problems`` of them, else all that the family counts, else endless
    (verifiers then asks for ``-n``). The family is built once, here: a bad
    setting fails before any rollout.

    Raises:
        ValueError: an unknown family or a bad setting (the family's message),
            a seat the family does not have, or more problems than it has.
    """

    def __init__(self, config: SeatTasksetConfig) -> None:
        super().__init__(config)
        self.family: Family = make_family(
            config.env,
            dict(config.env_kwargs),
            task=config.env_task,
            seed=config.seed,
            task_kwargs=dict(config.task_kwargs),
        )
        if config.seat not in self.family.agents:
            raise ValueError(
                f"seat {config.seat!r} is not an agent of --env {config.env}; "
                f"choose one of {list(self.family.agents)}"
            )
        available = self.family.num_eval_problems
        first, count = config.first_problem, config.num_problems
        if available is not None and first + (count or 1) > available:
            raise ValueError(
                f"--env {config.env} has {available} problems, asked for problems from "
                f"{first}{'' if count is None else f' to {first + count - 1}'}; ask for fewer"
            )
        self.stop = first + count if count is not None else available
        self.INFINITE = self.stop is None  # verifiers then asks for -n

    def load(self) -> Iterator[SeatTask]:
        """One row per problem: its index and the seat, titled ``<env>#<problem>/<seat>``."""
        cfg = self.config
        problems: Iterable[int] = (
            itertools.count(cfg.first_problem)
            if self.stop is None
            else range(cfg.first_problem, self.stop)
        )
        for problem in problems:
            data = SeatData(name=f"{cfg.env}#{problem}/{cfg.seat}", problem=problem, seat=cfg.seat)
            yield SeatTask(data, cfg.task)


# ---------------------------------------------------------------------- the episode


class SeatEnvConfig(vf.EnvConfig):
    """Who plays: ``--env.player.*``, ``--env.opponents.*``, ``--env.others``.

    The field docstrings are verifiers' ``--help`` text: plain words.
    """

    player: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())
    """The taskset's seat: the policy under evaluation or training."""
    opponents: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())
    """Every other seat when others is model: one interaction, and one trace, per seat."""
    others: Literal["reference", "model"] = "reference"
    """Who plays the other seats: the family's reference players, or the opponents role."""
    train_opponents: bool = False
    """Whether the opponents' traces train the policy (self-play) or only play."""


class SeatEnv(vf.Env[SeatEnvConfig]):
    """A row's episode: the seat's :class:`~llm_envs.seats.SeatView`, driven turn by turn.

    Each trace of a model-played seat gets ``info["seat"]`` and
    ``info["problem"]``, the metrics ``turns`` (replies the model gave) and
    ``unplayed_turns`` (turns played as the empty string after the model's
    run had ended: a turn limit, an error), and the reward :data:`REWARD`.
    The seat's trace also holds the environment's record of the episode,
    ``info["episode_record"]``: every seat's turns, the reference players'
    included.
    """

    async def setup(self, agents: Any) -> None:
        """The opponents' traces train only with ``train_opponents``."""
        agents.opponents.trainable = self.config.train_opponents

    async def run(self, task: Any, agents: Any) -> None:
        """Play the row's problem; then record each model-played seat's return on its trace."""
        taskset: SeatTaskset = self.taskset
        family, seat, problem = taskset.family, task.data.seat, task.data.problem
        seed = derive_seed(taskset.config.seed, problem)
        loop = asyncio.get_running_loop()
        # The episode's own thread: waiting there for a model-played seat's reply holds
        # no thread the event loop needs. Not waited for on the way out: after a
        # cancellation it may still wait for a reply its closed interaction refuses.
        worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llm-envs-seat")
        try:
            async with contextlib.AsyncExitStack() as stack:
                limit = max(1, family.max_agent_turns) + 1

                async def open_seat(agent: Any, name: str) -> _ModelSeat:
                    data = task.data.model_copy(
                        update={"seat": name, "name": f"{taskset.config.env}#{problem}/{name}"}
                    )
                    interaction = await stack.enter_async_context(
                        agent.interaction(SeatTask(data, task.config))
                    )
                    interaction.trace.info.update(seat=name, problem=problem)
                    return _ModelSeat(name, interaction, loop, limit)

                opponents: dict[str, _ModelSeat] = {}
                if self.config.others == "model":
                    for other in family.agents:
                        if other != seat:
                            opponents[other] = await open_seat(agents.opponents, other)
                player = await open_seat(agents.player, seat)
                view = await self._play(player, opponents, problem, seed, loop, worker)
            # The interactions are closed and their traces final: they take their rewards.
            player.trace.record_reward(REWARD, view.episode_return)
            player.trace.info["episode_record"] = view.record()
            texts = {name: s.texts for name, s in {**opponents, seat: player}.items()}
            for name, opponent in opponents.items():
                opponent.trace.record_reward(
                    REWARD, _replayed_return(family, name, problem, seed, texts)
                )
            for model_seat in (player, *opponents.values()):
                model_seat.trace.record_metrics(
                    {"turns": model_seat.turns, "unplayed_turns": model_seat.unplayed_turns}
                )
        finally:
            worker.shutdown(wait=False, cancel_futures=True)

    async def _play(
        self,
        player: _ModelSeat,
        opponents: Mapping[str, _ModelSeat],
        problem: int,
        seed: int,
        loop: asyncio.AbstractEventLoop,
        worker: ThreadPoolExecutor,
    ) -> SeatView:
        """The episode, the view's steps on the worker thread; returns the finished view."""
        family = self.taskset.family
        players: Mapping[str, Agent] | None = dict(opponents)
        if self.config.others == "reference" and tuple(family.agents) != (player.name,):
            players = None  # the family's reference players, fresh for each episode
        view, reset_seed, options = family_seat(
            family, player.name, problem=problem, seed=seed, others=players
        )
        observation, info = await loop.run_in_executor(
            worker, partial(view.reset, seed=reset_seed, options=options)
        )
        if view.done:
            raise ValueError(
                f"problem {problem} ends before {player.name} acts: there is nothing to "
                "play; choose another seat or other problems"
            )
        if TRAINING_MESSAGES in info:
            raise ValueError(
                f"{player.name}'s first turn trains on another context than it samples on "
                "(info['training_messages'], the context swap), which a verifiers trace "
                "cannot represent: it holds the sampled conversation; choose settings "
                "without a swap at the first turn"
            )
        while not view.done:
            text = await player.reply(observation)
            observation, *_ = await loop.run_in_executor(worker, view.step, text)
        return view


class _ModelSeat:
    """A seat the model plays through one verifiers interaction.

    Each turn sends the observation's messages past the longest prefix it
    shares with the seat's previous observation and reply, so the model's
    conversation is the environment's chat where that chat grows; where the
    environment rebuilds its prompt each turn, the model keeps its own
    history and gets the rebuilt part. Called from the episode's worker
    thread (``SeatView`` asks for another seat's move there), it waits for
    the reply on the event loop.
    """

    def __init__(
        self, name: str, interaction: Any, loop: asyncio.AbstractEventLoop, limit: int
    ) -> None:
        self.name = name
        self.interaction = interaction
        self.loop = loop
        self.limit = limit
        self.texts: list[str] = []
        self.turns = 0
        self.unplayed_turns = 0
        self._seen: list[dict[str, str]] = []
        self._over = False

    @property
    def trace(self) -> Any:
        """The seat's verifiers trace."""
        return self.interaction.trace

    def __call__(self, observation: Any, info: Mapping[str, Any], /) -> str:
        """The seat's move as another seat's player (:class:`~llm_envs.family.Agent`)."""
        return asyncio.run_coroutine_threadsafe(self.reply(observation), self.loop).result()

    async def reply(self, observation: Any) -> str:
        """The model's reply to the observation, exactly as it came; ``""`` once its run ended."""
        if len(self.texts) >= self.limit:
            raise RuntimeError(
                f"{self.name} was asked for turn {len(self.texts) + 1} and the episode goes "
                f"on, past the family's max_agent_turns: the environment must end its episodes"
            )
        messages = chat_messages(observation)
        before = (
            [*self._seen, {"role": "assistant", "content": self.texts[-1]}] if self.texts else []
        )
        new = unseen_messages(before, messages)
        text = ""
        if not self._over:
            segment = await self.interaction.turn(new)
            if segment.terminated:
                self._over = True
            else:
                text = _reply_text(segment.messages)
        if self._over:
            self.unplayed_turns += 1
        else:
            self.turns += 1
        self._seen = messages
        self.texts.append(text)
        return text


class _Replay:
    """A player that says a seat's recorded texts again, in order."""

    def __init__(self, name: str, texts: Sequence[str]) -> None:
        self.name = name
        self.texts = iter(texts)

    def __call__(self, observation: Any, info: Mapping[str, Any], /) -> str:
        try:
            return next(self.texts)
        except StopIteration:
            raise RuntimeError(
                f"the replay of {self.name} ran out of texts: the episode did not repeat"
            ) from None


def _replayed_return(
    family: Family, seat: str, problem: int, seed: int, texts: Mapping[str, Sequence[str]]
) -> float:
    """A seat's return in the episode these texts make: what its own ``SeatView`` is paid."""
    others: dict[str, Agent] = {a: _Replay(a, t) for a, t in texts.items() if a != seat}
    view, reset_seed, options = family_seat(family, seat, problem=problem, seed=seed, others=others)
    view.reset(seed=reset_seed, options=options)
    for text in texts[seat]:
        view.step(text)
    if not view.done:
        raise RuntimeError(f"the replay of {seat}'s episode did not end where it ended")
    return view.episode_return


def _reply_text(messages: Sequence[Any]) -> str:
    """The segment's last assistant text, untouched (``Segment.last_reply`` strips it)."""
    for message in reversed(messages):
        if message.role == "assistant":
            return str(message.content or "")
    return ""


# ---------------------------------------------------------------------- the program


class ChatHarnessConfig(vf.HarnessConfig):
    """The chat harness has no settings of its own."""


class ChatHarness(vf.Harness[ChatHarnessConfig]):
    """One chat completion per segment, in process, through the rollout's interception.

    verifiers records the call on the trace (the interception is the
    contract, not the process); the request holds the conversation alone:
    the run's model and ``--sampling.*`` settings are imposed on it there.
    """

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: Any,
        trace: Any,
        runtime: Any,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: Any,
    ) -> Any:
        """Ask the model for the next message of the conversation in ``data``."""
        system, prompt = self.resolve_prompt(data)
        messages = [{"role": "system", "content": system}] if system else []
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        else:
            messages += [_wire(m) for m in prompt or []]
        try:
            async with httpx.AsyncClient(timeout=None) as client:
                response = await client.post(
                    f"{endpoint.rstrip('/')}/chat/completions",
                    json={"model": ctx.model, "messages": messages},
                    headers={"Authorization": f"Bearer {secret}"},
                )
        except httpx.HTTPError as error:
            return vf.ProgramResult(exit_code=1, stdout="", stderr=f"model call failed: {error!r}")
        if response.is_error:
            return vf.ProgramResult(
                exit_code=1,
                stdout="",
                stderr=f"model call failed: {response.status_code} {response.text[-2000:]}",
            )
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")


def _wire(message: Any) -> dict[str, str]:
    """A typed verifiers message as a plain chat message: its role and its text."""
    return {"role": str(message.role), "content": content_text(message.content)}


# ---------------------------------------------------------------------- entry points


def write_plugin(directory: str | Path) -> Path:
    """Write the module verifiers imports this plugin by, ``<directory>/llm_envs_verifiers.py``.

    Put ``directory`` on ``PYTHONPATH`` for ``vf-eval llm_envs_verifiers ...``.

    Example:
        >>> import tempfile
        >>> write_plugin(tempfile.mkdtemp()).name
        'llm_envs_verifiers.py'
    """
    path = Path(directory) / f"{PLUGIN}.py"
    path.write_text(
        '"""llm-envs\' verifiers plugin (llm_envs.bridges.verifiers)."""\n\n'
        "from llm_envs.bridges.verifiers import *  # noqa: F403\n"
        "from llm_envs.bridges.verifiers import __all__  # noqa: F401\n",
        encoding="utf-8",
    )
    return path


def load_environment(
    env: str = "debate",
    *,
    seat: str = "agent_0",
    env_kwargs: Mapping[str, Any] | None = None,
    task: str = "default",
    task_kwargs: Mapping[str, Any] | None = None,
    num_problems: int | None = None,
    first_problem: int = 0,
    seed: int = 0,
    others: Literal["reference", "model"] = "reference",
    **env_config: Any,
) -> Any:
    """The verifiers environment (``vf.Env``) of one seat of a registered family.

    Arguments are :class:`SeatTasksetConfig`'s (``task`` is its ``env_task``)
    and :class:`SeatEnvConfig`'s (``others``, and ``env_config``: ``player``,
    ``opponents``, ``train_opponents``, verifiers' env settings). The plugin
    name :data:`PLUGIN` is registered in this process when no module of that
    name is installed.

    Example (``pip install verifiers==0.4.0``)::

        env = load_environment("debate", seat="agent_1", task="arithmetic",
                               env_kwargs={"num_agents": 3, "max_rounds": 2})
    """
    if PLUGIN not in sys.modules and importlib.util.find_spec(PLUGIN) is None:
        sys.modules[PLUGIN] = sys.modules[__name__]
    taskset = SeatTasksetConfig(
        id=PLUGIN,
        env=env,
        env_kwargs=dict(env_kwargs or {}),
        env_task=task,
        task_kwargs=dict(task_kwargs or {}),
        seat=seat,
        seed=seed,
        num_problems=num_problems,
        first_problem=first_problem,
    )
    return vf.load_environment(SeatEnvConfig(taskset=taskset, others=others, **env_config))
