"""What a trainer, the evaluator and the report need from an environment family.

A *family* is a registered environment seen from outside, in one object:

* the training plan: which environments to play for the groups with given
  indices, their reset seeds and options, which episodes form one group (the
  advantages are centred within it), and which seats the trained policy plays;
* the evaluation plan and its episodes, one per problem, for the evaluator,
  and, for a trainer that asks, problems held out from training
  (:meth:`Family.holding_out`);
* whether its agents are one team, paid one shared reward (:attr:`Family.team_reward`:
  what MAGRPO trains on);
* an optional scripted teacher (a warm start imitates it) and reference players
  (an entrant of known strength in tournaments);
* the metrics its tables lead with, and how an episode record's rewards add up;
* optionally, the settings a remote client of an episode server may pass,
  with their bounds (:attr:`FamilyBase.client_settings`; none unless declared);
* optionally, a meter of a policy's play beyond its returns
  (:meth:`FamilyBase.measure`: Kuhn Poker's exploitability; none unless declared).

Trainers, the evaluator and the report take any family through this protocol
and never name one; the registry (:mod:`llm_envs.registration`) says which
family an environment id belongs to. Everything here is plain Python: a plan
holds environments, seeds and options, never tokens.

A new family subclasses :class:`FamilyBase`, which answers "no" to every
optional question (no teacher, no reference players, self-play evaluation, no
team reward, nothing to hold out), and writes :meth:`Family.training` and
:meth:`Family.evaluation`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, Self

import numpy as np

from llm_envs.client_settings import ClientSettings

__all__ = [
    "Agent",
    "EpisodePlan",
    "EpisodeRewards",
    "Family",
    "FamilyBase",
    "Sampler",
    "derive_seed",
    "finite",
    "fmt",
    "ordered",
    "recorded_rewards",
]


class Agent(Protocol):
    """A scripted player: ``(observation, info) -> text``, the text of its next move."""

    def __call__(self, observation: Any, info: Mapping[str, Any], /) -> str:
        """The player's raw text for this turn."""
        ...


Sampler = Callable[[Sequence[tuple[str, Any, Mapping[str, Any]]]], list[str]]
"""A policy asked many turns at once: ``(agent, observation, info)`` triples -> one text each."""


def derive_seed(*keys: int) -> int:
    """A 31-bit seed that depends on every key (numpy's ``SeedSequence`` mixing).

    Example:
        >>> derive_seed(0, 1) == derive_seed(0, 1) != derive_seed(1, 0)
        True
    """
    return int(np.random.SeedSequence([int(k) & 0xFFFFFFFF for k in keys]).generate_state(1)[0])


def ordered(items: Sequence[Any], index: int, seed: int) -> Any:
    """Item ``index`` of an endless stream of seeded permutations of ``items`` (epochs).

    Example:
        >>> sorted(ordered("abc", i, seed=0) for i in range(3))
        ['a', 'b', 'c']
    """
    epoch, position = divmod(index, len(items))
    return items[int(_permutation(len(items), seed & 0xFFFFFFFF, epoch)[position])]


@functools.lru_cache(maxsize=4)
def _permutation(size: int, seed: int, epoch: int) -> np.ndarray:
    # Kept: a trainer asks for one group after another of the same epoch, and a
    # million-problem task costs 20 ms a permutation.
    return np.random.default_rng([seed, epoch]).permutation(size)


