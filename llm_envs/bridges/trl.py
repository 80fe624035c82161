"""One seat of any registered family as a tool-using environment for TRL's ``environment_factory``.

TRL 1.16's ``GRPOTrainer(environment_factory=f)`` drives a single policy that
talks to an environment through tool calls:

* ``f()`` is called with no argument, once to probe the class and then once for
  every rollout slot of a batch (instances are pooled and reused, each
  ``reset`` between two rollouts);
* before generation, ``env.reset(**row)`` gets the data-set row of the rollout
  (every column, ``prompt`` included); a string it returns is appended to the
  prompt's last message, ``None`` leaves the prompt as it is;
* every public method other than ``reset`` and ``get_reward`` is a tool: its
  name, type hints and Google docstring become the schema the chat template
  shows the model, and its return value (as ``str``) is the tool message the
  model reads next. A tool that raises gives the model ``{"error": ...}``;
* ``env.get_reward()`` (no argument) is called once per finished rollout, and
  its float is a reward column named after the class
  (``rewards/SeatEnvironment/mean`` in the logs), weight 1.

Two factories, one seat each, share :class:`SeatTool` (the seat's chat, the
tool :meth:`SeatTool.take_turn`, which returns what the seat sees next, and
the return that :meth:`SeatTool.get_reward` gives):

* :class:`SeatEnvironmentFactory` plays in this process: it builds the family
  once (:func:`~llm_envs.registration.make_family`) and each
  :class:`SeatEnvironment` plays the family's problem ``p`` through
  :func:`llm_envs.seats.family_seat`, the family's reference players (or
  players you give) in the other seats. :meth:`SeatEnvironmentFactory.dataset`
  gives one row per problem: its index and, as the prompt, the seat's first
  observation.
* :class:`RemoteSeatEnvironmentFactory` is TRL's OpenEnv path: each
  :class:`RemoteSeatEnvironment` holds one OpenEnv ``GenericEnvClient``
  session on an episode server (``llm-envs serve``, docs/serve.md; its
  ``/openenv`` route is :mod:`llm_envs.bridges.openenv`), where the family's
  reference players take the other seats and the server keeps the turn
  order, the rewards and the records. Against a server started with
  ``--seed S`` and a factory with ``seed=S``, an episode is the one the
  in-process factory plays, move for move. A server beyond loopback takes
  requests with its token only: pass it as ``token``, or set
  ``LLM_ENVS_SERVE_TOKEN``; OpenEnv's client sets no headers, so the token
  rides in the socket URL's userinfo (``ws://token:T@host``), which its
  WebSocket library sends as an ``Authorization`` header.

TRL's token-level bridge, the ``rollout_func`` that returns token ids, is the
GRPO trainer's own (:mod:`baselines.grpo.rollout_func`). Nothing here parses
environment text: the model's tool argument is the seat's action as it
stands, and observations and rewards are the environment's. Nothing here
names a family either, nor imports TRL.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from llm_envs.capabilities import ReferencePlayers, require
from llm_envs.contract import TRAINING_MESSAGES
from llm_envs.family import Agent, Family
from llm_envs.registration import make_family
from llm_envs.seats import SeatView, chat_messages, family_seat, unseen_messages
from llm_envs.seeding import derive_seed

__all__ = [
    "EPISODE_OVER",
    "RemoteSeatEnvironment",
    "RemoteSeatEnvironmentFactory",
    "SeatEnvironment",
    "SeatEnvironmentFactory",
    "SeatTool",
    "refuse_context_swap",
]

EPISODE_OVER = "The episode is over."
"""The last line of the tool result that ends the seat's episode."""

Players = Callable[[], Mapping[str, Agent]]
"""A function that returns fresh players for the other seats: called once per episode."""


def refuse_context_swap(agent: str, first_info: Mapping[str, Any]) -> None:
    """Refuse an agent whose first turn is to be trained on another context than its prompt.

    TRL trains a completion on the prompt it was sampled from: a first turn
    with ``training_messages`` (the context swap, e.g. a hint that the trained
    context leaves out) would be trained with the help in context, which is
    not what the environment asks for. A later turn's swap (attempt 2 after
    feedback) is trained on its sampling context, feedback included, as
    ordinary multi-turn RL (docs/trl_grpo.md).

    Raises:
        ValueError: ``first_info`` holds ``training_messages``; the message
            points to the importance-sampling trainer.
    """
    if TRAINING_MESSAGES in first_info:
        strategy = first_info.get("strategy")
        what = f" (strategy {strategy!r})" if strategy else ""
        raise ValueError(
            f"{agent}'s first turn{what} trains on another context than it samples on (the "
            "context swap, info['training_messages']), which TRL's GRPOTrainer cannot "
            "represent: it trains a completion on its own prompt. Choose settings without a "
            "swap at the first turn, or train with the importance-sampling trainer "
            "(baselines.is_trainer), which trains on the training context"
        )


