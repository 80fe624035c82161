"""One seat of a served episode as TRL's ``environment_factory``, through OpenEnv's client.

This is TRL's OpenEnv path: an environment class whose methods call an
OpenEnv client (TRL's OpenEnv guide builds its examples this way). The
episode runs on an episode server (``llm-envs serve``, docs/serve.md), whose
``/openenv`` route is an OpenEnv server: the family's reference players take
the other seats there, and the server keeps the turn order, the rewards and
the records. The trainer only holds a socket per environment.

:class:`RemoteSeatEnvironmentFactory` is the ``environment_factory``: each
:class:`RemoteSeatEnvironment` it makes holds one OpenEnv
``GenericEnvClient`` session, plays the row's problem in its seat through the
tool ``take_turn`` and returns the seat's return from ``get_reward``, as the
in-process :class:`~baselines.grpo.environment.SeatEnvironment` does (both
share :class:`~baselines.grpo.environment.SeatTool`). Against a server
started with ``--seed S`` and a factory with ``seed=S``, an episode is the
one the in-process factory plays, move for move.

A server beyond loopback takes requests with its token only: pass it as
``token``, or set ``LLM_ENVS_SERVE_TOKEN``. OpenEnv's client sets no headers,
so the token rides in the socket URL's userinfo (``ws://token:T@host``), which
its WebSocket library sends as an ``Authorization`` header.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from baselines.grpo.adapters import refuse_context_swap
from baselines.grpo.environment import SeatTool
from llm_envs.family import derive_seed
from llm_envs.seats import chat_messages

__all__ = ["RemoteSeatEnvironment", "RemoteSeatEnvironmentFactory"]


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
        self.settings = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in given.items()}
        self.settings = {k: v for k, v in self.settings.items() if v is not None}
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
        from datasets import Dataset

        if num_problems < 1 or first_problem < 0:
            raise ValueError(
                "need num_problems >= 1 and first_problem >= 0, "
                f"got {num_problems} and {first_problem}"
            )
        problems = list(range(first_problem, first_problem + num_problems))
        return Dataset.from_dict({"problem": problems, "prompt": self.prompts(problems)})

    def close(self) -> None:
        """End every environment's session (and the probe's)."""
        for environment in [*self.environments, self._probe]:
            environment._disconnect()
