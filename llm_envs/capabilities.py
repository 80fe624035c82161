"""What a family may offer beyond its core, and the one check a trainer makes before using it.

Every family answers the core (:class:`llm_envs.family.Family`: six members
to write, and three run settings with defaults). Everything else is a
*capability*: a small protocol a family opts into by writing its members.
:class:`~llm_envs.family.FamilyBase` answers each one "none" (no teacher, no
reference players, no team reward, plain evaluation details), so a family that
writes only the core runs everywhere a capability is not needed, and a feature
that needs one asks :func:`require` first, whose refusal names the feature, the
capability, the family and the members to write.

Each protocol's docstring says who needs it; ``docs/architecture.md`` has the
table (capability, members, who needs it).

A family *provides* a capability when it writes every member (a value of
``None`` or ``False`` declares nothing, and neither does an answer inherited
from :class:`~llm_envs.family.FamilyBase`); for the capabilities whose members
all have a neutral answer in ``FamilyBase`` (evaluation details, a meter,
served settings, a reward range or accounting, held-out problems),
writing any member is providing it. Scripted players also come with reference
players: ``FamilyBase`` offers those as the ``reference`` set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from llm_envs.family import FamilyBase

if TYPE_CHECKING:
    import llm_envs.family
    from llm_envs.client_settings import ClientSettings
    from llm_envs.family import Agent, Family, Sampler

__all__ = [
    "CAPABILITIES",
    "EvaluationDetails",
    "HeldOutProblems",
    "IndependentAnswers",
    "Meter",
    "MissingCapability",
    "ReferencePlayers",
    "RewardAccounting",
    "RewardRange",
    "ScriptedPlayers",
    "ServedSettings",
    "Teacher",
    "TeamReward",
    "members",
    "provided",
    "provides",
    "require",
]


class Teacher(Protocol):
    """A scripted teacher: the IS trainer's warm start imitates its games; ``llm-envs check``."""

    teacher_options: ClassVar[tuple[str, ...]]
    """The :meth:`demonstrations` options it honours (``mistake_rate``, ``broken_rate``)."""

    def demonstrations(
        self, group_indices: Sequence[int], seed: int, **options: float
    ) -> tuple[llm_envs.family.EpisodePlan, dict[str, Agent]]:
        """Training episodes and a teacher per agent (ValueError for settings it cannot teach)."""
        ...


class ReferencePlayers(Protocol):
    """A player per seat that knows the answers: the ``reference`` entrant, others' seats."""

    def reference_players(self) -> dict[str, Agent]:
        """A player per seat (ValueError for settings without them, saying which have them).

        A player that draws random numbers follows the seeding rule of
        :meth:`ScriptedPlayers.scripted_players`.
        """
        ...


class ScriptedPlayers(Protocol):
    """Named sets of scripted players: ``scripted:SET`` anchors, entrants and eval opponents."""

    def scripted_players(self, seed: int) -> dict[str, dict[str, Agent]]:
        """Named sets of a player per seat, for training episodes (``{}`` where there are none).

        The seeding rule: a player's random generator is seeded from ``seed``
        mixed with a salt of the player's own, ``derive_seed(seed, SALT, seat)``
        (:func:`llm_envs.seeding.derive_seed`; ``SALT`` a constant of the
        family's, ``seat`` the seat's index), never with ``seed`` itself nor a
        reset seed. The environment draws its episode (a secret, a deal) from its
        reset seed, and both come from the same few run seeds: a player whose
        generator starts where the environment's did draws the environment's own
        numbers, and its "random" guess is the secret.
        """
        ...


class TeamReward(Protocol):
    """One team: each step pays every acting agent the team's reward (MAGRPO trains them)."""

    team_reward: ClassVar[bool]
    """True."""


class HeldOutProblems(Protocol):
    """Evaluation problems kept apart from training (MAGRPO's ``eval_problems``)."""

    def holding_out(self, count: int) -> Family:
        """This family with ``count`` evaluation problems that its training never plays.

        The returned family's ``evaluation`` plays the held-out problems (group
        indices ``0 .. count - 1``) and its ``training`` only the others; 0
        holds out nothing. ``FamilyBase`` answers with the family itself: right
        for a family whose evaluation draws its own problems (another seed, a
        test split).
        """
        ...


class EvaluationDetails(Protocol):
    """How an evaluation plays and shows the family: the trainers, the evaluator, the report."""

    fixed_opponent: ClassVar[bool]
    """Whether a trainer's evaluation plays the trained policy against a fixed one."""
    headline_metrics: ClassVar[tuple[str, ...]]
    """The info metrics an evaluation's tables show next to the scores."""
    metric_titles: ClassVar[Mapping[str, str]]
    """Column titles of headline metrics whose name is not their title (``pass_rate``)."""

    def default_seating(self, num_models: int) -> str:
        """The evaluator's seating for ``seating='auto'`` (``self``, ``rotations``...)."""
        ...

    def eval_extras(self, env: Any) -> dict[str, Any]:
        """What an evaluation records of a finished episode besides its transcript."""
        ...


