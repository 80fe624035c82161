"""Property-test any pairwise (vote-based) reward function against the debate recipe's invariants.

Two kinds of helpers, for our own tests and for users who write their own
reward over :class:`~llm_envs.debate.rewards.Vote` lists:

* Hypothesis strategies: :func:`votes`, :func:`invalid_votes`,
  :func:`vote_lists` and :func:`agents_and_vote_lists`.
* Invariant checks, each raising :class:`AssertionError` with a message that
  names the invariant, the agent and the numbers: :func:`check_range`,
  :func:`check_leave_one_out`, :func:`check_relabelling`,
  :func:`check_tie_symmetry`, :func:`check_no_valid_votes`,
  :func:`check_invalid_votes_ignored`, :func:`check_win_minus_loss_relation`,
  and :func:`check_pairwise_invariants` to run the first six at once.

A reward function is called as ``reward_fn(votes, num_agents)`` and may return
a :class:`~llm_envs.debate.rewards.PairwiseResult` or a plain sequence of
floats (then the checks of ``total_votes``, ``malformed`` and ``any_votes``
are skipped). Rewards are compared with an absolute and relative tolerance
(``tol``), so a function that sums floats in another order still passes.

Example:
    >>> from hypothesis import given
    >>> from llm_envs.debate import win_rate
    >>> @given(vote_lists(num_agents=4, allow_invalid=True))
    ... def test_win_rate(votes):
    ...     check_pairwise_invariants(win_rate, votes, 4, low=0.0, high=1.0)
    >>> test_win_rate()

This module must never import hypothesis at import time (it is a test extra;
the checks work without it) and never holds a reward formula of its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from llm_envs.debate.rewards import PairwiseResult
from llm_envs.judgements import Vote, is_valid_vote

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = [
    "RewardFn",
    "agents_and_vote_lists",
    "check_invalid_votes_ignored",
    "check_leave_one_out",
    "check_no_valid_votes",
    "check_pairwise_invariants",
    "check_range",
    "check_relabelling",
    "check_tie_symmetry",
    "check_win_minus_loss_relation",
    "invalid_votes",
    "vote_lists",
    "votes",
]

RewardFn: TypeAlias = Callable[[list[Vote], int], PairwiseResult | Sequence[float]]
"""A pairwise reward function under test: ``reward_fn(votes, num_agents)``."""

# Operators that a vote must not carry: "<" and "==" are the parser's job to
# canonicalize, so a reward function has to count them as malformed.
_BAD_OPS = ("<", "==", ">=", "", "≻", "beats")
_DEFAULT_TOL = 1e-9


# ---------------------------------------------------------------- strategies


def votes(
    num_agents: int = 3, *, allow_invalid: bool = False, allow_ties: bool = True
) -> SearchStrategy[Vote]:
    """Single votes among ``num_agents`` agents.

    Valid votes have ``a != b`` in range and ``op`` in ``{">", "="}``; their
    author is any agent, including one of the two sides (which a leave-one-out
    reward must not count for that side).

    Args:
        num_agents: How many agents (``>= 2``).
        allow_invalid: Also draw invalid votes (see :func:`invalid_votes`).
        allow_ties: Draw ``"="`` votes; when ``False`` every valid vote is ``">"``.

    Returns:
        A hypothesis strategy of :class:`~llm_envs.debate.rewards.Vote`.
    """
    st = _strategies()
    _check_num_agents(num_agents)
    ops = [">", "="] if allow_ties else [">"]

    @st.composite
    def valid_vote(draw: Callable[[SearchStrategy[Any]], Any]) -> Vote:
        author = draw(st.integers(0, num_agents - 1))
        a = draw(st.integers(0, num_agents - 1))
        b = (a + draw(st.integers(1, num_agents - 1))) % num_agents  # any agent but a
        return Vote(author, a, draw(st.sampled_from(ops)), b)

    if allow_invalid:
        return st.one_of(valid_vote(), invalid_votes(num_agents))
    return valid_vote()


def invalid_votes(num_agents: int = 3) -> SearchStrategy[Vote]:
    """Votes that the debate recipe calls malformed: an id out of range, ``a == b``, or a bad op."""
    st = _strategies()
    _check_num_agents(num_agents)
    agent = st.integers(0, num_agents - 1)
    out_of_range = st.one_of(st.integers(-3, -1), st.integers(num_agents, num_agents + 3))
    op = st.sampled_from([">", "="])
    return st.one_of(
        st.builds(Vote, agent, out_of_range, op, agent),
        st.builds(Vote, agent, agent, op, out_of_range),
        agent.flatmap(lambda a: st.builds(Vote, agent, st.just(a), op, st.just(a))),
        st.builds(Vote, agent, agent, st.sampled_from(_BAD_OPS), agent),
    )


def vote_lists(
    num_agents: int = 3,
    *,
    allow_invalid: bool = False,
    allow_ties: bool = True,
    min_size: int = 0,
    max_size: int = 40,
) -> SearchStrategy[list[Vote]]:
    """Lists of votes, as an episode's vote ledger would hold them (see :func:`votes`)."""
    st = _strategies()
    vote = votes(num_agents, allow_invalid=allow_invalid, allow_ties=allow_ties)
    return st.lists(vote, min_size=min_size, max_size=max_size)