class SeatTool:
    """What TRL sees of one seat's episode: ``reset``, the tool ``take_turn``, ``get_reward``.

    The chat the seat sees, its turns and its return are kept here, whatever
    plays the episode: :class:`SeatEnvironment` plays it in this process,
    :class:`RemoteSeatEnvironment` on an episode server.
    A subclass says how an episode starts (``_start``) and steps (``_step``),
    and whether it is over (``done``).

    Its only public methods are TRL's (TRL exposes every other public method
    as a tool too); what a logger reads is in properties.

    Args:
        seat: the agent the model plays.
    """

    def __init__(self, seat: str) -> None:
        self.seat = seat
        self._problem: int | None = None
        self._messages: list[dict[str, str]] = []
        self._return = 0.0
        self._turns = 0
        self._unplayed_turns = 0

    # ------------------------------------------------------------------ TRL's interface

    def reset(self, problem: int | None = None, prompt: Any = None, **row: Any) -> None:
        """Start the row's problem; play the other seats until this one must act.

        TRL passes the data-set row as keyword arguments. The row's ``prompt``
        must be the seat's first observation, as the factory's ``dataset``
        writes it, so nothing is appended to it (``None`` is returned); other
        columns are ignored.

        Args:
            problem: the family's evaluation problem to play.
            prompt: the row's prompt, checked against the first observation.
            **row: other columns of the row (ignored).

        Raises:
            ValueError: no ``problem`` column, a prompt that is not the seat's
                first observation (a data set built with other settings), an
                episode that ends before the seat acts, or a first turn that
                trains on another context than it shows
                (:func:`refuse_context_swap`).
        """
        if problem is None:
            raise ValueError(
                "the data-set row has no 'problem' column: build the data set with "
                "the factory's dataset(num_problems), one row per problem"
            )
        messages = self._start(int(problem))
        if prompt is not None and _plain(prompt) != messages:
            raise ValueError(
                f"the row's prompt is not {self.seat}'s first observation of problem {problem}: "
                "build the data set with the factory that makes these environments "
                "(its dataset method), with the same env, task, seat and seed"
            )
        self._problem, self._messages = int(problem), messages
        self._return, self._turns, self._unplayed_turns = 0.0, 0, 0
        return None

    def take_turn(self, text: str) -> str:
        """Take your turn: send your reply to the latest message, written as its instructions ask.

        The text is your whole move, read exactly as you write it: follow the
        format the instructions ask for; anything else is scored as it stands.

        Args:
            text: your complete reply for this turn, in the format the instructions ask for.

        Returns:
            What you see next: the new messages for your next turn, or the end of the episode.
        """
        self._require_episode()
        if self.done:
            raise RuntimeError(f"{EPISODE_OVER} There are no more turns to take.")
        before = [*self._messages, {"role": "assistant", "content": text}]
        messages, reward = self._step(text)
        self._turns += 1
        self._return += reward
        self._messages = messages
        parts = [m["content"] for m in unseen_messages(before, messages)]
        if self.done:
            parts.append(EPISODE_OVER)
        return "\n\n".join(parts)

    def get_reward(self) -> float:
        """The seat's return: every reward the environment paid it in the episode.

        A rollout can stop before the seat's episode does (the model answered
        without calling the tool, or TRL's ``max_tool_calling_iterations`` or
        ``max_completion_length`` cut it short). The seat then said nothing:
        its remaining turns are played as the empty string, and the
        environment scores that as it scores any text.

        Raises:
            RuntimeError: before :meth:`reset`, or an environment that keeps
                asking for turns past the family's ``max_agent_turns``.
        """
        self._require_episode()
        limit = max(1, self._max_turns()) + 1
        while not self.done:
            if self._turns + self._unplayed_turns >= limit:
                raise RuntimeError(
                    f"{self.seat} has taken {self._turns + self._unplayed_turns} turns of problem "
                    f"{self._problem} and the episode goes on, past the family's max_agent_turns "
                    f"({self._max_turns()}): the environment must end its episodes"
                )
            _, reward = self._step("")
            self._unplayed_turns += 1
            self._return += reward
        return self._return

    # ------------------------------------------------------------------ for loggers

    @property
    def problem(self) -> int | None:
        """The problem of the current episode (None before the first reset)."""
        return self._problem

    @property
    def turns(self) -> int:
        """The seat's turns taken through the tool in the current episode."""
        return self._turns

    @property
    def unplayed_turns(self) -> int:
        """The seat's turns :meth:`get_reward` played as the empty string (the model's silence)."""
        return self._unplayed_turns

    @property
    def done(self) -> bool:
        """Whether the seat's episode is over (True before the first reset)."""
        raise NotImplementedError

    @property
    def episode_return(self) -> float:
        """What the environment has paid the seat so far in this episode."""
        return self._return

    # ------------------------------------------------------------------ what a subclass says

    def _start(self, problem: int) -> list[dict[str, str]]:
        """Reset the seat's episode of ``problem``; return its first observation's chat.

        Raises ValueError where the episode ends before the seat acts.
        """
        raise NotImplementedError

    def _step(self, text: str) -> tuple[list[dict[str, str]], float]:
        """Act for the seat; return the chat it sees next and what it was paid."""
        raise NotImplementedError

    def _max_turns(self) -> int:
        """The most turns the seat takes in an episode (the family's ``max_agent_turns``)."""
        raise NotImplementedError

    def _require_episode(self) -> None:
        if self._problem is None:
            raise RuntimeError("call reset(problem=...) before taking a turn or asking the reward")


