r"""Scripted coders for the code-collaboration environment: no model, deterministic.

Each agent is a :class:`~llm_envs.family.Agent` (``agent(observation, info)
-> str``) that reads only the chat a model would get. They drive
:mod:`llm_envs.code_collab` end to end in tests, demos and benchmarks:

* :class:`ScriptedCoder` answers from a list of attempts and moves to the next
  one each time the environment's feedback reports a failure (a failing test, a
  missing function, a syntax error): a helper that writes a wrong ``aux`` first
  and fixes it after the level feedback.
* :class:`CanonicalCoder` writes the data set's reference solution of the
  problem in its prompt (HumanEval, MBPP).
* :class:`GarbageCoder` writes text that is not the asked-for code.

Example:
    >>> helper = ScriptedCoder(["def aux(x):\n    return x", "def aux(x):\n    return 2 * x"])
    >>> first = {"messages": [{"role": "user", "content": "Write aux."}]}
    >>> helper(first, {}).splitlines()[1]
    '    return x'
    >>> later = {"messages": [*first["messages"],
    ...     {"role": "assistant", "content": "def aux(x):\n    return x"},
    ...     {"role": "user", "content": "- Tests: 0/1 passed\nRevise your `aux(...)`."}]}
    >>> helper(later, {}).splitlines()[1]
    '    return 2 * x'
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from llm_envs.code_collab.feedback import feedback_reports_failure
from llm_envs.contract import Message, Observation
from llm_envs.tasks.problems import CodeProblem

__all__ = ["CanonicalCoder", "GarbageCoder", "ScriptedCoder", "reference_solution"]


def _messages(observation: Observation) -> list[Message]:
    messages = observation.get("messages") if isinstance(observation, Mapping) else None
    if not isinstance(messages, list) or not messages:
        raise TypeError("a coder needs a chat observation {'messages': [...]}")
    return messages


class ScriptedCoder:
    """Answers from a script of attempts, revising when the feedback reports a failure.

    The attempt it gives is the number of earlier feedback messages (user
    messages after the first) that reported a failure, capped at the last
    attempt: a function of the observation alone, so it behaves the same in
    forks. With ``advance="every_turn"`` it moves on at every turn instead
    (useful with the ``plain`` and ``expert_edits`` modes, whose feedback has
    no test results).

    Args:
        attempts: its answers, in order (one string: always the same answer).
        advance: ``"on_failure"`` or ``"every_turn"``.
    """

    def __init__(
        self,
        attempts: Sequence[str] | str,
        *,
        advance: Literal["on_failure", "every_turn"] = "on_failure",
    ) -> None:
        self.attempts = (attempts,) if isinstance(attempts, str) else tuple(attempts)
        if not self.attempts or not all(isinstance(a, str) for a in self.attempts):
            raise ValueError("attempts must be one or more strings")
        if advance not in ("on_failure", "every_turn"):
            raise ValueError(f"advance must be 'on_failure' or 'every_turn', got {advance!r}")
        self.advance = advance

    def __call__(self, observation: Observation, info: Mapping[str, Any]) -> str:
        """Return the attempt for this turn."""
        feedback = [m["content"] for m in _messages(observation)[1:] if m["role"] == "user"]
        if self.advance == "on_failure":
            feedback = [text for text in feedback if feedback_reports_failure(text)]
        return self.attempts[min(len(feedback), len(self.attempts) - 1)]


def reference_solution(problem: CodeProblem) -> str | None:
    """The problem's reference solution as a whole answer (None when the data set has none).

    HumanEval's ``canonical_solution`` continues the prompt (the body only), so
    the answer is the prompt plus it; MBPP's is already a whole program.
    """
    solution = problem.canonical_solution
    if solution is None:
        return None
    defines_entry = re.search(
        rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{re.escape(problem.entry_point)}[ \t]*\(",
        solution,
        re.MULTILINE,
    )
    return solution if defines_entry else problem.prompt + solution


class CanonicalCoder:
    """Writes the reference solution of the problem its first prompt poses.

    It finds the problem whose ``prompt`` appears in the first user message
    (the longest such prompt, should one contain another) and answers with
    ``solutions[task_id]`` if given, else :func:`reference_solution`. For a
    problem it does not know, or one without a reference, it answers ``""``.

    Args:
        problems: the problems it may be asked.
        solutions: answers by ``task_id``, overriding the data set's references
            (CoopHumanEval has none).
    """

    def __init__(
        self, problems: Iterable[CodeProblem], solutions: Mapping[str, str] | None = None
    ) -> None:
        solutions = dict(solutions or {})
        self._answers: list[tuple[str, str]] = []
        for problem in problems:
            answer = solutions.get(problem.task_id) or reference_solution(problem)
            if answer is not None:
                self._answers.append((problem.prompt.strip(), answer))
        # Longest prompts first, so that a prompt contained in another never wins.
        self._answers.sort(key=lambda item: -len(item[0]))
        self._cache: dict[str, str] = {}

    def __call__(self, observation: Observation, info: Mapping[str, Any]) -> str:
        """Return the reference answer of the posed problem (``""`` if unknown)."""
        first = _messages(observation)[0]["content"]
        if first not in self._cache:
            self._cache[first] = next((a for p, a in self._answers if p and p in first), "")
        return self._cache[first]


_GARBAGE = (
    "I'm sorry, I cannot help with that.",
    "Here is the function you asked for:",
    "def broken(:\n    return",
    "```\n```",
    "<think>Let me think about it.</think>",
    "print('hello')",
    "The answer is 42.",
    "",
)


class GarbageCoder:
    """Writes text that is not the asked-for code (prose, broken code, nothing).

    Deterministic for a seed and an observation.

    Args:
        seed: seed of its choices.
    """

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def __call__(self, observation: Observation, info: Mapping[str, Any]) -> str:
        """Return one piece of garbage."""
        messages = _messages(observation)
        rng = random.Random(f"{self.seed}:{len(messages)}:{messages[0]['content'][:200]}")
        return rng.choice(_GARBAGE)