class Meter(Protocol):
    """A measure of a policy beyond its returns (Kuhn Poker's exploitability), for evaluations."""

    def measure(self, sample: Sampler, *, samples: int, seed: int) -> dict[str, float]:
        """Named numbers of the policy ``sample`` plays by, asking it ``samples`` times a point."""
        ...


class IndependentAnswers(Protocol):
    """Answers given alone beside an evaluation (debate's majority vote): trainers, evaluator."""

    def independent_answers(
        self, sample: Sampler, problems: Sequence[int], seed: int
    ) -> dict[str, float]:
        """Named numbers of ``sample``'s answers to evaluation problems ``problems``, each alone.

        As many answers per problem as the family has agents, none seeing
        another's (the baseline multi-agent papers compare with), parsed and
        reduced the family's way. Problem ``p`` is evaluation group ``p`` and the
        evaluator's problem ``p``; ``seed`` is the evaluation's. ``{}`` where
        there is nothing to score (no reference answers).
        """
        ...


class ServedSettings(Protocol):
    """The settings a remote client of the episode server may pass, with their bounds."""

    client_settings: ClassVar[ClientSettings]


class RewardRange(Protocol):
    """The lowest and highest return of one agent in one episode (``llm-envs check``)."""

    reward_range: tuple[float, float] | None


class RewardAccounting(Protocol):
    """How a recorded episode's rewards add up, in words (the report's transcripts)."""

    @staticmethod
    def episode_rewards(
        record: Mapping[str, Any], env_kwargs: Mapping[str, Any]
    ) -> llm_envs.family.EpisodeRewards:
        """Each agent's return in a recorded episode, added up the way the env pays."""
        ...


CAPABILITIES: tuple[type, ...] = (
    Teacher,
    ReferencePlayers,
    ScriptedPlayers,
    TeamReward,
    HeldOutProblems,
    EvaluationDetails,
    Meter,
    IndependentAnswers,
    ServedSettings,
    RewardRange,
    RewardAccounting,
)
"""Every capability, in the order of the table above."""

# Capabilities whose every member has a neutral answer in FamilyBase: writing one
# member is declaring the capability.
_ANY_MEMBER = frozenset(CAPABILITIES[4:]) - {IndependentAnswers}


class MissingCapability(ValueError):
    """A trainer feature needs a capability the family does not provide.

    Attributes:
        capability: the capability's protocol.
        family: the family's ``--env`` name.
    """

    def __init__(self, message: str, capability: type, family: str) -> None:
        super().__init__(message)
        self.capability = capability
        self.family = family


def members(capability: type) -> tuple[str, ...]:
    """The names a family writes to provide ``capability``, in declaration order.

    Example:
        >>> members(Teacher)
        ('teacher_options', 'demonstrations')
    """
    names = [*vars(capability).get("__annotations__", {})]
    names += [n for n, v in vars(capability).items() if not n.startswith("_") and _callable(v)]
    return tuple(dict.fromkeys(names))


def provides(family: Any, capability: type) -> bool:
    """Whether ``family`` (a family or its class) provides ``capability`` (the module docstring)."""
    declared = [_declares(family, name) for name in members(capability)]
    if (any if capability in _ANY_MEMBER else all)(declared):
        return True
    return capability is ScriptedPlayers and provides(family, ReferencePlayers)


def provided(family: Any) -> tuple[str, ...]:
    """The names of the capabilities ``family`` provides, in :data:`CAPABILITIES` order."""
    return tuple(c.__name__ for c in CAPABILITIES if provides(family, c))


def require(family: Any, capability: type, *, by: str, otherwise: str = "") -> Any:
    """``family`` itself if it provides ``capability``; else a refusal that says what to do.

    Args:
        family: a family or its class.
        capability: one of :data:`CAPABILITIES`.
        by: what needs it, as the message's start (``"a warm start imitates the
            family's scripted teacher"``).
        otherwise: what the user can do instead (``"use --warm-start-steps 0"``).

    Raises:
        MissingCapability: naming ``by``, the family, the capability, its
            members (what an environment author writes) and ``otherwise``.
    """
    if provides(family, capability):
        return family
    name = getattr(family, "name", "") or getattr(family, "__name__", type(family).__name__)
    written = ", ".join(members(capability))
    message = (
        f"{by}, and --env {name} has none: its family does not provide {capability.__name__} "
        f"(an environment author writes {written}; docs/your_own_environment.md)"
    )
    raise MissingCapability(f"{message}; {otherwise}" if otherwise else message, capability, name)


def _callable(value: Any) -> bool:
    return callable(value) or isinstance(value, staticmethod | classmethod)


def _declares(family: Any, name: str) -> bool:
    """Whether ``family`` writes ``name`` itself: not None nor False, not FamilyBase's answer."""
    value = getattr(family, name, None)
    if value is None or value is False:
        return False
    if name in getattr(family, "__dict__", {}) and not isinstance(family, type):
        return True  # set on the instance (a reward range that depends on the settings)
    cls = family if isinstance(family, type) else type(family)
    owner = next((k for k in cls.__mro__ if name in vars(k)), None)
    return owner is not FamilyBase