@dataclass
class EpisodePlan:
    """Episodes to play together, and how their trajectories group.

    Attributes:
        envs: fresh environments, one per episode (AEC or parallel).
        seeds: the reset seed of each episode.
        options: the reset options of each episode (the problem, the strategy).
        group_keys: episodes with equal keys form one group: a debate alone, or
            the G episodes of one problem.
        trained_agents: per episode, the seats the trained policy plays; the
            others are played by a fixed opponent where there is one, and by
            the trained policy otherwise (self-play).
        grouped_agents: the agents whose trajectories join the groups (the
            ones trained on); None for every agent of the episode.
        titles: per episode, its problem in words for people (a debate's
            question, a problem's text or id): what a trainer's data set row
            or a table shows of it; None where the family gives none.
    """

    envs: list[Any]
    seeds: list[int]
    options: list[dict[str, Any]]
    group_keys: list[Hashable]
    trained_agents: list[frozenset[str]]
    grouped_agents: tuple[str, ...] | None = None
    titles: list[str] | None = None

    def __post_init__(self) -> None:
        names = ["envs", "seeds", "options", "group_keys", "trained_agents"]
        names += ["titles"] if self.titles is not None else []
        sizes = {name: len(getattr(self, name)) for name in names}
        if len(set(sizes.values())) > 1:
            raise ValueError(
                f"an EpisodePlan needs one entry per episode in each list, got {sizes}"
            )

    def __len__(self) -> int:
        return len(self.envs)


@dataclass(frozen=True)
class EpisodeRewards:
    """What each agent earned in one episode, read from its record.

    Attributes:
        total: agent -> its return (every reward it received in the episode).
        how: agent -> how the return adds up, in words.
        per_turn: ``(round, agent)`` -> the reward of that turn, in words.
    """

    total: dict[str, float]
    how: dict[str, str]
    per_turn: dict[tuple[int, str], str] = field(default_factory=dict)