def agents_and_vote_lists(
    min_agents: int = 2,
    max_agents: int = 6,
    *,
    allow_invalid: bool = False,
    allow_ties: bool = True,
    max_size: int = 40,
) -> SearchStrategy[tuple[int, list[Vote]]]:
    """Pairs ``(num_agents, votes)`` with the number of agents drawn too."""
    st = _strategies()
    _check_num_agents(min_agents)
    if max_agents < min_agents:
        raise ValueError(f"max_agents must be >= min_agents ({min_agents}), got {max_agents}")
    return st.integers(min_agents, max_agents).flatmap(
        lambda n: st.tuples(
            st.just(n),
            vote_lists(n, allow_invalid=allow_invalid, allow_ties=allow_ties, max_size=max_size),
        )
    )


# -------------------------------------------------------------------- checks


def check_range(
    reward_fn: RewardFn,
    votes: Iterable[Vote],
    num_agents: int,
    *,
    low: float = 0.0,
    high: float = 1.0,
) -> None:
    """Every reward lies in ``[low, high]`` and there is one per agent.

    Use ``low=0.0, high=1.0`` for a win rate and ``low=-1.0, high=1.0`` for
    win minus loss (the debate recipe).

    Raises:
        AssertionError: If a reward is out of range, not finite, or missing.
    """
    vote_list = list(votes)
    rewards = _rewards(reward_fn, vote_list, num_agents)
    for agent, reward in enumerate(rewards):
        if not (math.isfinite(reward) and low <= reward <= high):
            raise AssertionError(
                f"range broken: reward of agent {agent} is {reward!r}, outside "
                f"[{low}, {high}]; votes={_short(vote_list)}"
            )


def check_leave_one_out(
    reward_fn: RewardFn,
    votes: Iterable[Vote],
    num_agents: int,
    *,
    tol: float = _DEFAULT_TOL,
) -> None:
    """Votes authored by agent ``i`` never change ``r_i`` (the debate recipe, leave-one-out).

    For every agent ``i``, ``r_i`` must stay the same when all votes authored
    by ``i`` are removed, and when votes authored by ``i`` are added: every
    vote re-authored as ``i``, plus ``i`` voting itself winner, loser and tied
    against each other agent.

    Raises:
        AssertionError: Naming the agent, the change and the numbers.
    """
    vote_list = list(votes)
    base = _rewards(reward_fn, vote_list, num_agents)
    for i in range(num_agents):
        own = sum(1 for vote in vote_list if vote.author == i)
        without = _rewards(reward_fn, [v for v in vote_list if v.author != i], num_agents)
        if not _close(base[i], without[i], tol):
            raise AssertionError(
                f"leave-one-out broken: removing the {own} votes authored by agent {i} "
                f"changed r_{i} from {base[i]!r} to {without[i]!r}; votes={_short(vote_list)}"
            )
        added = [Vote(i, a, op, b) for _, a, op, b in vote_list]
        for j in range(num_agents):
            if j != i:
                added += [Vote(i, i, ">", j), Vote(i, j, ">", i), Vote(i, i, "=", j)]
        with_added = _rewards(reward_fn, vote_list + added, num_agents)
        if not _close(base[i], with_added[i], tol):
            raise AssertionError(
                f"leave-one-out broken: adding {len(added)} votes authored by agent {i} "
                f"changed r_{i} from {base[i]!r} to {with_added[i]!r}; votes={_short(vote_list)}"
            )


def check_relabelling(
    reward_fn: RewardFn,
    votes: Iterable[Vote],
    num_agents: int,
    permutation: Sequence[int] | None = None,
    *,
    tol: float = _DEFAULT_TOL,
) -> None:
    """Renaming agents permutes the rewards the same way: ``r'[p[i]] == r[i]``.

    ``permutation`` ``p`` renames agent ``i`` to ``p[i]``; ``None`` checks two:
    reversing the ids and rotating them by one.

    Raises:
        AssertionError: Naming the permutation and the agent whose reward moved.
    """
    vote_list = list(votes)
    if permutation is None:
        permutations: list[Sequence[int]] = [
            [num_agents - 1 - i for i in range(num_agents)],
            [(i + 1) % num_agents for i in range(num_agents)],
        ]
    else:
        if sorted(permutation) != list(range(num_agents)):
            raise ValueError(
                f"permutation must list each of 0..{num_agents - 1} once, got {list(permutation)}"
            )
        permutations = [permutation]
    base = _rewards(reward_fn, vote_list, num_agents)
    for p in permutations:

        def rename(agent: int, p: Sequence[int] = p) -> int:
            # Ids out of range stay as they are: they stay invalid either way.
            return p[agent] if isinstance(agent, int) and 0 <= agent < num_agents else agent

        renamed = [Vote(rename(u), rename(a), op, rename(b)) for u, a, op, b in vote_list]
        moved = _rewards(reward_fn, renamed, num_agents)
        for i in range(num_agents):
            if not _close(base[i], moved[p[i]], tol):
                raise AssertionError(
                    f"relabelling broken: with agents renamed by {list(p)}, agent {i} "
                    f"(now {p[i]}) got {moved[p[i]]!r} instead of {base[i]!r}; "
                    f"votes={_short(vote_list)}"
                )


