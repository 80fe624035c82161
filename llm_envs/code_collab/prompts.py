"""The prompts of code collaboration: each agent's first prompt and its revise instruction.

A helper writes ``aux``; the main agent writes the problem's entry point and may
call ``aux``; in the single-agent setting the main agent alone writes the entry
point. Every prompt tells the agent what is kept of its answer (the MAGRPO paper: only
``aux`` from the helper, only the entry point from the main agent, plus their
imports) and to answer with code only. This module only formats text.
"""

from __future__ import annotations

from typing import Final, Literal

from llm_envs.code_collab.rewards import AUX_NAME
from llm_envs.tasks.problems import CodeProblem

__all__ = ["HELPER", "MAIN", "Role", "first_prompt", "revise_instruction"]

Role = Literal["helper", "main"]
HELPER: Final = "helper"
MAIN: Final = "main"

_CODE_ONLY = "Output only the code: no explanations, no examples, no tests."


def _function_of(role: Role, problem: CodeProblem) -> str:
    return AUX_NAME if role == HELPER else problem.entry_point


def first_prompt(problem: CodeProblem, role: Role, num_agents: int) -> str:
    r"""The turn-1 prompt of ``role`` for ``problem``.

    Example:
        >>> from llm_envs.tasks import CodeProblem
        >>> p = CodeProblem("demo/0", "def double(x):\n    '''Twice x.'''\n", "double", ())
        >>> print(first_prompt(p, "main", 1).splitlines()[0])
        Solve this coding problem by implementing the function `double`.
    """
    entry = problem.entry_point
    solve = f"Solve this coding problem by implementing the function `{entry}`."
    signature = f"- Implement `{entry}` with the signature given in the problem."
    keep_entry = f"- Only `{entry}` and your imports are kept: put everything else inside it."
    teammate: list[str] = []
    if role == HELPER:
        opening = (
            "Write a helper function for this coding problem. A teammate implements "
            f"the main function `{entry}` at the same time and may call yours."
        )
        rules = [
            f"- Define one function named `{AUX_NAME}` that computes something useful "
            f"for solving the problem, and return its result. Choose its parameters.",
            f"- Do not implement `{entry}`: only `{AUX_NAME}` and your imports are kept.",
        ]
    elif num_agents == 1:
        opening, rules = solve, [signature, keep_entry]
    else:
        opening = solve
        teammate = [
            f"A teammate writes a helper function `{AUX_NAME}(...)` at the same time; "
            "you may call it.",
            "",
        ]
        rules = [
            signature,
            f"- You may call `{AUX_NAME}(...)` and use its result; do not define "
            f"`{AUX_NAME}` yourself.",
            keep_entry,
        ]
    rules.append(f"- {_CODE_ONLY}")
    text = problem.prompt.strip("\n")
    return "\n".join([opening, "", "Problem:", text, "", *teammate, "Instructions:", *rules])


def revise_instruction(problem: CodeProblem, role: Role, *, plain: bool = False) -> str:
    """The closing instruction of every prompt after the first.

    Args:
        problem: the problem.
        role: whose prompt it is.
        plain: the wording of the ``plain`` external mode, which shows no diagnostics.
    """
    name = _function_of(role, problem)
    if plain:
        return f"Review your previous answer and revise `{name}(...)` if needed. {_CODE_ONLY}"
    return f"Revise your `{name}(...)` accordingly. {_CODE_ONLY}"
