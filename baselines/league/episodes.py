"""A league iteration's episodes: the learner in one seat, the group's opponent in the others.

Group ``g`` of an iteration is ``group_size`` copies of the family's training
episode ``g`` (:meth:`~llm_envs.family.Family.training` with the index
repeated: the same problem, reset seed and options), with the learner in seat
``agents[g % len(agents)]``, so that over the groups it plays every seat, and
the group's opponent in every other seat. Only the learner's trajectories
are trained on: the copies differ only in what was sampled, and their returns
are compared within the group. Each copy is also a game of the learner
against each opponent seat (:func:`~baselines.league.ratings.game_score`),
which the ratings count.

Nothing here loads a model or reads environment text: the family says the
seats, the returns say who won.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from baselines.data.advantages import trajectory_return
from baselines.env_families import EpisodeBatch
from baselines.league.ratings import game_score
from baselines.rollouts import EpisodeResult, group_by
from baselines.samplers.base import Policy
from baselines.types import TrajectoryGroup
from llm_envs.family import EpisodePlan, Family

__all__ = ["LeagueBatch", "league_batch", "learner_seat"]


def learner_seat(agents: Sequence[str], group: int) -> str:
    """The seat the learner plays in group ``group``: the seats in turn.

    Example:
        >>> [learner_seat(("agent_0", "agent_1"), g) for g in range(3)]
        ['agent_0', 'agent_1', 'agent_0']
    """
    return agents[group % len(agents)]


@dataclass
class LeagueBatch:
    """The episodes of a league iteration's groups, and how to read them.

    Attributes:
        batch: the episodes (``trained_agents``: the learner's seat of each).
        groups: the global group index of each episode.
        seats: the learner's seat in each episode.
        opponents: the opponent (a pool name) of each episode.
    """

    batch: EpisodeBatch
    groups: list[int]
    seats: list[str]
    opponents: list[str]

    def assignment(
        self, learner: Policy, policy_of: Callable[[str], Policy]
    ) -> Callable[[int, str], Policy]:
        """``(episode, agent) -> policy``: the learner in its seat, the opponent's elsewhere."""

        def assign(index: int, agent: str) -> Policy:
            return learner if agent == self.seats[index] else policy_of(self.opponents[index])

        return assign

    def to_groups(self, results: Sequence[EpisodeResult]) -> list[TrajectoryGroup]:
        """The learner's trajectories, one group per league group (``group_size`` episodes)."""
        by_group: dict[int, list[EpisodeResult]] = {}
        for r in results:
            by_group.setdefault(self.groups[r.env_index], []).append(r)
        out: list[TrajectoryGroup] = []
        for members in by_group.values():
            seat = self.seats[members[0].env_index]
            out += group_by(members, lambda r: 0, agents=(seat,))
        return out

    def games(self, results: Sequence[EpisodeResult]) -> list[tuple[str, float]]:
        """Every ``(opponent, learner's score)``: one game per episode and opponent seat."""
        out: list[tuple[str, float]] = []
        for r in results:
            seat, opponent = self.seats[r.env_index], self.opponents[r.env_index]
            mine = trajectory_return(r.trajectories[seat], r.final_rewards[seat])
            for agent, trajectory in r.trajectories.items():
                if agent != seat:
                    theirs = trajectory_return(trajectory, r.final_rewards[agent])
                    out.append((opponent, game_score(mine, theirs)))
        return out


def league_batch(
    family: Family,
    groups: Sequence[int],
    opponents: Sequence[str],
    seed: int,
    group_size: int,
) -> LeagueBatch:
    """The episodes of ``groups`` (global indices), each against its opponent.

    Raises:
        ValueError: a one-seat family (a league needs opponents' seats), or a
            group size below 1.
    """
    if len(family.agents) < 2:
        raise ValueError(
            f"--env {family.name} has one seat ({family.agents[0]}): a league needs opponents' "
            "seats; train it with --opponents mirror"
        )
    if group_size < 1:
        raise ValueError(f"league_group_size must be >= 1, got {group_size}")
    plans: list[EpisodePlan] = [family.training([g] * group_size, seed) for g in groups]
    episodes = [
        (g, o, i)
        for g, o, plan in zip(groups, opponents, plans, strict=True)
        for i in range(len(plan))
    ]
    seats = [learner_seat(family.agents, g) for g, _, _ in episodes]
    batch = EpisodeBatch(
        envs=[env for plan in plans for env in plan.envs],
        seeds=[s for plan in plans for s in plan.seeds],
        options=[o for plan in plans for o in plan.options],
        to_groups=lambda results: [],  # replaced below: the league's groups
        trained_agents=[frozenset({seat}) for seat in seats],
    )
    league = LeagueBatch(batch, [g for g, _, _ in episodes], seats, [o for _, o, _ in episodes])
    batch.to_groups = league.to_groups
    return league
