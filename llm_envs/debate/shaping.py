"""Opt-in reward shaping for the debate: partial credit that a small model can climb.

The debate's reward (the debate recipe) pays only for peer votes, and a parse error
costs -1. A model that never writes the five-tag contract gets the same -1 for
every answer, however close it came, so policy gradients have nothing to
follow. :class:`DebateShaping` adds, to every answer's step reward,

    ``contract * contract_score(answer) + correct * solution_correct
    + judge * judge_score(answer's votes) + vote * voted``

where :func:`~llm_envs.debate.protocol.contract_score` is the fraction of the
contract's five parts written correctly (1 exactly when the answer parses),
``solution_correct`` is 1 when the solution matches the question's reference
answer, and :func:`judge_score` is the share of the answer's votes that agree
with the reference: a correct solution above a wrong one, a tie between two
right or two wrong ones (questions without a reference answer add nothing for
either term), and ``voted`` is 1 when the answer cast a valid vote (both
``judge`` and ``vote`` count only answers that had two other answers to
compare; the debate's ``voted`` info, see :func:`judging_info`).

The seed's reward pays an agent for the votes it *receives*, never for the
ones it casts, so nothing in it teaches a model to judge: a small model soon
learns to write N/A in ``<comparison>``, and a debate with no votes has no
winner. The ``vote`` term pays for casting a vote at all, the ``judge`` term
for casting votes that a referee would agree with.

This is *shaping*, not the seed's reward: it is off unless asked for
(``debate.env(shaping={"contract": 0.5})``), it composes with the pairwise
reward (both are added), and every shaped answer says what it added in its
infos under ``shaping/`` names (``shaping/contract``, ``shaping/correct``,
``shaping/judge``, ``shaping/vote``, ``shaping/reward``), so a metric built
from them is never mistaken for the win rate.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pettingzoo import AECEnv
from pettingzoo.utils import BaseWrapper

from llm_envs.arguments import check_number
from llm_envs.debate.protocol import Comparison, contract_score
from llm_envs.judgements import Vote, is_valid_vote, lower_seat_wins

__all__ = [
    "SHAPING_TERMS",
    "DebateShaping",
    "OthersSeen",
    "judge_score",
    "judging_info",
    "shaping_reward",
    "visible_correctness",
]

SHAPING_TERMS = ("contract", "correct", "judge", "vote")
"""The terms :class:`DebateShaping` can weigh, as ``debate.env(shaping=...)`` names them."""


def shaping_reward(
    text: str,
    solution_correct: bool | None,
    *,
    contract: float,
    correct: float,
    judge: float = 0.0,
    judgement: float | None = None,
    vote: float = 0.0,
    voted: float | None = None,
) -> float:
    """The shaping one debate answer earns (see the module docstring).

    Args:
        text: the answer, verbatim.
        solution_correct: whether its solution matches the reference; None without one.
        contract: weight of :func:`~llm_envs.debate.protocol.contract_score`.
        correct: weight of a correct solution.
        judge: weight of ``judgement``.
        judgement: the answer's :func:`judge_score`; None when it had nothing to judge.
        vote: weight of ``voted``.
        voted: 1 when the answer cast a valid vote, 0 when it cast none; None
            when it had nothing to compare (see :func:`judging_info`).

    Example:
        >>> shaping_reward("<solution>4</solution>", True, contract=0.5, correct=1.0)
        1.1
        >>> shaping_reward("no tags", None, contract=0.5, correct=1.0)
        0.0
        >>> shaping_reward("no tags", None, contract=0.0, correct=0.0, judge=0.5, judgement=1.0)
        0.5
    """
    bonus = contract * contract_score(text) + correct * float(bool(solution_correct))
    if judgement is not None:
        bonus += judge * judgement
    if voted is not None:
        bonus += vote * voted
    return bonus


def judge_score(comparisons: Sequence[Comparison], correct: Mapping[int, bool]) -> float | None:
    """The share of an answer's votes that agree with the reference answer.

    A vote ``a > b`` agrees when ``a``'s solution is correct and ``b``'s is
    not; ``a = b`` agrees when both are correct or both wrong. A vote naming
    an agent whose answer the voter could not see agrees with nothing.

    Args:
        comparisons: the answer's votes, ``(a, op, b)`` as
            :func:`~llm_envs.debate.protocol.parse_response` keeps them.
        correct: for every *other* agent whose answer the voter saw, whether
            its latest solution was correct (a broken answer is not);
            see :func:`visible_correctness`.

    Returns:
        None when fewer than two answers were there to compare (nothing to
        judge, whatever was written); else the share of agreeing votes, 0
        when the answer cast none.

    Example:
        >>> correct = {0: True, 1: False, 2: False}
        >>> judge_score([(0, ">", 1), (1, "=", 2)], correct)
        1.0
        >>> judge_score([(1, ">", 0)], correct), judge_score([], correct)
        (0.0, 0.0)
        >>> print(judge_score([(0, ">", 1)], {0: True}))
        None
    """
    if len(correct) < 2:
        return None
    if not comparisons:
        return 0.0
    agreed = 0
    for a, op, b in comparisons:
        if a not in correct or b not in correct:
            continue
        if op == "=":
            agreed += correct[a] == correct[b]
        else:
            agreed += correct[a] and not correct[b]
    return agreed / len(comparisons)


def visible_correctness(turns: Sequence[tuple[int, bool]], voter: int) -> dict[int, bool]:
    """Each other agent's latest answer before the voter's turn: was it correct?

    Args:
        turns: ``(agent, solution_correct)`` of every answer so far, in order
            (a broken answer counts as not correct).
        voter: the agent about to answer; its own answers are left out.

    Example:
        >>> visible_correctness([(0, True), (1, False), (2, True), (0, False)], voter=2)
        {0: False, 1: False}
    """
    latest: dict[int, bool] = {}
    for agent, correct in turns:
        if agent != voter:
            latest[agent] = correct
    return latest


class OthersSeen(Mapping[int, bool]):
    """Every agent's latest answer but the voter's: was it correct? A view, built in O(1).

    ``latest`` maps each agent that has answered to whether its latest answer
    was correct (a broken answer is not); the view leaves ``voter`` out, as
    :func:`visible_correctness` does, without copying a debate's N entries per answer.

    Example:
        >>> seen = OthersSeen({0: True, 1: False, 2: True}, voter=2)
        >>> len(seen), dict(seen)
        (2, {0: True, 1: False})
    """

    def __init__(self, latest: Mapping[int, bool], voter: int) -> None:
        self._latest = latest
        self._voter = voter

    def __getitem__(self, agent: int) -> bool:
        if agent == self._voter:
            raise KeyError(agent)
        return self._latest[agent]

    def __contains__(self, agent: object) -> bool:
        return agent != self._voter and agent in self._latest

    def __len__(self) -> int:
        return len(self._latest) - (self._voter in self._latest)

    def __iter__(self) -> Iterator[int]:
        return (agent for agent in self._latest if agent != self._voter)


def judging_info(
    comparisons: Sequence[Comparison],
    counted: Sequence[Vote],
    seen: Mapping[int, bool],
    num_agents: int,
    *,
    reference: bool,
) -> dict[str, float]:
    """What one answer's votes say about its judging: the debate's per-answer vote infos.

    Args:
        comparisons: the comparisons the answer wrote (``DebateResponse.comparisons``).
        counted: its votes as the ledger counts them (``vote_counting`` applied).
        seen: every other agent that answered before it, mapped to whether its
            latest answer was correct (:class:`OthersSeen`).
        num_agents: agents in the debate.
        reference: whether the question has a reference answer (else the
            correctness in ``seen`` means nothing and no agreement is reported).

    Returns:
        Nothing when fewer than two other answers were there to compare. Else
        ``voted``: 1.0 when the answer cast at least one valid vote, else 0.0;
        ``vote_agreement``: its :func:`judge_score` (the share of its
        comparisons that agree with the reference), when it wrote any and the
        question has a reference answer; ``vote_lower_seat``: the share of its
        valid strict votes that put the lower-numbered seat first (a judge that
        votes by seat drifts from one half), when it cast one.

    Example:
        >>> seen = {0: True, 1: False}
        >>> judging_info([(1, ">", 0)], [Vote(2, 1, ">", 0)], seen, 3, reference=True)
        {'voted': 1.0, 'vote_agreement': 0.0, 'vote_lower_seat': 0.0}
        >>> judging_info([], [], seen, 3, reference=False)
        {'voted': 0.0}
        >>> judging_info([], [], {0: True}, 3, reference=True)  # one answer: nothing to compare
        {}
    """
    if len(seen) < 2:
        return {}
    info = {"voted": float(any(is_valid_vote(v, num_agents) for v in counted))}
    if comparisons and reference:
        agreement = judge_score(comparisons, seen)
        if agreement is not None:
            info["vote_agreement"] = agreement
    lower, strict = lower_seat_wins(counted, num_agents)
    if strict:
        info["vote_lower_seat"] = lower / strict
    return info


class DebateShaping(BaseWrapper[str, Any, Any]):
    """Adds partial credit for the contract, a correct solution and sound votes to each answer.

    Args:
        env: a debate environment (possibly wrapped, e.g. by a pairwise reward).
        contract: weight of :func:`~llm_envs.debate.protocol.contract_score`.
        correct: weight of a solution that matches the reference answer.
        judge: weight of :func:`judge_score`, the share of the answer's votes
            that agree with the reference answer.

    Raises:
        TypeError: if ``env`` is not a debate (it has no ``turns`` record).
        ValueError: if a weight is negative or not finite, or all are 0.

    Example:
        >>> from llm_envs import debate
        >>> env = debate.env(num_agents=3, max_rounds=1, shaping={"contract": 0.5})
        >>> env.reset(seed=0)
        >>> env.step("<solution>4</solution> and then prose")
        >>> env.unwrapped.infos["agent_0"]["shaping/contract"]
        0.2
    """

    def __init__(
        self,
        env: AECEnv[str, Any, Any],
        *,
        contract: float = 0.5,
        correct: float = 0.0,
        judge: float = 0.0,
        vote: float = 0.0,
    ):
        if not hasattr(env.unwrapped, "turns") or not hasattr(env.unwrapped, "question"):
            raise TypeError(
                f"DebateShaping shapes debate answers, and {type(env.unwrapped).__name__} is "
                "not a debate; wrap llm_envs.debate.env()"
            )
        check_number("contract", contract, minimum=0)
        check_number("correct", correct, minimum=0)
        check_number("judge", judge, minimum=0)
        check_number("vote", vote, minimum=0)
        if contract == 0 and correct == 0 and judge == 0 and vote == 0:
            raise ValueError(
                "DebateShaping with every weight 0 (contract, correct, judge, vote) adds "
                "nothing; give a weight > 0 or leave the wrapper out (shaping=None)"
            )
        super().__init__(env)
        self.contract = float(contract)
        self.correct = float(correct)
        self.judge = float(judge)
        self.vote = float(vote)

    def step(self, action: Any) -> None:
        """Step the debate; when an answer was given, add its shaping to the author's reward."""
        base = self.env.unwrapped
        agent = base.agent_selection
        answered = (
            isinstance(action, str)
            and bool(base.agents)
            and not (base.terminations.get(agent) or base.truncations.get(agent))
        )
        self.env.step(action)
        if not answered:
            return
        # The answer's own infos (the debate writes them): shaping reads, never re-judges.
        info = {k: v for k, v in base.infos[agent].items() if not k.startswith("shaping/")}
        reference = base.question.answer is not None
        contract = contract_score(action)
        correct = bool(info.get("solution_correct")) if reference else None
        could_vote = "voted" in info  # two other answers were there to compare
        judgement = float(info.get("vote_agreement", 0.0)) if reference and could_vote else None
        voted = float(info["voted"]) if could_vote else None
        bonus = shaping_reward(
            action,
            correct,
            contract=self.contract,
            correct=self.correct,
            judge=self.judge,
            judgement=judgement,
            vote=self.vote,
            voted=voted,
        )
        base.rewards[agent] += bonus
        base._cumulative_rewards[agent] += bonus
        shaped: dict[str, float] = {"shaping/contract": contract, "shaping/reward": bonus}
        if correct is not None:
            shaped["shaping/correct"] = float(correct)
        if judgement is not None:
            shaped["shaping/judge"] = judgement
        if voted is not None:
            shaped["shaping/vote"] = voted
        base.infos[agent] = {**info, **shaped}


def check_shaping(shaping: Mapping[str, float] | None) -> dict[str, float] | None:
    """Validate ``debate.env(shaping=...)``: a mapping of :data:`SHAPING_TERMS` to weights.

    Example:
        >>> check_shaping({"contract": 0.5})
        {'contract': 0.5}
        >>> check_shaping({"format": 1.0})
        Traceback (most recent call last):
        ValueError: shaping has no term 'format'; its terms are ('contract', 'correct', ...
    """
    if shaping is None:
        return None
    if not isinstance(shaping, Mapping):
        raise TypeError(
            f"shaping must be a mapping of term to weight or None, got {shaping!r:.60}; "
            "pass e.g. shaping={'contract': 0.5, 'correct': 0.5}"
        )
    for term in shaping:
        if term not in SHAPING_TERMS:
            raise ValueError(
                f"shaping has no term {term!r}; its terms are {SHAPING_TERMS}, "
                "e.g. shaping={'contract': 0.5, 'correct': 0.5}"
            )
    return {term: float(weight) for term, weight in shaping.items()}
