"""Scripted debaters: text agents without a model, for demos, tests and benchmarks.

Each agent is a callable ``agent(observation, info) -> str`` (the
:class:`~llm_envs.family.Agent` protocol) that reads only what a model would get plus the
env's context infos (``round``, ``turn``). They are deterministic for a seed.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from llm_envs.arguments import check_int, check_number
from llm_envs.contract import Observation
from llm_envs.debate.protocol import (
    COMPARISON,
    CONSENSUS_REASON,
    EVALUATION,
    SOLUTION,
    format_response,
)
from llm_envs.family import Agent
from llm_envs.tasks.math_answers import check_answer
from llm_envs.text_env import numbered_agents

__all__ = [
    "JudgingDebater",
    "MalformedDebater",
    "ScriptedDebater",
    "StubbornDebater",
    "format_answer",
    "question_in",
    "scripted_debaters",
]


def question_in(observation: Observation) -> str:
    r"""The debate question an observation asks (its ``Question: ...`` line), or ``""``.

    Example:
        >>> question_in({"messages": [{"role": "user", "content": "Question: 2 + 3?\nRules"}]})
        '2 + 3?'
    """
    for message in observation["messages"]:
        if message["role"] == "user" and message["content"].startswith("Question: "):
            return str(message["content"]).split("\n", 1)[0].removeprefix("Question: ")
    return ""


def format_answer(
    solution: str,
    evaluation: str = "N/A",
    comparisons: Sequence[str] = (),
    consensus: bool = False,
    reason: str = "",
) -> str:
    """Write an answer in the debate's five-tag contract, one comparison per line.

    A positional shorthand for :func:`llm_envs.debate.protocol.format_response`.

    Example:
        >>> text = format_answer("4", comparisons=["Agent 1 > Agent 2"], consensus=True)
        >>> text.splitlines()[:3]
        ['<solution>', '4', '</solution>']
    """
    return format_response(
        solution=solution,
        evaluation=evaluation,
        comparison="\n".join(comparisons) if comparisons else "N/A",
        consensus=consensus,
        consensus_reason=reason,
    )


class ScriptedDebater:
    """A well-formed debater with seeded random votes.

    It answers with a fixed solution (or ``solver(question_text)``), votes on
    up to ``max_votes`` random pairs of *other* agents that the round allows
    (in round 1 only agents who already answered), declares a tie with
    probability ``tie_probability``, and says YES from round ``agree_from_round`` on.

    Args:
        agent_id: its index in the debate.
        num_agents: debaters in the debate.
        solution: the answer it gives.
        solver: ``solver(question) -> solution``; overrides ``solution``.
        agree_from_round: first round in which it says YES (``None``: never).
        max_votes: most comparisons per answer.
        tie_probability: chance that a comparison is a tie.
        seed: seed of its random votes.
    """

    def __init__(
        self,
        agent_id: int,
        num_agents: int,
        *,
        solution: str = "42",
        solver: Callable[[str], str] | None = None,
        agree_from_round: int | None = 2,
        max_votes: int = 2,
        tie_probability: float = 0.2,
        seed: int = 0,
    ) -> None:
        self.num_agents = check_int("num_agents", num_agents, minimum=2)
        self.agent_id = check_int("agent_id", agent_id, minimum=0, maximum=num_agents - 1)
        if agree_from_round is not None:
            check_int("agree_from_round", agree_from_round, minimum=1, meaning=" or None (never)")
        self.agree_from_round = agree_from_round
        self.max_votes = check_int("max_votes", max_votes, minimum=0)
        self.tie_probability = check_number(
            "tie_probability", tie_probability, minimum=0, maximum=1
        )
        self.solution = solution
        self.solver = solver
        self._rng = random.Random(check_int("seed", seed) * 1_000_003 + agent_id)

    def _candidates(self, round_number: int) -> list[int]:
        if round_number == 1:
            # Fixed turn order: in round 1 only lower ids have answered.
            return list(range(self.agent_id))
        return [j for j in range(self.num_agents) if j != self.agent_id]

    def __call__(self, observation: Observation, info: Mapping[str, Any]) -> str:
        """Answer with the solution, random votes on allowed pairs, and the consensus rule."""
        round_number = int(info.get("round", 1))
        candidates = self._candidates(round_number)
        pairs = [(a, b) for i, a in enumerate(candidates) for b in candidates[i + 1 :]]
        self._rng.shuffle(pairs)
        comparisons = []
        for a, b in pairs[: self.max_votes]:
            if self._rng.random() < self.tie_probability:
                comparisons.append(f"Agent {a} = Agent {b}")
            elif self._rng.random() < 0.5:
                comparisons.append(f"Agent {a} > Agent {b}")
            else:
                comparisons.append(f"Agent {b} > Agent {a}")
        agree = self.agree_from_round is not None and round_number >= self.agree_from_round
        solution = self.solver(question_in(observation)) if self.solver else self.solution
        evaluation = "N/A" if not candidates else "The other answers look plausible."
        reason = "We agree on the answer." if agree else "I want to see more arguments."
        return format_answer(solution, evaluation, comparisons, agree, reason)


# ASCII digits, a few: the prompt shows the debaters' answers too, and a number one
# of them wrote in other digits, or 5,000 of them (past int()'s limit), is no seat.
_SHOWN_SOLUTION = re.compile(r"^\[Agent ([0-9]{1,4})\]\nSolution: (.*)$", re.MULTILINE)
_SHOWN_NO_ANSWER = re.compile(r"^\[Agent ([0-9]{1,4})\]\n\(no valid answer", re.MULTILINE)
_SHOWN = re.compile(f"{_SHOWN_SOLUTION.pattern}|{_SHOWN_NO_ANSWER.pattern}", re.MULTILINE)


class JudgingDebater:
    """A well-formed debater that solves, judges the others by its own answer, and votes so.

    It answers ``solver(question)`` (a short worked answer), reads the other
    agents' solutions from its prompt (``observation_mode="prompt"``, the
    default), says in ``<evaluation>`` which of them agree with its answer,
    and votes in three levels: an answer that agrees above one that does
    not, and both above one that broke the contract (shown as "no valid
    answer" when the env masks parse errors); two of one level tie. It says
    YES once every other agent's latest answer agrees with its own. A
    teacher for warm starts: what it writes is what a good debater writes.

    Args:
        agent_id: its index in the debate.
        num_agents: debaters in the debate.
        solver: ``solver(question) -> answer`` (e.g. ``"7"``), or None when it
            cannot answer (it then says so and judges nobody).
        max_votes: most comparisons per answer.

    Example:
        >>> from llm_envs import debate
        >>> from llm_envs.debate import parse_response
        >>> env = debate.env(num_agents=3, max_rounds=1)
        >>> env.reset(seed=0, options={"question": "What is 2 + 3?"})
        >>> env.step("<solution>5</solution><evaluation>N/A</evaluation>"
        ...          "<consensus>NO</consensus><consensus_reason>first")
        >>> env.step("<solution>6</solution><evaluation>N/A</evaluation>"
        ...          "<consensus>NO</consensus><consensus_reason>guess")
        >>> agent = JudgingDebater(2, 3, solver=lambda q: "5")
        >>> text = agent(env.observe("agent_2"), env.unwrapped.infos["agent_2"])
        >>> parse_response(text, author=2).comparisons
        ((0, '>', 1),)
    """

    def __init__(
        self,
        agent_id: int,
        num_agents: int,
        *,
        solver: Callable[[str], str | None],
        max_votes: int = 3,
    ) -> None:
        check_int("num_agents", num_agents, minimum=2)
        check_int("agent_id", agent_id, minimum=0, maximum=num_agents - 1)
        check_int("max_votes", max_votes, minimum=0)
        self.agent_id = agent_id
        self.num_agents = num_agents
        self.solver = solver
        self.max_votes = max_votes

    def __call__(self, observation: Observation, info: Mapping[str, Any]) -> str:
        """Solve, judge the answers shown in the prompt, vote, and agree when all agree."""
        text = "\n".join(m["content"] for m in observation["messages"] if m["role"] == "user")
        answer = self.solver(question_in(observation))
        shown: dict[int, str | None] = {}  # None: the answer broke the contract
        for match in _SHOWN.finditer(text):
            agent = int(match.group(1) or match.group(3))
            # An agent the debate does not have is another debater's answer imitating
            # the prompt: this debater would judge, and vote on, no one.
            if agent != self.agent_id and agent < self.num_agents:
                shown[agent] = match.group(2)  # later rounds replace earlier ones
        solution = "I cannot work this out." if answer is None else f"The answer is {answer}."
        level = {  # 2: agrees with me, 1: differs, 0: no valid answer
            a: 0 if s is None else 2 if answer is not None and check_answer(s, answer) else 1
            for a, s in shown.items()
        }
        said = {2: "agrees with me", 1: "differs from me", 0: "gave no valid answer"}
        evaluation = "; ".join(f"Agent {a} {said[level[a]]}" for a in level) + "."
        groups = [[a for a in sorted(level) if level[a] == k] for k in (2, 1, 0)]
        votes = [
            f"Agent {a} > Agent {b}"
            for i, higher in enumerate(groups)
            for lower in groups[i + 1 :]
            for a in higher
            for b in lower
        ]
        votes += [
            f"Agent {a} = Agent {b}" for group in groups for a, b in itertools.pairwise(group)
        ]
        votes = votes[: self.max_votes] if len(shown) >= 2 else []
        if not shown:
            evaluation = "N/A"
        everyone = len(shown) == self.num_agents - 1
        consensus = answer is not None and everyone and all(v == 2 for v in level.values())
        reason = (
            "Every agent gives the same answer."
            if consensus
            else "Not every agent has given my answer yet."
        )
        return format_answer(solution, evaluation, votes, consensus, reason)


class StubbornDebater(ScriptedDebater):
    """A well-formed debater that never agrees, so the debate runs to ``max_rounds``."""

    def __init__(self, agent_id: int, num_agents: int, **kwargs: Any) -> None:
        super().__init__(agent_id, num_agents, **{**kwargs, "agree_from_round": None})


class MalformedDebater:
    """A debater whose text breaks the contract: a missing tag, or no tags at all.

    Args:
        style: ``"missing_consensus"`` (four tags, no ``<consensus>``),
            ``"prose"`` (plain text), or ``"truncated"`` (cut off mid-tag).
    """

    STYLES = ("missing_consensus", "prose", "truncated")

    def __init__(self, style: str = "missing_consensus") -> None:
        if style not in self.STYLES:
            raise ValueError(f"style must be one of {self.STYLES}, got {style!r}")
        self.style = style

    def __call__(self, observation: Observation, info: Mapping[str, Any]) -> str:
        """Return text that :func:`~llm_envs.debate.parse_response` rejects."""
        if self.style == "prose":
            return "I think the answer is 42, and everyone else is wrong."
        if self.style == "truncated":
            return f"<{SOLUTION}>42</{SOLUTION}>\n<{EVALUATION}>Agent 0 is rig"
        return (
            f"<{SOLUTION}>42</{SOLUTION}>\n<{EVALUATION}>N/A</{EVALUATION}>\n"
            f"<{COMPARISON}>N/A</{COMPARISON}>\n<{CONSENSUS_REASON}>none</{CONSENSUS_REASON}>"
        )


def scripted_debaters(num_agents: int, seed: int = 0, **kwargs: Any) -> dict[str, Agent]:
    """One :class:`ScriptedDebater` per agent, keyed ``"agent_i"`` like the environment's agents."""
    return {
        agent: ScriptedDebater(i, num_agents, seed=seed, **kwargs)
        for i, agent in enumerate(numbered_agents(num_agents))
    }