def finite(value: Any) -> float | None:
    """A finite float, or None (bools, strings, NaN and infinities are not values)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def fmt(value: float) -> str:
    """A number as people read it.

    Example:
        >>> fmt(5.0), fmt(-1 / 3), fmt(1e-05), fmt(0.0)
        ('5', '-0.3333', '1e-05', '0')
    """
    if value == 0:
        return "0"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}"


def recorded_rewards(record: Mapping[str, Any], env_kwargs: Mapping[str, Any]) -> EpisodeRewards:
    """The rewards a record states, for a family that states them.

    A ``rewards`` mapping of the record or its summary, else the ``reward`` in
    each turn's details, summed per agent.

    Example:
        >>> recorded_rewards({"summary": {"rewards": {"agent_0": 1, "agent_1": -1}}}, {}).total
        {'agent_0': 1.0, 'agent_1': -1.0}
    """
    for stated in (record.get("rewards"), record.get("summary", {}).get("rewards")):
        if isinstance(stated, Mapping) and stated:
            total = {str(a): float(v) for a, v in stated.items() if finite(v) is not None}
            return EpisodeRewards(total, dict.fromkeys(total, "as recorded"))
    summed: dict[str, float] = {}
    per_turn: dict[tuple[int, str], str] = {}
    for turn in record.get("turns", []):
        value = finite(turn.get("details", {}).get("reward"))
        if value is not None:
            summed[turn["agent"]] = summed.get(turn["agent"], 0.0) + value
            per_turn[(turn["round"], turn["agent"])] = f"reward {fmt(value)}"
    return EpisodeRewards(summed, dict.fromkeys(summed, "sum of its turns' rewards"), per_turn)


class Family(Protocol):
    """An environment family as trainers, the evaluator and the report use it.

    A family is built from the run's settings: ``Family(env_kwargs, task=...,
    seed=..., task_kwargs=..., **options)``, where ``options`` are the run
    settings named in :attr:`run_options`. A bad setting raises there, before
    a model is loaded.

    The run options the families here take, by the trainers that pass them:

    * ``num_generations`` (TRL GRPO): episodes of one problem in a training
      group, for a family whose group is several episodes of one problem;
    * ``strategy`` (TRL GRPO): the one search strategy of those episodes, for
      a family that has strategies;
    * ``strategy_mix`` (the importance-sampling trainer): episodes per strategy
      in a group, instead of the two above;
    * ``chat_observations`` (TRL GRPO, always True): each agent's observation
      must extend its previous observation and its action (one growing chat),
      because the trainer trains an agent's episode as one token sequence; a
      family that can rebuild an observation each turn stops doing so.
    """

    name: ClassVar[str]
    """The name a command line gives it (``--env debate``)."""
    run_options: ClassVar[tuple[str, ...]]
    """The trainer settings (beyond env and task) the constructor takes (see above)."""
    tasks: ClassVar[tuple[str, ...]]
    """The ``task`` values it accepts; the first is the default."""
    headline_metrics: ClassVar[tuple[str, ...]]
    """The info metrics an evaluation's tables show next to the scores."""
    metric_titles: ClassVar[Mapping[str, str]]
    """Column titles of headline metrics whose name is not their title (``pass_rate``)."""
    fixed_opponent: ClassVar[bool]
    """Whether evaluation plays the trained policy against a fixed one in the other seats."""
    teacher_options: ClassVar[tuple[str, ...] | None]
    """None without a scripted teacher; else the :meth:`demonstrations` options it honours."""
    team_reward: ClassVar[bool]
    """Whether the agents of an episode are one team: each step pays every acting
    agent the same reward, the team's (MAGRPO trains only such families)."""

    agents: tuple[str, ...]
    """Its agents, in ``possible_agents`` order: the seats."""
    num_eval_problems: int | None
    """How many distinct evaluation problems there are (None: as many as asked)."""
    max_agent_turns: int
    """The most turns one agent takes in a training episode: the bound a trainer
    sizes one agent's whole episode by (TRL's ``max_completion_length`` is
    ``max_tokens`` times it)."""

    def training(self, group_indices: Sequence[int], seed: int) -> EpisodePlan:
        """The episodes of the training groups with these global indices."""
        ...

    def evaluation(self, group_indices: Sequence[int], seed: int) -> EpisodePlan:
        """The episodes of a trainer's evaluation groups with these indices."""
        ...

    def demonstrations(
        self,
        group_indices: Sequence[int],
        seed: int,
        mistake_rate: float = 0.25,
        broken_rate: float = 0.0,
    ) -> tuple[EpisodePlan, dict[str, Agent]]:
        """Training episodes and a scripted teacher per agent (ValueError where none)."""
        ...

    def eval_episode(self, problem: int, seed: int) -> tuple[Any, int, dict[str, Any]]:
        """The evaluator's episode of problem ``problem``: a fresh env, its seed and options."""
        ...

    def holding_out(self, count: int) -> Family:
        """This family with ``count`` evaluation problems that its training never plays.

        For a trainer that evaluates on problems kept apart from the ones it
        trains on (MAGRPO's ``eval_problems``): the returned family's
        :meth:`evaluation` plays the held-out problems (group indices ``0 ..
        count - 1``, :attr:`num_eval_problems` of them where they are counted)
        and its :meth:`training` only the others. 0 holds out nothing.
        """
        ...

    def eval_extras(self, env: Any) -> dict[str, Any]:
        """What an evaluation records of a finished episode besides its transcript."""
        ...

    def default_seating(self, num_models: int) -> str:
        """The evaluator's seating for ``seating='auto'`` (``self``, ``rotations``...)."""
        ...

    def reference_players(self) -> dict[str, Agent]:
        """A scripted player per seat that knows the answers (ValueError where none).

        A player that draws random numbers follows the seeding rule of
        :meth:`scripted_players`.
        """
        ...

    def scripted_players(self, seed: int) -> dict[str, dict[str, Agent]]:
        """Named sets of scripted players, a player per seat, for training episodes.

        A league's anchors (``scripted:NAME``): opponents of known strength,
        such as a random player and a strong one. ``{}`` where there are none.

        The seeding rule: a player's random generator is seeded from ``seed``
        mixed with a salt of the player's own, ``derive_seed(seed, SALT, seat)``
        (:func:`derive_seed`; ``SALT`` a constant of the family's, ``seat`` the
        seat's index), never with ``seed`` itself nor a reset seed. The
        environment draws its episode (a secret, a deal, a problem) from its
        reset seed, and the callers' seeds and reset seeds come from the same
        few run seeds: a player whose generator starts where the environment's
        did draws the environment's own numbers, and its "random" guess is the
        secret.
        """
        ...

    @staticmethod
    def episode_rewards(record: Mapping[str, Any], env_kwargs: Mapping[str, Any]) -> EpisodeRewards:
        """Each agent's return in a recorded episode, added up the way the env pays."""
        ...


