"""A league: the pool of opponents, its ratings, and who meets whom.

The pool holds the current policy (``latest``: mirror self-play), anchors of
fixed strength (a family's scripted players, a model folder, or any
OpenAI-compatible server), and frozen snapshots of the trained policy, one every
``snapshot_every`` iterations (the ``max_snapshots`` newest are kept). Each
training group meets one opponent, drawn by the matchmaking
(:mod:`baselines.league.matchmaking`) from the learner's online ratings
(:mod:`baselines.league.ratings`); after the iteration its games update the
ratings. :class:`League` is the whole state, plain JSON for the checkpoint:
a resumed run continues the same league.

Nothing here loads a model: the trainer builds the policies of the pool
(:mod:`baselines.is_trainer.league`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final, Literal

from baselines.league.matchmaking import (
    Matchmaking,
    PFSPWeighting,
    choose,
    matchmaking_probabilities,
)
from baselines.league.ratings import LEARNER, LeagueRatings
from llm_envs.seeding import derive_seed

__all__ = ["LATEST", "League", "Opponent", "OpponentKind", "parse_anchor"]

LATEST: Final = "latest"
"""The pool's name for the current policy (the learner's own weights, not trained on)."""

OpponentKind = Literal["latest", "snapshot", "scripted", "model", "endpoint"]


@dataclass(frozen=True)
class Opponent:
    """One member of the pool.

    Attributes:
        name: what metrics and tables call it (``latest``, ``snapshot_00004``,
            ``scripted:random``, or the name a model or endpoint anchor was given).
        kind: ``latest``, ``snapshot``, ``scripted``, ``model`` or ``endpoint``.
        source: a scripted anchor's set of players (a name of the family's
            ``scripted_players``), a model anchor's folder, an endpoint's
            ``URL[#model]``, a snapshot's weights file (relative to the run's
            output folder).
        iteration: a snapshot's iteration (the weights after that many iterations).
    """

    name: str
    kind: OpponentKind
    source: str = ""
    iteration: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The opponent, for a checkpoint."""
        return asdict(self)

    @classmethod
    def from_json(cls, state: Mapping[str, Any]) -> Opponent:
        """The opponent :meth:`to_json` saved."""
        return cls(state["name"], state["kind"], state["source"], state["iteration"])


ANCHOR_FORMS: Final = (
    "scripted:SET (a family's scripted players), [NAME=]model:FOLDER (a model folder, "
    "frozen) or [NAME=]http(s)://URL[#model] (an OpenAI-compatible server)"
)


def parse_anchor(spec: str) -> Opponent:
    """An anchor from its spec: ``scripted:SET``, ``[NAME=]model:FOLDER`` or ``[NAME=]http(s)://URL[#model]``.

    Example:
        >>> parse_anchor("scripted:random").kind
        'scripted'
        >>> parse_anchor("target=model:runs/a/final_model").source
        'runs/a/final_model'
        >>> parse_anchor("big=http://127.0.0.1:8000/v1#Qwen").source
        'http://127.0.0.1:8000/v1#Qwen'

    Raises:
        ValueError: another form (the message shows them all).
    """
    if spec.startswith("scripted:") and len(spec) > len("scripted:"):
        return Opponent(spec, "scripted", spec.removeprefix("scripted:"))
    head = spec.split("://")[0].split("model:")[0]
    name, _, target = spec.partition("=") if "=" in head else ("", "", spec)
    if target.startswith(("http://", "https://")):
        return Opponent(name or target, "endpoint", target)
    if target.startswith("model:") and len(target) > len("model:"):
        return Opponent(name or target, "model", target.removeprefix("model:"))
    raise ValueError(f"league anchor {spec!r} is not {ANCHOR_FORMS}")