class SeatEnvironment(SeatTool):
    """One seat of a family's episode, played in this process by the model through one tool.

    Built by :class:`SeatEnvironmentFactory` (TRL calls it with no argument);
    the seat's problems are the family's evaluation problems
    (:func:`llm_envs.seats.family_seat`), each reset with the seed the
    evaluator uses for it, ``derive_seed(seed, problem)``.

    Args:
        family: the family (:func:`~llm_envs.registration.make_family`).
        seat: the agent the model plays.
        seed: the seed of the problems' resets.
        players: fresh players for the other seats, called once per episode;
            None for the family's reference players, asked for at every reset
            (the factory asks once), or none where the seat is the family's
            only agent.
    """

    def __init__(
        self, family: Family, seat: str, *, seed: int = 0, players: Players | None = None
    ) -> None:
        super().__init__(seat)
        self.family = family
        self.seed = seed
        self.players = players
        self._view: SeatView | None = None

    @property
    def done(self) -> bool:
        """Whether the seat's episode is over (True before the first reset)."""
        return self._view is None or self._view.done

    @property
    def record(self) -> dict[str, Any] | None:
        """The environment's record of the episode (``llm_envs.records.EpisodeRecord``).

        None before the first reset. After :meth:`get_reward` it is the whole
        episode, every seat's turns included, ready for ``python -m
        baselines.report`` (``episodes/step_NNNNN.jsonl``, one record a line).
        """
        if self._view is None:
            return None
        record: dict[str, Any] = self._view.record()
        return record

    def _start(self, problem: int) -> list[dict[str, str]]:
        view, reset_seed, options = family_seat(
            self.family,
            self.seat,
            problem=problem,
            seed=derive_seed(self.seed, problem),
            others=_others(self.family, self.seat, self.players),
        )
        observation, info = view.reset(seed=reset_seed, options=options)
        if view.done:
            raise ValueError(
                f"problem {problem} ends before {self.seat} acts: nothing to train on; "
                "play another seat or leave this problem out of the data set"
            )
        refuse_context_swap(self.seat, info)
        self._view = view
        return chat_messages(observation)

    def _step(self, text: str) -> tuple[list[dict[str, str]], float]:
        assert self._view is not None
        observation, reward, _, _, _ = self._view.step(text)
        return chat_messages(observation), float(reward)

    def _max_turns(self) -> int:
        return int(self.family.max_agent_turns)


