"""The majority vote of independent answers: the baseline a debate is compared with.

Multi-agent debate papers compare a debate of N agents with N answers sampled
independently and reduced to their most common one. Here each of the N answers
is sampled from the debate's own first prompt (``agent_0``'s, round 1: the
contract, the question and no other agent's answer), parsed by the debate's
parser (:func:`~llm_envs.debate.protocol.parse_response`) and scored by the
question's checker, so the numbers sit beside the evaluation's
``solution_correct`` on the same scale:

* ``majority_vote/correct``: the share of questions whose majority answer is
  correct;
* ``single_answer/correct``: the share of the independent answers that are
  correct (what one agent alone scores).

Two answers are the same answer when they share an :func:`answer_key`. An
answer that breaks the contract, or whose solution is empty, does not vote; a
question without a vote has no majority, which is wrong. A tie goes to the
tied answer sampled first (:func:`majority`). Questions without a reference
answer are left out; with none, there is nothing to report.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from llm_envs.debate.protocol import ParseError, parse_response
from llm_envs.debate.questions import DebateQuestion
from llm_envs.family import Sampler
from llm_envs.tasks.math_answers import (
    extract_answer,
    format_number,
    normalize_answer,
    parse_number,
)

__all__ = ["answer_key", "majority", "majority_vote", "vote_on"]


def answer_key(solution: str) -> str | None:
    """What two solutions share when they give the same answer; None for no answer.

    The number the solution states (its whole text, else the answer the math
    rules extract: :func:`~llm_envs.tasks.math_answers.extract_answer`), written
    canonically, so ``"1,000"`` and ``"1000.0"`` agree; else the normalized text.

    Example:
        >>> answer_key("1,000"), answer_key("The answer is 1000.0"), answer_key(" New York. ")
        ('1000', '1000', 'newyork')
        >>> answer_key("  ") is None
        True
    """
    value = parse_number(solution)
    if value is None:
        extracted = extract_answer(solution)
        value = parse_number(extracted) if extracted is not None else None
    if value is not None:
        return format_number(value)
    return normalize_answer(solution) or None


def majority(keys: Sequence[Hashable | None]) -> int | None:
    """The index of the majority answer among ``keys`` (None: an answer that does not vote).

    The most common key wins; among keys equally common, the one that occurs
    first. The index returned is that key's first occurrence; None when no
    answer votes.

    Example:
        >>> majority(["5", "6", "6"]), majority(["5", "6", "7"]), majority([None, "6", "5", "5"])
        (1, 0, 2)
        >>> majority([None, None]) is None
        True
    """
    counts: dict[Hashable, int] = {}
    first: dict[Hashable, int] = {}
    for index, key in enumerate(keys):
        if key is not None:
            counts[key] = counts.get(key, 0) + 1
            first.setdefault(key, index)
    if not counts:
        return None
    # max keeps the first of equal counts, and the dict holds keys in first-seen order.
    return first[max(counts, key=counts.__getitem__)]


def vote_on(question: DebateQuestion, texts: Sequence[str]) -> tuple[bool, float]:
    """Whether the majority of ``texts`` answers ``question`` correctly, and the share correct.

    Raises:
        ValueError: ``question`` has no reference answer, or ``texts`` is empty.
    """
    if question.answer is None or not texts:
        raise ValueError(
            f"a vote needs a question with a reference answer and at least one text, got "
            f"answer={question.answer!r} and {len(texts)} texts"
        )
    solutions = [_solution(text) for text in texts]
    correct = [s is not None and bool(question.is_correct(s)) for s in solutions]
    winner = majority([answer_key(s) if s is not None else None for s in solutions])
    return (winner is not None and correct[winner]), sum(correct) / len(correct)


def majority_vote(
    sample: Sampler,
    questions: Sequence[DebateQuestion],
    seeds: Sequence[int],
    env_kwargs: Mapping[str, Any],
    answers: int,
) -> dict[str, float]:
    """Sample ``answers`` independent answers per question (one call); the module's numbers.

    Args:
        sample: the policy; it gets every question's first prompt ``answers``
            times, in one call.
        questions: the questions; those without a reference answer are skipped.
        seeds: each question's reset seed (the debate's own, so the prompt is
            the one its first agent reads).
        env_kwargs: :func:`llm_envs.debate.env` arguments, as the debates are played.
        answers: answers per question (the debate's number of agents), at least 1.

    Raises:
        ValueError: ``answers`` below 1, as many seeds as questions missing, or a
            sampler that returns another number of texts than it was asked for.
    """
    from llm_envs.debate import env

    if answers < 1 or len(seeds) != len(questions):
        raise ValueError(
            f"need at least one answer per question and a seed per question, got answers="
            f"{answers}, {len(questions)} questions and {len(seeds)} seeds"
        )
    asked = [(q, s) for q, s in zip(questions, seeds, strict=True) if q.answer is not None]
    if not asked:
        return {}
    turns = []
    for question, seed in asked:
        debate = env(**env_kwargs)
        debate.reset(seed=seed, options={"question": question})
        agent = debate.agent_selection
        turns += [(agent, debate.observe(agent), dict(debate.infos[agent]))] * answers
        debate.close()
    texts = sample(turns)
    if len(texts) != len(turns):
        raise ValueError(f"the sampler returned {len(texts)} texts for {len(turns)} turns")
    votes = [
        vote_on(question, [str(t) for t in texts[i * answers : (i + 1) * answers]])
        for i, (question, _) in enumerate(asked)
    ]
    return {
        "majority_vote/correct": sum(won for won, _ in votes) / len(votes),
        "single_answer/correct": sum(share for _, share in votes) / len(votes),
    }


def _solution(text: str) -> str | None:
    """The answer's ``<solution>``, None when the answer breaks the contract or states none."""
    try:
        solution = parse_response(text, 0).solution
    except ParseError:
        return None
    return solution if solution.strip() else None