class FamilyBase:
    """The answers every family shares unless it says otherwise.

    No run options, no teacher, no reference players, self-play evaluation, no
    headline metrics, no team reward, no settings a remote client may pass, an
    evaluation already apart from training, one turn per agent, rewards as the
    record states them. A subclass sets
    :attr:`name`, :attr:`agents` and :attr:`tasks`, and writes ``training``,
    ``evaluation`` and ``eval_episode``.
    """

    name: ClassVar[str] = ""
    run_options: ClassVar[tuple[str, ...]] = ()
    tasks: ClassVar[tuple[str, ...]] = ("default",)
    headline_metrics: ClassVar[tuple[str, ...]] = ()
    metric_titles: ClassVar[Mapping[str, str]] = {}
    fixed_opponent: ClassVar[bool] = False
    teacher_options: ClassVar[tuple[str, ...] | None] = None
    team_reward: ClassVar[bool] = False
    client_settings: ClassVar[ClientSettings] = ClientSettings()
    """The env_kwargs and task_kwargs an episode server's client may pass, with their
    bounds (:mod:`llm_envs.client_settings`). Optional, and not part of
    :class:`Family`: a family without it (or with this default) lets a client
    set nothing beyond the server's own settings."""

    agents: tuple[str, ...] = ()
    num_eval_problems: int | None = None
    max_agent_turns: int = 1
    reward_range: tuple[float, float] | None = None
    """The lowest and highest return (the sum of its rewards) one agent can get in one
    episode with this family's settings; None: undeclared, unchecked. Optional, and not
    part of :class:`Family`: ``llm-envs check`` (:mod:`baselines.check`) checks every
    return it sees against it. A family whose bounds depend on its settings sets it in
    ``__init__``."""

    def demonstrations(
        self,
        group_indices: Sequence[int],
        seed: int,
        mistake_rate: float = 0.25,
        broken_rate: float = 0.0,
    ) -> tuple[EpisodePlan, dict[str, Agent]]:
        """No teacher: a warm start is refused with the fix."""
        raise ValueError(
            f"--env {self.name} has no scripted teacher for a warm start; use --warm-start-steps 0"
        )

    def eval_extras(self, env: Any) -> dict[str, Any]:
        """Nothing beyond the transcript and the infos."""
        return {}

    def measure(self, sample: Sampler, *, samples: int, seed: int) -> dict[str, float]:
        """A meter of the policy ``sample`` plays by, beyond returns: ``{}``, none.

        Optional, and not part of :class:`Family`: a family that can say more
        of a policy than its returns (Kuhn Poker: its exploitability, the most
        a best response wins against it) asks it ``samples`` times at each
        point it measures, in one call, and returns named numbers; trainers
        log them as ``eval/NAME`` and the evaluator shows them per entrant.
        """
        return {}

    def holding_out(self, count: int) -> Self:
        """The family itself: its evaluation already plays episodes its training does not.

        Right for a family whose evaluation draws its own problems (another
        seed, a test split); a family that trains and evaluates on one fixed
        list of problems splits it instead (see :class:`Family`).
        """
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        return self

    def default_seating(self, num_models: int) -> str:
        """``self``: each model plays every seat of its own episodes."""
        return "self"

    def reference_players(self) -> dict[str, Agent]:
        """None: the ``reference`` entrant is refused with the fix."""
        raise ValueError(f"--env {self.name} has no reference players: name a model for every seat")

    def scripted_players(self, seed: int) -> dict[str, dict[str, Agent]]:
        """The reference players as ``reference`` where the family has them; else none."""
        try:
            return {"reference": self.reference_players()}
        except ValueError:
            return {}

    @staticmethod
    def episode_rewards(record: Mapping[str, Any], env_kwargs: Mapping[str, Any]) -> EpisodeRewards:
        """The rewards the record states (:func:`recorded_rewards`)."""
        return recorded_rewards(record, env_kwargs)