class SeatEnvironmentFactory:
    """TRL's ``environment_factory`` for one seat of a registered family.

    Calling it returns a fresh :class:`SeatEnvironment`; :meth:`dataset` is
    the matching training data set, one row per problem.

    Args:
        env: a registered family's name (what ``--env`` takes).
        env_kwargs: the environment's arguments.
        seat: the agent the model plays (one of the family's ``agents``).
        task: the family's question or problem source.
        task_kwargs: the task's settings.
        seed: the family's seed, and the seed each problem's reset derives from.
        players: fresh players for the other seats, called once per episode
            (e.g. ``lambda: {"agent_1": MyPlayer(seed=0)}``); None for the
            family's reference players, asked for once and playing every
            episode, as in the evaluator (none needed where the seat is the
            family's only agent).

    Attributes:
        family: the family, built once.
        environments: every environment this factory made, in order (TRL
            reuses them: after a training step each holds the step's episode).

    Raises:
        ValueError: an unknown family or a bad setting (the family's message),
            a seat the family does not have, or no players for the other seats
            (a family without reference players: its message says why).

    Example:
        >>> factory = SeatEnvironmentFactory(
        ...     "debate", {"num_agents": 3, "max_rounds": 1}, seat="agent_2", task="arithmetic"
        ... )
        >>> row = factory.dataset(2)[1]
        >>> env = factory()
        >>> env.reset(**row)
        >>> env.take_turn("no tags").endswith("The episode is over.")
        True
        >>> env.get_reward(), env.record["turns"][2]["text"]  # a broken answer costs -1
        (-1.0, 'no tags')
    """

    def __init__(
        self,
        env: str,
        env_kwargs: Mapping[str, Any] | None = None,
        *,
        seat: str = "agent_0",
        task: str = "default",
        task_kwargs: Mapping[str, Any] | None = None,
        seed: int = 0,
        players: Players | None = None,
    ) -> None:
        self.family = make_family(
            env, dict(env_kwargs or {}), task=task, seed=seed, task_kwargs=dict(task_kwargs or {})
        )
        if seat not in self.family.agents:
            raise ValueError(
                f"seat {seat!r} is not an agent of --env {env}; "
                f"choose one of {list(self.family.agents)}"
            )
        if players is None and tuple(self.family.agents) != (seat,):
            # Asked once, as the evaluator does (its reference entrant plays every episode
            # with one set): building them can take seconds (a task's every answer), and
            # TRL resets an environment per rollout. Where the family has none, its
            # message names the fix, before a model is loaded.
            by, otherwise = "the other seats", "pass players for them"
            family = require(self.family, ReferencePlayers, by=by, otherwise=otherwise)
            reference = family.reference_players()
            players = lambda: reference  # noqa: E731 (a closure over the one set)
        self.seat = seat
        self.seed = seed
        self.players = players
        family_seat(self.family, seat, others=_others(self.family, seat, players))  # checks them
        self.environments: list[SeatEnvironment] = []

    @property
    def max_turns(self) -> int:
        """The most turns the seat takes in an episode (the family's ``max_agent_turns``).

        A bound for ``GRPOConfig(max_tool_calling_iterations=...)``: one tool call per turn.
        """
        return int(self.family.max_agent_turns)

    def __call__(self) -> SeatEnvironment:
        """A fresh environment (TRL calls this once per rollout slot it needs)."""
        environment = SeatEnvironment(self.family, self.seat, seed=self.seed, players=self.players)
        self.environments.append(environment)
        return environment

    def prompts(self, problems: list[int]) -> list[list[dict[str, str]]]:
        """The seat's first observation of each problem: the chats the model starts from."""
        probe = SeatEnvironment(self.family, self.seat, seed=self.seed, players=self.players)
        return [probe._start(p) for p in problems]

    def dataset(self, num_problems: int, *, first_problem: int = 0) -> Any:
        """The training data set: one row per problem, ``problem`` and ``prompt``.

        ``prompt`` is the seat's first observation of the problem (a chat, so
        TRL renders it with the tokenizer's chat template and the tool's
        schema). TRL repeats each row ``num_generations`` times: a group is
        that many episodes of one problem, which differ only in what the model
        writes.

        Args:
            num_problems: rows, problems ``first_problem .. first_problem + num_problems - 1``.
            first_problem: the first problem; start past the ones you evaluate on
                (the problems are the family's evaluation problems).

        Raises:
            ValueError: ``num_problems < 1``, ``first_problem < 0``, or more
                problems than the family has.
        """
        available = self.family.num_eval_problems
        if available is not None and first_problem + num_problems > available:
            raise ValueError(
                f"--env {self.family.name} has {available} problems, asked for problems "
                f"{first_problem}..{first_problem + num_problems - 1}; ask for fewer"
            )
        return _dataset(self.prompts, num_problems, first_problem)