def check_tie_symmetry(
    reward_fn: RewardFn,
    votes: Iterable[Vote],
    num_agents: int,
    *,
    tol: float = _DEFAULT_TOL,
) -> None:
    """Writing every tie ``a = b`` as ``b = a`` changes no reward.

    Raises:
        AssertionError: Naming the agent whose reward depends on the side of a tie.
    """
    vote_list = list(votes)
    swapped = [Vote(u, b, op, a) if op == "=" else Vote(u, a, op, b) for u, a, op, b in vote_list]
    base = _rewards(reward_fn, vote_list, num_agents)
    after = _rewards(reward_fn, swapped, num_agents)
    for i in range(num_agents):
        if not _close(base[i], after[i], tol):
            raise AssertionError(
                f"tie symmetry broken: swapping the sides of every tie changed r_{i} from "
                f"{base[i]!r} to {after[i]!r}; votes={_short(vote_list)}"
            )


def check_no_valid_votes(reward_fn: RewardFn, votes: Iterable[Vote], num_agents: int) -> None:
    """Without a valid vote every reward is exactly 0 (the debate recipe).

    Only the invalid votes among ``votes`` are used (none at all is a case too).

    Raises:
        AssertionError: If a reward is not 0, or the counters disagree.
    """
    invalid = [vote for vote in votes if not is_valid_vote(vote, num_agents)]
    result = reward_fn(invalid, num_agents)
    rewards = _as_rewards(result, num_agents)
    if any(reward != 0.0 for reward in rewards):
        raise AssertionError(
            f"no-valid-vote default broken: rewards are {rewards} instead of all 0.0 "
            f"for votes={_short(invalid)}"
        )
    if isinstance(result, PairwiseResult) and (
        result.total_votes != 0 or result.any_votes or result.malformed != len(invalid)
    ):
        raise AssertionError(
            f"no-valid-vote counters broken: got total_votes={result.total_votes}, "
            f"any_votes={result.any_votes}, malformed={result.malformed}, expected 0, False, "
            f"{len(invalid)} for votes={_short(invalid)}"
        )


def check_invalid_votes_ignored(
    reward_fn: RewardFn,
    votes: Iterable[Vote],
    num_agents: int,
    invalid: Sequence[Vote] | None = None,
    *,
    tol: float = _DEFAULT_TOL,
) -> None:
    """Adding invalid votes changes nothing but ``malformed``, which grows by their number.

    ``invalid`` are the votes mixed in; ``None`` uses one of each kind (ids out
    of range on either side, ``a == b``, bad operators).

    Raises:
        AssertionError: Naming the agent or counter that changed.
    """
    vote_list = list(votes)
    if invalid is None:
        n = num_agents
        invalid = [
            Vote(0, n, ">", 0),
            Vote(1, 0, "=", -1),
            Vote(0, 1, ">", 1),
            Vote(1, 0, "<", 1),
            Vote(0, 1, "==", 0),
            Vote(1, 0, "", 1),
        ]
    still_valid = [vote for vote in invalid if is_valid_vote(vote, num_agents)]
    if still_valid:
        raise ValueError(f"invalid must hold only invalid votes, got valid ones: {still_valid}")
    # Interleave, so that a function that stops at the first bad vote is caught too.
    mixed: list[Vote] = []
    for k in range(max(len(vote_list), len(invalid))):
        mixed += [*invalid[k : k + 1], *vote_list[k : k + 1]]
    base_result = reward_fn(vote_list, num_agents)
    mixed_result = reward_fn(mixed, num_agents)
    base = _as_rewards(base_result, num_agents)
    after = _as_rewards(mixed_result, num_agents)
    for i in range(num_agents):
        if not _close(base[i], after[i], tol):
            raise AssertionError(
                f"invalid votes not ignored: mixing in {len(invalid)} invalid votes changed "
                f"r_{i} from {base[i]!r} to {after[i]!r}; invalid={_short(invalid)}"
            )
    if isinstance(base_result, PairwiseResult) and isinstance(mixed_result, PairwiseResult):
        expected = (
            base_result.total_votes,
            base_result.any_votes,
            base_result.malformed + len(invalid),
        )
        got = (mixed_result.total_votes, mixed_result.any_votes, mixed_result.malformed)
        if got != expected:
            raise AssertionError(
                "invalid votes not ignored: (total_votes, any_votes, malformed) is "
                f"{got} instead of {expected} after mixing in {len(invalid)} invalid votes"
            )


