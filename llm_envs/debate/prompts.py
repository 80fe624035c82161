"""Prompt text for the debate environment (the debate recipe, "Observation Construction").

Pure functions from debate state to strings. The environment decides *what* an
agent sees (which rounds, which turns); this module decides *how* it reads.
Nothing here parses model output: that is :mod:`llm_envs.debate.protocol`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from llm_envs.contract import Message
from llm_envs.debate.labels import Lookup, relabel_mentions
from llm_envs.debate.protocol import (
    COMPARISON,
    CONSENSUS,
    CONSENSUS_REASON,
    EVALUATION,
    SOLUTION,
    TAGS,
    DebateResponse,
)

__all__ = [
    "RecordedTurn",
    "clip",
    "format_turn",
    "format_turns_by_round",
    "round_instruction",
    "system_prompt",
]

_CLIP_MARK = " …[clipped]"
# What the system prompt asks for in each tag of the contract.
_TAG_GUIDE = {
    SOLUTION: "your answer to the question, with your reasoning",
    EVALUATION: "your assessment of the other agents' answers and judgements, or N/A",
    COMPARISON: "votes between two other agents, one per line, written "
    '"Agent A > Agent B" (A is better) or "Agent A = Agent B" (equally good); or N/A',
    CONSENSUS: "YES if you agree with the other agents and the debate can end, otherwise NO",
    CONSENSUS_REASON: "why you agree or disagree",
}


@dataclass(frozen=True)
class RecordedTurn:
    """One agent's answer in one round, as the debate remembers it.

    Attributes:
        agent: the author's index.
        round: 1-based round number.
        text: the raw action text, verbatim.
        response: the parsed answer, or ``None`` when the text broke the contract.
        error: the parse error message, or ``None``.
        prompt: the chat the agent was shown for this turn.
    """

    agent: int
    round: int
    text: str
    response: DebateResponse | None
    error: str | None = None
    prompt: tuple[Message, ...] = ()


def system_prompt(agent_id: int, num_agents: int) -> str:
    """The system message: who the agent is and the five-tag XML contract it must follow."""
    others = _others(agent_id, num_agents, ", ")
    return (
        f"You are Agent {agent_id} in a debate among {num_agents} agents "
        f"(Agent 0 to Agent {num_agents - 1}). All agents answer the same question, "
        "one at a time, over several rounds. You judge the other agents' answers and "
        "try to reach agreement on the best one.\n\n"
        "Reply with exactly these five tags, in this order:\n"
        + "".join(f"<{tag}>{_TAG_GUIDE[tag]}</{tag}>\n" for tag in TAGS)
        + "\nRules:\n"
        f"- Never include yourself (Agent {agent_id}) in a comparison; compare only "
        f"{others}.\n"
        f"- Reason in <{EVALUATION}> before you vote in <{COMPARISON}>.\n"
        "- Write nothing outside the five tags."
    )


def clip(text: str, max_chars: int) -> str:
    """Clip ``text`` to ``max_chars`` characters, marking the cut (per-field clipping)."""
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + _CLIP_MARK


def format_turn(
    turn: RecordedTurn,
    max_chars: int,
    rename: Lookup | None = None,
    label: int | None = None,
) -> str:
    """Render one recorded answer for another agent's prompt, each field clipped.

    Args:
        turn: the answer.
        max_chars: per-field clip length.
        rename: with shuffled labels, ``rename[k]`` is the label under which the
            reader knows the agent its author calls "Agent k": every mention in
            the answer is rewritten so (:func:`relabel_mentions`). None: as written.
        label: the reader's label for the author (None: its seat).
    """
    header = f"[Agent {turn.agent if label is None else label}]"
    r = turn.response
    if r is None:
        return f"{header}\n(no valid answer: the reply did not follow the required format)"

    def field(text: str) -> str:
        return clip(text if rename is None else relabel_mentions(text, rename), max_chars)

    consensus = "YES" if r.consensus else "NO"
    return (
        f"{header}\n"
        f"Solution: {field(r.solution)}\n"
        f"Evaluation: {field(r.evaluation)}\n"
        f"Comparison: {field(r.comparison_text) or 'N/A'}\n"
        f"Consensus: {consensus}: {field(r.consensus_reason)}"
    )


def format_turns_by_round(
    turns: Sequence[RecordedTurn],
    max_chars: int,
    current_round: int | None = None,
    render: Callable[[RecordedTurn], str] | None = None,
) -> str:
    """Render answers grouped under ``Round k`` headings, in the order given.

    ``render`` renders one answer (default: :func:`format_turn` as written).
    """
    blocks: list[str] = []
    last_round = None
    for turn in turns:
        if turn.round != last_round:
            suffix = " (in progress)" if turn.round == current_round else ""
            blocks.append(f"=== Round {turn.round}{suffix} ===")
            last_round = turn.round
        blocks.append(render(turn) if render else format_turn(turn, max_chars))
    return "\n\n".join(blocks)


def shuffled_within_rounds(
    turns: Sequence[RecordedTurn], rng: np.random.Generator
) -> list[RecordedTurn]:
    """The turns with each round's answers in a random order; the rounds stay in order.

    Example:
        >>> turns = [RecordedTurn(a, r, "", None, None) for r in (1, 2) for a in range(3)]
        >>> shown = shuffled_within_rounds(turns, np.random.default_rng(0))
        >>> [t.round for t in shown], sorted(t.agent for t in shown[:3])
        ([1, 1, 1, 2, 2, 2], [0, 1, 2])
    """
    out: list[RecordedTurn] = []
    start = 0
    for end in range(1, len(turns) + 1):
        if end == len(turns) or turns[end].round != turns[start].round:
            block = list(turns[start:end])
            out.extend(block[i] for i in rng.permutation(len(block)))
            start = end
    return out


_MAX_LISTED_OTHERS = 8
"""Beyond this many other agents, prompts name them as a range: a prompt listing
every other agent would grow with ``num_agents``, and N such prompts with its square."""


def _others(agent_id: int, num_agents: int, separator: str) -> str:
    """Every agent but ``agent_id``: listed when few, as a range when many."""
    if num_agents - 1 <= _MAX_LISTED_OTHERS:
        others = [j for j in range(num_agents) if j != agent_id]
        return separator.join(f"Agent {j}" for j in others) if separator else _agents_list(others)
    return f"the other agents (Agent 0 to Agent {num_agents - 1}, except Agent {agent_id})"


def _agents_list(agents: Sequence[int]) -> str:
    contiguous = (
        list(agents) == list(range(agents[0], agents[0] + len(agents))) if agents else False
    )
    if len(agents) > _MAX_LISTED_OTHERS and contiguous:
        return f"Agent {agents[0]} to Agent {agents[-1]}"
    names = [f"Agent {a}" for a in agents]
    if len(names) <= 2:
        return " and ".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def round_instruction(
    agent_id: int,
    num_agents: int,
    round_number: int,
    max_rounds: int,
    spoken_this_round: Sequence[int],
) -> str:
    """The instruction closing an agent's prompt (the recipe's round 1 and later rounds).

    Round 1 has three cases so that nobody is asked to compare answers that do
    not exist yet: the first speaker only proposes; the second evaluates the
    first and proposes, without comparisons; later speakers evaluate and may
    compare only agents who already answered this round. From round 2 on,
    agents judge the earlier solutions, evaluations and comparisons (meta-judging)
    and compare any two other agents.

    Args:
        agent_id: the acting agent.
        num_agents: agents in the debate.
        round_number: 1-based round of the upcoming turn.
        max_rounds: rounds before the debate is cut off.
        spoken_this_round: agents who already answered in this round, in order.
    """
    header = f"This is round {round_number} of at most {max_rounds}. You are Agent {agent_id}."
    earlier = [a for a in spoken_this_round if a != agent_id]
    if round_number == 1 and not earlier:
        body = (
            f"You answer first. Propose your solution. Write N/A in <{EVALUATION}> and in "
            f"<{COMPARISON}>: there is nothing to judge yet."
        )
    elif round_number == 1 and len(earlier) == 1:
        body = (
            f"Evaluate the answer of Agent {earlier[0]} in <{EVALUATION}>, then propose your "
            f"own solution. Write N/A in <{COMPARISON}>: one other answer is not enough to "
            "compare."
        )
    elif round_number == 1:
        body = (
            f"Evaluate the answers of {_agents_list(earlier)} in <{EVALUATION}> and propose "
            f"your own solution. In <{COMPARISON}>, compare only agents who have answered this "
            f"round ({_agents_list(earlier)}), never yourself."
        )
    else:
        body = (
            f"Read the earlier solutions, evaluations and comparisons. In <{EVALUATION}>, judge "
            "both the solutions and how well the other agents judged each other. Then give "
            f"your best solution, and in <{COMPARISON}> compare pairs among "
            f"{_others(agent_id, num_agents, '')}, never yourself."
        )
    consensus = (
        f"Say YES in <{CONSENSUS}> only if you agree with the other agents' answers; the "
        "debate ends when every agent says YES in the same round."
    )
    return f"{header}\n{body}\n{consensus}"