def _dataset(
    prompts: Callable[[list[int]], list[list[dict[str, str]]]], num_problems: int, first: int
) -> Any:
    """A ``datasets.Dataset``: problems ``first .. first + num_problems - 1``, their prompts."""
    from datasets import Dataset

    if num_problems < 1 or first < 0:
        raise ValueError(
            f"need num_problems >= 1 and first_problem >= 0, got {num_problems} and {first}"
        )
    problems = list(range(first, first + num_problems))
    return Dataset.from_dict({"problem": problems, "prompt": prompts(problems)})


def _others(family: Family, seat: str, players: Players | None) -> Mapping[str, Agent] | None:
    """Fresh players for the other seats: yours, none for a one-seat family, else the family's."""
    if players is not None:
        return dict(players())
    if tuple(family.agents) == (seat,):
        return {}
    return None  # family_seat asks the family for its reference players


def _plain(messages: Any) -> list[dict[str, str]]:
    # A data set's rows may carry extra keys (None-filled by the Arrow schema): keep
    # the role and the content, which is all a chat message is here.
    return [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]


def _with_token(url: str, token: str | None) -> str:
    """``url`` with ``token`` as its userinfo's password (sent as HTTP Basic), if any.

    Example:
        >>> _with_token("http://10.0.0.1:8000/openenv", "s3/cret")
        'http://token:s3%2Fcret@10.0.0.1:8000/openenv'
    """
    if not token:
        return url
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"token:{quote(token, safe='')}@{parts.netloc}"))


def _client(url: str, token: str | None) -> Any:
    """A connected synchronous OpenEnv client of the server's single-seat view."""
    try:
        from openenv.core import GenericEnvClient  # type: ignore[import-untyped]
    except ModuleNotFoundError as missing:
        raise ModuleNotFoundError(
            f"a served seat needs OpenEnv's client, which needs {missing.name!r}: "
            'pip install "llm-envs[serve]" && pip install --no-deps openenv-core==0.3.0',
            name=missing.name,
        ) from missing
    base_url = _with_token(f"{url.rstrip('/')}/openenv", token)
    return GenericEnvClient(base_url=base_url).sync().connect()


class RemoteSeatEnvironment(SeatTool):
    """One seat of an episode on an episode server, played by the model through one tool.

    Built by :class:`RemoteSeatEnvironmentFactory`. Each holds one OpenEnv
    session (a WebSocket), opened at the first reset and kept for the next
    episodes; the factory's ``close`` ends it.

    Args:
        url: the server's address (``http://host:port``).
        seat: the agent the model plays.
        seed: the seed each problem's episode derives from, ``derive_seed(seed, problem)``.
        settings: ``env``, ``env_kwargs``, ``task`` and ``task_kwargs`` to
            leave the server's defaults (what a missing key leaves as it is).
        token: the server's token; None reads ``LLM_ENVS_SERVE_TOKEN`` (unset: none).
    """

    def __init__(
        self,
        url: str,
        seat: str,
        *,
        seed: int = 0,
        settings: Mapping[str, Any] | None = None,
        token: str | None = None,
    ) -> None:
        from llm_envs.serve.guard import token_from_environment

        super().__init__(seat)
        self.url = url
        self.seed = seed
        self.settings = dict(settings or {})
        self.token = token_from_environment(token)
        self._client: Any = None
        self._done = True
        self._episode_id: str | None = None
        self._max_agent_turns = 0

    @property
    def done(self) -> bool:
        """Whether the seat's episode is over (True before the first reset)."""
        return self._done

    @property
    def episode_id(self) -> str | None:
        """The server's id of the current episode (None before the first reset)."""
        return self._episode_id

    @property
    def record(self) -> dict[str, Any] | None:
        """The server's record of the finished episode (``GET /episodes/{id}``), or None.

        None before the first reset and while the episode runs; after
        :meth:`get_reward`, the server's line of ``episodes.jsonl``: the
        environment's own record is its ``record``.
        """
        if self._episode_id is None or not self._done:
            return None
        import httpx

        headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
        reply = httpx.get(
            f"{self.url.rstrip('/')}/episodes/{self._episode_id}", headers=headers, timeout=30
        )
        reply.raise_for_status()
        found: dict[str, Any] = reply.json()
        return found

    def _disconnect(self) -> None:
        """End the OpenEnv session (an unfinished episode is dropped by the server).

        Not public: TRL would make a tool of it (the factory's ``close`` calls it).
        """
        if self._client is not None:
            self._client.close()
            self._client = None
        self._done = True

    def _start(self, problem: int) -> list[dict[str, str]]:
        if self._client is None:
            self._client = _client(self.url, self.token)
        result = self._client.reset(
            seed=derive_seed(self.seed, problem), problem=problem, seat=self.seat, **self.settings
        )
        observation = result.observation
        self._episode_id = str(observation["episode_id"])
        self._max_agent_turns = int(observation.get("max_turns", 0))
        self._done = bool(result.done)
        if self._done:
            raise ValueError(
                f"problem {problem} ends before {self.seat} acts: nothing to train on; "
                "play another seat or leave this problem out of the data set"
            )
        refuse_context_swap(self.seat, observation.get("info", {}))
        return chat_messages(observation)

    def _step(self, text: str) -> tuple[list[dict[str, str]], float]:
        result = self._client.step({"text": text})
        self._done = bool(result.done)
        return chat_messages(result.observation), float(result.reward or 0.0)

    def _max_turns(self) -> int:
        return self._max_agent_turns