def check_win_minus_loss_relation(
    win_rate_fn: RewardFn,
    win_minus_loss_fn: RewardFn,
    votes: Iterable[Vote],
    num_agents: int,
    *,
    tol: float = _DEFAULT_TOL,
) -> None:
    """Without ties, ``win_minus_loss == 2 * win_rate - 1`` for every agent with votes.

    Ties are removed from ``votes`` first. An agent "with votes" is one that
    some valid vote by another agent involves; every other agent must get 0
    from both functions.

    Raises:
        AssertionError: Naming the agent and both rewards.
    """
    vote_list = [vote for vote in votes if vote.op != "="]
    win_rates = _rewards(win_rate_fn, vote_list, num_agents)
    margins = _rewards(win_minus_loss_fn, vote_list, num_agents)
    judged = {
        side
        for vote in vote_list
        if is_valid_vote(vote, num_agents)
        for side in (vote.a, vote.b)
        if side != vote.author
    }
    for i in range(num_agents):
        expected = 2 * win_rates[i] - 1 if i in judged else 0.0
        if i not in judged and win_rates[i] != 0.0:
            raise AssertionError(
                f"agent {i} has no votes but win_rate gives it {win_rates[i]!r} instead of 0.0; "
                f"votes={_short(vote_list)}"
            )
        if not _close(margins[i], expected, tol):
            raise AssertionError(
                f"win_minus_loss != 2 * win_rate - 1 without ties: agent {i} has "
                f"win_rate {win_rates[i]!r}, so win_minus_loss should be {expected!r}, "
                f"got {margins[i]!r}; votes={_short(vote_list)}"
            )


def check_pairwise_invariants(
    reward_fn: RewardFn,
    votes: Iterable[Vote],
    num_agents: int,
    *,
    low: float,
    high: float,
    tol: float = _DEFAULT_TOL,
) -> None:
    """Run every single-function check: range, leave-one-out, relabelling, ties, invalid votes.

    Args:
        reward_fn: The reward function under test.
        votes: The votes (valid and invalid ones mixed is best).
        num_agents: How many agents.
        low: The smallest reward allowed (``0.0`` for a win rate, ``-1.0`` for win minus loss).
        high: The largest reward allowed.
        tol: Absolute and relative tolerance on each reward.

    Raises:
        AssertionError: From the first check that fails.
    """
    vote_list = list(votes)
    check_range(reward_fn, vote_list, num_agents, low=low, high=high)
    check_leave_one_out(reward_fn, vote_list, num_agents, tol=tol)
    check_relabelling(reward_fn, vote_list, num_agents, tol=tol)
    check_tie_symmetry(reward_fn, vote_list, num_agents, tol=tol)
    check_no_valid_votes(reward_fn, vote_list, num_agents)
    check_invalid_votes_ignored(reward_fn, vote_list, num_agents, tol=tol)


# ------------------------------------------------------------------- helpers


def _strategies() -> Any:
    try:
        from hypothesis import strategies
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the vote strategies need hypothesis: pip install 'llm-envs[test]'"
        ) from None
    return strategies


def _check_num_agents(num_agents: int) -> None:
    if not isinstance(num_agents, int) or num_agents < 2:
        raise ValueError(f"num_agents must be an int >= 2, got {num_agents!r}")


def _as_rewards(result: PairwiseResult | Sequence[float], num_agents: int) -> tuple[float, ...]:
    rewards = tuple(result.rewards if isinstance(result, PairwiseResult) else result)
    if len(rewards) != num_agents:
        raise AssertionError(
            f"expected one reward per agent ({num_agents}), got {len(rewards)}: {rewards}"
        )
    return rewards


def _rewards(reward_fn: RewardFn, votes: list[Vote], num_agents: int) -> tuple[float, ...]:
    return _as_rewards(reward_fn(votes, num_agents), num_agents)


def _close(x: float, y: float, tol: float) -> bool:
    return math.isclose(x, y, rel_tol=tol, abs_tol=tol)


def _short(votes: Sequence[Vote], limit: int = 12) -> str:
    shown = ", ".join(f"({u}: {a} {op} {b})" for u, a, op, b in votes[:limit])
    more = f", ... {len(votes) - limit} more" if len(votes) > limit else ""
    return f"[{shown}{more}]"