@dataclass
class League:
    """The league's whole state: the pool, the ratings, and the settings that use them.

    Attributes:
        matchmaking: ``pfsp``, ``uniform``, ``latest`` or ``anchors``.
        weighting, power: PFSP's weighting (``hard``: ``(1 - p) ** power``).
        snapshot_every: iterations between snapshots (0: none).
        max_snapshots: snapshots kept, the newest (older ones leave the pool).
        anchors: the fixed opponents.
        snapshots: the snapshots in the pool, oldest first.
        ratings: the learner's online ratings against the pool.
    """

    matchmaking: Matchmaking = "pfsp"
    weighting: PFSPWeighting = "hard"
    power: float = 2.0
    snapshot_every: int = 2
    max_snapshots: int = 8
    anchors: list[Opponent] = field(default_factory=list)
    snapshots: list[Opponent] = field(default_factory=list)
    ratings: LeagueRatings = field(default_factory=LeagueRatings)

    def __post_init__(self) -> None:
        if self.snapshot_every < 0 or self.max_snapshots < 0:
            raise ValueError(
                "snapshot_every and max_snapshots are >= 0, got "
                f"{self.snapshot_every} and {self.max_snapshots}"
            )
        names = [o.name for o in self.anchors]
        if len(set(names)) != len(names) or {LATEST, LEARNER} & set(names):
            raise ValueError(
                f"league anchors need distinct names other than {LATEST!r} and {LEARNER!r}: {names}"
            )

    @property
    def opponents(self) -> list[Opponent]:
        """The pool: the current policy, the anchors, the snapshots."""
        return [Opponent(LATEST, "latest"), *self.anchors, *self.snapshots]

    def opponent(self, name: str) -> Opponent:
        """The pool's member called ``name``."""
        for o in self.opponents:
            if o.name == name:
                return o
        raise KeyError(f"no opponent {name!r} in the league; it has {self.names}")

    @property
    def names(self) -> list[str]:
        """The pool's names, in its order."""
        return [o.name for o in self.opponents]

    def snapshot_due(self, iteration: int) -> bool:
        """Whether a snapshot of the weights is taken before ``iteration`` is sampled."""
        return (
            self.snapshot_every > 0
            and self.max_snapshots > 0
            and iteration % self.snapshot_every == 0
            and all(s.iteration != iteration for s in self.snapshots)
        )

    def add_snapshot(self, iteration: int, source: str) -> list[Opponent]:
        """Add the snapshot of ``iteration``; return the snapshots that left the pool."""
        self.snapshots.append(Opponent(f"snapshot_{iteration:05d}", "snapshot", source, iteration))
        evicted = self.snapshots[: max(0, len(self.snapshots) - self.max_snapshots)]
        self.snapshots = self.snapshots[len(evicted) :]
        for gone in evicted:
            self.ratings.forget(gone.name)
        return evicted

    def probabilities(self) -> dict[str, float]:
        """The chance each opponent is met by a group of the next iteration."""
        return matchmaking_probabilities(
            self.matchmaking,
            self.names,
            self.ratings.win_probability(),
            latest=LATEST,
            anchors=[o.name for o in self.anchors],
            weighting=self.weighting,
            power=self.power,
        )

    def assign(self, groups: Sequence[int], seed: int) -> list[str]:
        """Each group's opponent (global group indices), drawn with ``derive_seed(seed, g)``."""
        probabilities = self.probabilities()
        return [choose(probabilities, derive_seed(seed, g)) for g in groups]

    def record(self, games: Iterable[tuple[str, float]]) -> None:
        """Add an iteration's games, ``(opponent, learner's score)``, to the ratings."""
        self.ratings.add_iteration(games, [o.name for o in self.opponents])

    def metrics(
        self, assigned: Sequence[str], games: Sequence[tuple[str, float]]
    ) -> dict[str, float]:
        """``league/...`` metrics of an iteration: pool, opponent mix, scores, ratings."""
        out: dict[str, float] = {"league/pool_size": float(len(self.opponents))}
        for name, count in Counter(assigned).items():
            out[f"league/mix/{name}"] = count / max(1, len(assigned))
        scores: dict[str, list[float]] = {}
        for name, score in games:
            scores.setdefault(name, []).append(score)
        for name, values in scores.items():
            out[f"league/score/{name}"] = sum(values) / len(values)
        for name, rating in self.ratings.ratings().items():
            out[f"league/rating/{name}"] = rating
        return out

    def to_json(self) -> dict[str, Any]:
        """The state, for a checkpoint."""
        return {
            "matchmaking": self.matchmaking,
            "weighting": self.weighting,
            "power": self.power,
            "snapshot_every": self.snapshot_every,
            "max_snapshots": self.max_snapshots,
            "anchors": [o.to_json() for o in self.anchors],
            "snapshots": [o.to_json() for o in self.snapshots],
            "ratings": self.ratings.to_json(),
        }

    @classmethod
    def from_json(cls, state: Mapping[str, Any]) -> League:
        """The league :meth:`to_json` saved."""
        return cls(
            matchmaking=state["matchmaking"],
            weighting=state["weighting"],
            power=float(state["power"]),
            snapshot_every=int(state["snapshot_every"]),
            max_snapshots=int(state["max_snapshots"]),
            anchors=[Opponent.from_json(o) for o in state["anchors"]],
            snapshots=[Opponent.from_json(o) for o in state["snapshots"]],
            ratings=LeagueRatings.from_json(state["ratings"]),
        )
