"""What every trainer, the evaluator and the episode server ask of an environment family.

A *family* is a registered environment seen from outside, in one object. Its
core (:class:`Family`, six members) is what every family answers: its name, its
seats, the most turns one agent takes, the training plan, the evaluation plan
(groups of episodes with their seeds and options, and the seats the trained
policy plays) and the evaluator's episode of one problem.

Everything else is an optional capability a family opts into by writing its
members (:mod:`llm_envs.capabilities`: a teacher, reference or scripted players,
a team reward, held-out problems, evaluation details, a meter, served settings,
...); a trainer feature that needs one checks it with
:func:`llm_envs.capabilities.require`, which names the capability in its refusal.

A new family subclasses :class:`FamilyBase`, which answers every capability
"none", and writes the core. Trainers, the evaluator and the report take any
family through these protocols and never name one; the registry
(:mod:`llm_envs.registration`) says which family an environment id belongs to.
Everything here is plain Python: a plan holds environments, seeds and options,
never tokens. Seeds come from :mod:`llm_envs.seeding`, numbers in words from
:mod:`llm_envs.formatting`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, Self, TypedDict

from llm_envs import formatting
from llm_envs.client_settings import ClientSettings

__all__ = [
    "Agent",
    "EpisodePlan",
    "EpisodeRewards",
    "Family",
    "FamilyBase",
    "RunSettings",
    "Sampler",
    "recorded_rewards",
]


class Agent(Protocol):
    """A scripted player: ``(observation, info) -> text``, the text of its next move."""

    def __call__(self, observation: Any, info: Mapping[str, Any], /) -> str:
        """The player's raw text for this turn."""
        ...


Sampler = Callable[[Sequence[tuple[str, Any, Mapping[str, Any]]]], list[str]]
"""A policy asked many turns at once: ``(agent, observation, info)`` triples -> one text each."""

_MOVED = {
    "derive_seed": "llm_envs.seeding",
    "ordered": "llm_envs.seeding",
    "finite": "llm_envs.formatting",
    "fmt": "llm_envs.formatting",
}


def __getattr__(name: str) -> Any:
    """The seeding and formatting helpers' old home, for one release (a DeprecationWarning)."""
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    warnings.warn(
        f"llm_envs.family.{name} moved to {_MOVED[name]}.{name}; import it from there",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(_MOVED[name]), name)


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
            total = {
                str(a): float(v) for a, v in stated.items() if formatting.finite(v) is not None
            }
            return EpisodeRewards(total, dict.fromkeys(total, "as recorded"))
    summed: dict[str, float] = {}
    per_turn: dict[tuple[int, str], str] = {}
    for turn in record.get("turns", []):
        value = formatting.finite(turn.get("details", {}).get("reward"))
        if value is not None:
            summed[turn["agent"]] = summed.get(turn["agent"], 0.0) + value
            per_turn[(turn["round"], turn["agent"])] = f"reward {formatting.fmt(value)}"
    return EpisodeRewards(summed, dict.fromkeys(summed, "sum of its turns' rewards"), per_turn)


class Family(Protocol):
    """The core of an environment family: what every trainer, the evaluator and the server ask.

    Six members every family writes (``name`` to ``eval_episode``), and three run
    settings :class:`FamilyBase` answers unless the family says otherwise.

    A family is built from the run's settings: ``Family(env_kwargs, task=...,
    seed=..., task_kwargs=..., **options)``, where ``options`` are the run
    settings it names in :attr:`run_options`.
    A bad setting raises there, before a model is loaded.

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
    agents: tuple[str, ...]
    """Its agents, in ``possible_agents`` order: the seats."""
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

    def eval_episode(self, problem: int, seed: int) -> tuple[Any, int, dict[str, Any]]:
        """The evaluator's episode of problem ``problem``: a fresh env, its seed and options."""
        ...

    # The run settings: not written unless they differ from FamilyBase's answers.
    tasks: ClassVar[tuple[str, ...]]
    """The ``task`` values it accepts; the first is the default (FamilyBase: ``default``)."""
    run_options: ClassVar[tuple[str, ...]]
    """Trainer settings beyond env and task that its constructor takes (above; FamilyBase: none)."""
    num_eval_problems: int | None
    """How many distinct evaluation problems there are (FamilyBase: None, as many as asked)."""


class RunSettings(TypedDict, total=False):
    """What every family takes beside ``env_kwargs`` and its run options: ``**run: Unpack[...]``."""

    task: str
    seed: int
    task_kwargs: Mapping[str, Any] | None


class FamilyBase:
    """The core's defaults and every capability's answer "none".

    A subclass sets :attr:`name` and :attr:`agents` (and :attr:`max_agent_turns`
    beyond one turn) and writes ``training``, ``evaluation`` and ``eval_episode``:
    the core (:class:`Family`). Each capability of :mod:`llm_envs.capabilities`
    it wants, it writes. Until then: task ``default`` and no run options, no
    teacher, no reference players (nor scripted ones beyond them), no team
    reward, an evaluation already apart from training, self-play evaluation
    without headline metrics, no meter, no settings a remote client may pass, no
    declared reward range, rewards as the record states them. An answer here
    is not the capability (:func:`llm_envs.capabilities.provides`): a feature
    that needs one refuses a family that only inherits it.
    """

    name: ClassVar[str] = ""
    agents: tuple[str, ...] = ()
    max_agent_turns: int = 1

    run_options: ClassVar[tuple[str, ...]] = ()
    tasks: ClassVar[tuple[str, ...]] = ("default",)
    num_eval_problems: int | None = None
    headline_metrics: ClassVar[tuple[str, ...]] = ()
    metric_titles: ClassVar[Mapping[str, str]] = {}
    fixed_opponent: ClassVar[bool] = False
    teacher_options: ClassVar[tuple[str, ...] | None] = None
    team_reward: ClassVar[bool] = False
    client_settings: ClassVar[ClientSettings] = ClientSettings()
    """None settable: a client sets nothing beyond the server's own settings."""
    reward_range: tuple[float, float] | None = None
    """Undeclared, unchecked; a family whose bounds follow its settings sets it in ``__init__``."""

    def __init__(
        self,
        env_kwargs: Mapping[str, Any] | None = None,
        *,
        task: str = "default",
        seed: int = 0,
        task_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        """Keep the run's settings (``{}`` for None); a subclass checks them.

        Every argument has a default, so a family that takes none (``MyFamily()``) still builds.
        """
        self.env_kwargs = dict(env_kwargs or {})
        self.task = task
        self.seed = seed
        self.task_kwargs = dict(task_kwargs or {})

    def demonstrations(self, *args: Any, **kwargs: Any) -> tuple[EpisodePlan, dict[str, Agent]]:
        """No teacher (:class:`~llm_envs.capabilities.Teacher`): refused, with the fix."""
        raise ValueError(
            f"--env {self.name} has no scripted teacher for a warm start; use --warm-start-steps 0"
        )

    def eval_extras(self, env: Any) -> dict[str, Any]:
        """Nothing beyond the transcript and the infos."""
        return {}

    def measure(self, sample: Sampler, *, samples: int, seed: int) -> dict[str, float]:
        """No meter: ``{}``."""
        return {}

    def holding_out(self, count: int) -> Self:
        """The family itself: its evaluation already plays episodes its training does not."""
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