class RemoteSeatEnvironmentFactory:
    """TRL's ``environment_factory`` for one seat of the episodes an episode server runs.

    Calling it returns a fresh :class:`RemoteSeatEnvironment`; :meth:`dataset`
    is the matching training data set, one row per problem.

    Args:
        url: the server's address (``http://host:port``; its ``/openenv`` is used).
        seat: the agent the model plays (one of the env's seats).
        seed: the seed each problem's episode derives from.
        env, env_kwargs, task, task_kwargs: the family to play, where it is not
            the server's default (None leaves the server's).
        token: the server's token; None reads ``LLM_ENVS_SERVE_TOKEN`` (unset: none).

    Attributes:
        environments: every environment this factory made, in order.

    Example::

        factory = RemoteSeatEnvironmentFactory("http://localhost:8000", seat="agent_1")
        trainer = GRPOTrainer(..., train_dataset=factory.dataset(64),
                              environment_factory=factory)
    """

    def __init__(
        self,
        url: str,
        *,
        seat: str = "agent_0",
        seed: int = 0,
        env: str | None = None,
        env_kwargs: Mapping[str, Any] | None = None,
        task: str | None = None,
        task_kwargs: Mapping[str, Any] | None = None,
        token: str | None = None,
    ) -> None:
        self.url = url
        self.token = token
        self.seat = seat
        self.seed = seed
        given = {"env": env, "env_kwargs": env_kwargs, "task": task, "task_kwargs": task_kwargs}
        self.settings = {
            k: dict(v) if isinstance(v, Mapping) else v for k, v in given.items() if v is not None
        }
        self.environments: list[RemoteSeatEnvironment] = []
        self._probe = RemoteSeatEnvironment(
            url, seat, seed=seed, settings=self.settings, token=token
        )

    @property
    def max_turns(self) -> int:
        """The most turns the seat takes in an episode, as the server says (problem 0's episode).

        A bound for ``GRPOConfig(max_tool_calling_iterations=...)``: one tool call per turn.
        """
        if not self._probe._max_turns():  # no episode seen yet: the server says at a reset
            self._probe._start(0)
        return self._probe._max_turns()

    def __call__(self) -> RemoteSeatEnvironment:
        """A fresh environment (TRL calls this once per rollout slot it needs)."""
        environment = RemoteSeatEnvironment(
            self.url, self.seat, seed=self.seed, settings=self.settings, token=self.token
        )
        self.environments.append(environment)
        return environment

    def prompts(self, problems: list[int]) -> list[list[dict[str, str]]]:
        """The seat's first observation of each problem: the chats the model starts from."""
        return [self._probe._start(p) for p in problems]

    def dataset(self, num_problems: int, *, first_problem: int = 0) -> Any:
        """The training data set: one row per problem, ``problem`` and ``prompt``.

        The server plays each problem up to the seat's first turn (and drops
        the episode): ``prompt`` is that first observation.

        Raises:
            ValueError: ``num_problems < 1`` or ``first_problem < 0``.
        """
        return _dataset(self.prompts, num_problems, first_problem)

    def close(self) -> None:
        """End every environment's session (and the probe's)."""
        for environment in [*self.environments, self._probe]:
            environment._disconnect()
